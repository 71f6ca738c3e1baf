import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS: under NodeNext its default import is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

type Json = Record<string, any>;

const BASE = 'urn:customer-portal:openapi';

/**
 * Checks real responses against an OpenAPI document with ajv (JSON Schema 2020-12, formats on):
 * the status must be documented for the operation, the documented headers marked required must be
 * there, and a JSON body must validate against the documented schema; an undocumented body fails.
 * Records each operation and status seen, so a test can require that all of them were.
 */
export function createResponseChecker(document: Json) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  // The components, under an id the response schemas' references are rewritten to.
  ajv.addSchema({ $id: BASE, components: document.components });
  const compiled = new Map<string, ValidateFunction>();
  const seen = new Set<string>();

  const resolve = (item: Json): Json => {
    if (typeof item?.$ref !== 'string') return item;
    const path = (item.$ref as string).replace(/^#\//, '').split('/');
    return resolve(path.reduce((node: Json, key) => node[key.replace(/~1/g, '/').replace(/~0/g, '~')], document));
  };
  const rebase = (schema: unknown): unknown =>
    JSON.parse(JSON.stringify(schema).replace(/"#\/components\//g, `"${BASE}#/components/`));

  function operationOf(method: string, template: string): Json {
    const operation = document.paths[template]?.[method.toLowerCase()];
    if (operation === undefined) throw new Error(`the document has no ${method} ${template}`);
    return operation;
  }

  return {
    seen,
    /** Throws, naming what differs, unless `res` (its body already read as `text`) is what the document says. */
    check(method: string, template: string, res: { status: number; headers: Headers }, text: string): void {
      const where = `${method} ${template} → ${res.status}`;
      const operation = operationOf(method, template);
      const documented = operation.responses[String(res.status)];
      if (documented === undefined)
        throw new Error(`${where}: status not in the document (body ${text.slice(0, 200)})`);
      const response = resolve(documented);
      for (const [name, spec] of Object.entries<Json>(response.headers ?? {})) {
        if (resolve(spec).required === true && !res.headers.has(name))
          throw new Error(`${where}: header ${name} missing`);
      }
      const content = response.content as Json | undefined;
      if (content === undefined) {
        if (text !== '') throw new Error(`${where}: a body the document does not have: ${text.slice(0, 200)}`);
      } else if (content['application/json'] !== undefined) {
        const type = res.headers.get('content-type') ?? '';
        if (!type.startsWith('application/json')) throw new Error(`${where}: Content-Type ${type}, not JSON`);
        const key = `${where}`;
        let validate = compiled.get(key);
        if (validate === undefined) {
          validate = ajv.compile(rebase(content['application/json'].schema) as object);
          compiled.set(key, validate);
        }
        if (!validate(JSON.parse(text))) {
          throw new Error(
            `${where}: body does not match the document: ${ajv.errorsText(validate.errors)} (body ${text.slice(0, 300)})`,
          );
        }
      }
      seen.add(`${method.toUpperCase()} ${template} ${res.status}`);
    },
    /**
     * Throws, naming what differs, unless a webhook call the portal made is what the document's
     * `webhooks` section says of its event type: the body validates against the call's schema, and
     * each header parameter is sent (when required) and matches its schema.
     */
    checkCall(call: { body: string; headers: Record<string, string> }): void {
      const body = JSON.parse(call.body);
      const type = String(body.type);
      const where = `webhook call ${type}`;
      const operation = document.webhooks?.[type]?.post as Json | undefined;
      if (operation === undefined) throw new Error(`the document has no ${where}`);
      const validator = (key: string, schema: unknown) => {
        let validate = compiled.get(key);
        if (validate === undefined) compiled.set(key, (validate = ajv.compile(rebase(schema) as object)));
        return validate;
      };
      const validateBody = validator(where, operation.requestBody.content['application/json'].schema);
      if (!validateBody(body))
        throw new Error(`${where}: body does not match the document: ${ajv.errorsText(validateBody.errors)}`);
      for (const parameter of (operation.parameters as Json[]).map(resolve)) {
        const name = Object.keys(call.headers).find(
          (header) => header.toLowerCase() === String(parameter.name).toLowerCase(),
        );
        if (name === undefined) {
          if (parameter.required === true) throw new Error(`${where}: header ${parameter.name} missing`);
          continue;
        }
        const validateHeader = validator(`${where} ${parameter.name}`, parameter.schema);
        if (!validateHeader(call.headers[name])) {
          throw new Error(
            `${where}: header ${parameter.name} does not match the document: ${ajv.errorsText(validateHeader.errors)} (${call.headers[name]})`,
          );
        }
      }
      seen.add(`CALL ${type}`);
    },
    /** `METHOD template status` of every response the document gives an operation itself (not the shared ones). */
    ownResponses(): string[] {
      const all: string[] = [];
      for (const [template, item] of Object.entries<Json>(document.paths)) {
        for (const [method, operation] of Object.entries<Json>(item)) {
          if (method === 'parameters') continue;
          for (const [status, response] of Object.entries<Json>(operation.responses)) {
            if (typeof response.$ref === 'string') continue;
            all.push(`${method.toUpperCase()} ${template} ${status}`);
          }
        }
      }
      return all;
    },
  };
}
