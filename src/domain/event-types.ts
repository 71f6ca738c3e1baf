import { createRequire } from 'node:module';
import type { Ajv2020, ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import type addFormatsModule from 'ajv-formats';
import { PortalError } from '../errors.js';

/** What `eventTypes.define` takes: the data's JSON Schema (draft 2020-12), and words for people. */
export interface EventTypeDefinition {
  schema: Record<string, unknown>;
  description?: string;
  example?: unknown;
  deprecated?: boolean;
}

/** One entry of the event catalogue, as `GET /event-types` lists it. */
export interface EventType {
  name: string;
  description: string | null;
  /** The JSON Schema of the event's `data`; `null` for a type no schema was defined for (any JSON object). */
  schema: Record<string, unknown> | null;
  example: unknown;
  deprecated: boolean;
}

/** Where a schema refuses data: the first failing instance path, as a dotted path (`data.customer.id`), and why. */
function firstFailure(errors: ErrorObject[] | null | undefined): { path: string; problem: string } {
  const error = errors?.[0];
  if (error === undefined) return { path: 'data', problem: 'does not match the schema' };
  const segments = error.instancePath
    .split('/')
    .slice(1)
    .map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'));
  const missing =
    error.keyword === 'required' ? (error.params as { missingProperty: string }).missingProperty : undefined;
  const path = ['data', ...segments, ...(missing === undefined ? [] : [missing])].join('.');
  return { path, problem: missing === undefined ? (error.message ?? 'does not match the schema') : 'is required' };
}

const require = createRequire(import.meta.url);

/**
 * A new ajv (draft 2020-12, with the standard formats). ajv and ajv-formats are CommonJS, required
 * with the first schema compiled rather than imported with the portal: with the library's schemas
 * compiled they are heap that every process which checks no event's data would carry and every
 * collection would mark (the figures: "What the heap holds", docs/performance.md).
 * Not strict: a host's schema may carry keywords of its own (x-…, titles), as JSON Schema allows.
 */
function newAjv(): Ajv2020 {
  const { Ajv2020: Ajv } = require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js');
  // ajv-formats' export is the function, with itself as `default` too.
  const formats = require('ajv-formats') as typeof addFormatsModule & { default?: typeof addFormatsModule };
  const addFormats = (formats.default ?? formats) as unknown as (ajv: Ajv2020) => Ajv2020;
  return addFormats(new Ajv({ strict: false, allErrors: false }));
}

/**
 * The library's own types' validators, shared by every catalogue of the process, by the schema's
 * JSON text: those schemas are the library's constants. Each is compiled when data of its type is
 * first checked, which only a host publishing one of the library's types does (the library stores
 * its own events with the write that makes them): compiling all of them at start took most of
 * what a `createPortal` cost, and their code stayed in the heap of every process. One entry per
 * built-in schema, so it stays that size.
 */
const builtInValidators = new Map<string, ValidateFunction>();
let builtInAjv: Ajv2020 | undefined;

function builtInValidator(schema: Record<string, unknown>): ValidateFunction {
  const key = JSON.stringify(schema);
  let validate = builtInValidators.get(key);
  if (validate === undefined) {
    builtInAjv ??= newAjv();
    validate = builtInAjv.compile(structuredClone(schema));
    builtInValidators.set(key, validate);
  }
  return validate;
}

/**
 * The event catalogue: each of the portal's `eventTypes`, with the JSON Schema its data must match
 * once one is defined (the library's own types come defined). Schemas are compiled by ajv (draft
 * 2020-12, with the standard formats) once, when defined (the library's once a process): a publish
 * checks its data against the compiled function.
 */
export function createEventCatalogue(
  eventTypes: readonly string[],
  builtIn: Readonly<Record<string, EventTypeDefinition>> = {},
) {
  let ajv: Ajv2020 | undefined;
  /** A defined type; a built-in one's `validate` is compiled with the first check of its data. */
  const defined = new Map<string, EventTypeDefinition & { validate?: ValidateFunction }>();

  function define(name: string, definition: EventTypeDefinition): void {
    if (!eventTypes.includes(name)) {
      throw new TypeError(
        `eventTypes.define: "${name}" is not one of the eventTypes option (${eventTypes.join(', ')}); add it there first`,
      );
    }
    const { schema, description, example, deprecated } = definition ?? ({} as EventTypeDefinition);
    if (schema === null || typeof schema !== 'object' || Array.isArray(schema))
      throw new TypeError(`eventTypes.define: the schema of "${name}" must be a JSON Schema object`);
    let validate: ValidateFunction;
    ajv ??= newAjv();
    try {
      validate = ajv.compile(structuredClone(schema));
    } catch (error) {
      throw new TypeError(
        `eventTypes.define: the schema of "${name}" is not a valid JSON Schema: ${(error as Error).message}`,
      );
    }
    if (example !== undefined && !validate(example)) {
      const { path, problem } = firstFailure(validate.errors);
      throw new TypeError(
        `eventTypes.define: the example of "${name}" breaks its own schema: ${path.replace(/^data/, 'example')} ${problem}`,
      );
    }
    if (description !== undefined && typeof description !== 'string')
      throw new TypeError(`eventTypes.define: the description of "${name}" must be a string`);
    defined.set(name, { ...copied(schema, description, example, deprecated), validate });
  }

  // The library's own: their examples are checked against their schemas by the library's tests.
  for (const [name, { schema, description, example, deprecated }] of Object.entries(builtIn)) {
    if (!eventTypes.includes(name)) continue;
    const own = copied(schema, description, example, deprecated);
    defined.set(name, own);
  }

  return {
    define,
    /** Every type of the catalogue, in the order of the `eventTypes` option. */
    list(): EventType[] {
      return eventTypes.map((name) => {
        const entry = defined.get(name);
        return {
          name,
          description: entry?.description ?? null,
          schema: entry === undefined ? null : structuredClone(entry.schema),
          example: entry?.example === undefined ? null : structuredClone(entry.example),
          deprecated: entry?.deprecated ?? false,
        };
      });
    },
    /** Throws `EVENT_DATA_INVALID` (400) naming the first path where `data` breaks its type's schema. */
    check(type: string, data: unknown): void {
      const entry = defined.get(type);
      if (entry === undefined) return;
      entry.validate ??= builtInValidator(entry.schema);
      if (entry.validate(data)) return;
      const { path, problem } = firstFailure(entry.validate.errors);
      throw new PortalError('EVENT_DATA_INVALID', type, path, problem);
    },
  };
}

/** A definition's own copies, so that a caller changing its objects later changes nothing here. */
function copied(
  schema: Record<string, unknown>,
  description: string | undefined,
  example: unknown,
  deprecated: boolean | undefined,
): EventTypeDefinition {
  return {
    schema: structuredClone(schema),
    description,
    example: structuredClone(example),
    deprecated: deprecated === true,
  };
}

export type EventCatalogue = ReturnType<typeof createEventCatalogue>;
