import { toJsonSchema, toJsonSchemaDefs, type ConversionConfig, type JsonSchema } from '@valibot/to-json-schema';
import * as v from 'valibot';
import { DEFAULT_BASE_PATH, DEFAULT_EVENT_TYPES } from '../options.js';
import * as shapes from './shapes.js';
import { LIBRARY_EVENT_TYPES } from './event-catalogue.js';
import {
  dryRunInput,
  filterObject,
  webhookFilterInput,
  declineInput,
  recoverBody,
  secretRotationInput,
  signerInput,
  signingLinkInput,
  portalSessionInput,
  signerCorrectionInput,
  voidInput,
  signingSignatureInput,
  identifyInput,
  webhookInput,
} from '../domain/inputs.js';
import { TEST_EVENT_TYPE } from '../domain/webhooks.js';
import type { Route } from '../http/handler.js';
import { type Json, type Operation, type SchemaName, failure } from '../http/route-doc.js';
import { type RouteServices, routeTable } from '../http/route-table.js';
import { idPattern } from '../shared/ids.js';
import { VERSION } from '../shared/version.js';

/**
 * The OpenAPI 3.1 document of the HTTP API. Every schema in it is generated from a valibot schema:
 * the inputs are the very schemas the routes validate with, the outputs those of `schemas.ts`. Built
 * once at import; `npm run build` also writes it to `dist/openapi.json`.
 */

const conversion: Omit<ConversionConfig, 'definitions'> = {
  target: 'draft-2020-12',
  // `check` and `rawCheck` are functions JSON Schema cannot hold; each schema that uses one carries
  // `metadata` saying what it checks. Any other unsupported feature still throws, at build time.
  ignoreActions: ['check', 'raw_check', 'raw_transform'],
  overrideRef: ({ referenceId }) => `#/components/schemas/${referenceId}`,
  // A file part: binary, which OpenAPI 3.1 writes as a string (its media type comes from `metadata`).
  // A webhook's filter is checked by a function: an object, whose grammar its description gives.
  overrideSchema: ({ valibotSchema }) =>
    valibotSchema.type === 'blob'
      ? ({ type: 'string' } as JsonSchema)
      : valibotSchema === filterObject
        ? ({ type: 'object' } as JsonSchema)
        : undefined,
};

/** The components, checked to hold every name a route may give. */
function everyName<T extends Record<SchemaName, v.GenericSchema>>(schemas: T): T {
  return schemas;
}

const componentSchemas = everyName({
  Error: shapes.errorBody,
  Webhook: shapes.webhook,
  WebhookList: shapes.webhookList,
  WebhookInput: webhookInput(DEFAULT_EVENT_TYPES),
  WebhookHealth: shapes.webhookHealth,
  WebhookStats: shapes.webhookStats,
  RecoverInput: recoverBody,
  RecoverResult: shapes.recoverResult,
  WebhookFilterInput: webhookFilterInput,
  DryRunInput: dryRunInput(DEFAULT_EVENT_TYPES),
  DryRunResult: shapes.dryRunResult,
  WebhookPublicKey: shapes.webhookPublicKey,
  WebhookPublicKeys: shapes.webhookPublicKeys,
  WebhookPublicKeysLink: shapes.webhookPublicKeysLink,
  Delivery: shapes.delivery,
  DeliveryAttempt: shapes.deliveryAttempt,
  DeliveryList: shapes.deliveryList,
  FileEntry: shapes.fileEntry,
  FileList: shapes.fileList,
  Agreement: shapes.agreement,
  AgreementSigner: shapes.agreementSigner,
  AgreementDocument: shapes.agreementDocument,
  AgreementEventData: shapes.agreementEventData,
  AgreementList: shapes.agreementList,
  SignerInput: signerInput,
  AgreementForm: shapes.agreementForm,
  DownloadLink: shapes.downloadLink,
  Verification: shapes.verification,
  Attachment: shapes.attachment,
  FileUploadForm: shapes.fileUploadForm,
  AttachmentUploadForm: shapes.attachmentUploadForm,
  DirectoryInput: shapes.directoryInput,
  SecretRotationInput: secretRotationInput,
  CustomerCreatedCall: shapes.webhookCallBody('customer-created', shapes.hostEventData),
  WebhookTestCall: shapes.webhookCallBody(TEST_EVENT_TYPE, shapes.webhookTestData),
  AgreementSignerEventData: shapes.agreementSignerEventData,
  SigningLinkInput: signingLinkInput,
  SigningLink: shapes.signingLink,
  SigningView: shapes.signingView,
  Branding: shapes.branding,
  BrandingAnswer: v.strictObject({ branding: v.nullable(shapes.branding) }),
  SignInput: signingSignatureInput,
  IdentifyInput: identifyInput,
  IdentificationCodeSent: shapes.identificationCodeSent,
  DeclineInput: declineInput,
  VoidInput: voidInput,
  SignerCorrectionInput: signerCorrectionInput,
  AuditEntry: shapes.auditEntry,
  AuditTrail: shapes.auditTrail,
  EventType: shapes.eventType,
  EventTypeList: shapes.eventTypeList,
  PortalSessionInput: portalSessionInput,
  PortalSession: shapes.portalSession,
  // The calls of the event types the library emits, from the event catalogue.
  ...Object.fromEntries(
    LIBRARY_EVENT_TYPES.map(({ name, data }) => [callSchemaName(name), shapes.webhookCallBody(name, data)]),
  ),
});

/** A schema outside the components (a parameter's), converted the same way. */
const schemaOf = (schema: v.GenericSchema) => {
  const { $schema: _dialect, ...rest } = toJsonSchema(schema, conversion) as Json;
  return rest;
};

const common = (name: string) => ({ $ref: `#/components/responses/${name}` });
const EXTENSION =
  'An extension route beyond the Customer Portal API spec; served unless the portal is made with `extensions: false`.';
const ALWAYS_SERVED =
  'An extension route beyond the Customer Portal API spec, served even with `extensions: false`: a link the portal handed out keeps working.';

const isValibot = (schema: v.GenericSchema | Json): schema is v.GenericSchema =>
  (schema as { kind?: unknown }).kind === 'schema';

/**
 * A route's operation as the document gives it: with what every operation answers (401 unless
 * public, 404 when no route matches, 405, 500, 503), its security, and the extension's mark.
 */
function operation(route: Route, spec: Operation): Json {
  const { signer, responses, description, parameters, ...rest } = spec;
  // The query parameters a route takes are read from its operation's own parameters, not from a reference.
  for (const parameter of parameters ?? []) {
    if ('$ref' in parameter && parameter.$ref !== '#/components/parameters/Idempotency-Key') {
      throw new Error(
        `${spec.operationId}: only the Idempotency-Key header is referenced; write ${parameter.$ref} out`,
      );
    }
  }
  const isPublic = route.public === true && signer !== true;
  const mark = route.extension === undefined ? undefined : route.extension === true ? EXTENSION : ALWAYS_SERVED;
  const text = [mark, description].filter((part) => part !== undefined).join(' ');
  return {
    ...rest,
    ...(text === '' ? {} : { description: text }),
    ...(parameters === undefined
      ? {}
      : {
          parameters: parameters.map((parameter) =>
            '$ref' in parameter || !isValibot(parameter.schema)
              ? parameter
              : { ...parameter, schema: schemaOf(parameter.schema) },
          ),
        }),
    ...(isPublic ? { security: [] } : signer ? { security: [{ signingToken: [] }] } : {}),
    responses: {
      ...responses,
      ...(isPublic ? {} : { 401: common(signer ? 'SigningUnauthorized' : 'Unauthorized') }),
      // A portal session's token outside its scopes, or a change with a read-only one.
      ...(isPublic || signer || responses[403] !== undefined ? {} : { 403: common('SessionForbidden') }),
      404: responses[404] ?? common('NotFound'),
      405: common('MethodNotAllowed'),
      500: common('InternalError'),
      503: common('Unavailable'),
    },
    ...(route.extension === undefined ? {} : { 'x-extension': true }),
  };
}

/** Each `:name` of a route's path has its path parameter in the operation, and no other is listed. */
function checkPathParameters(route: Route, spec: Operation): void {
  const inPath = [...route.path.matchAll(/:(\w+)/g)].map((match) => match[1]).sort();
  const listed = (spec.parameters ?? [])
    .flatMap((parameter) => ('in' in parameter && parameter.in === 'path' ? [parameter.name] : []))
    .sort();
  if (inPath.join() !== listed.join())
    throw new Error(
      `${spec.operationId}: the path ${route.path} has the parameters [${inPath}], its operation lists [${listed}]`,
    );
}

/** A response as a HEAD answers it: the same status and headers, no body. */
function withoutBody(item: Json): Json {
  if (typeof item.$ref === 'string') return { $ref: `${item.$ref}NoBody` };
  const { content: _content, ...rest } = item;
  return rest;
}

/** A HEAD's operation: every answer without its body, the shared ones too. */
function headOf(built: Json): Json {
  return {
    ...built,
    responses: Object.fromEntries(
      Object.entries(built.responses as Record<string, Json>).map(([status, item]) => [status, withoutBody(item)]),
    ),
  };
}

/** The paths of the document, from the route table: the routes only keep their services for their handlers, so stand-ins do. */
function pathsOf(routes: Route[]): Record<string, Json> {
  const items: Record<string, Json> = {};
  for (const route of routes) {
    if (route.doc === null) continue;
    checkPathParameters(route, route.doc);
    const item = (items[route.path.replace(/:(\w+)/g, '{$1}')] ??= {});
    for (const method of [route.method].flat()) {
      if (method !== 'HEAD') item[method.toLowerCase()] = operation(route, route.doc);
    }
    if (route.headDoc !== undefined) item.head = headOf(operation(route, route.headDoc));
  }
  return withHeads(items);
}

const errorResponses = {
  Unauthorized: failure(
    'No `Authorization: Bearer <key>` header, a malformed one, an unknown key, or a portal session that expired or was revoked.',
    {
      'WWW-Authenticate': {
        description: '`Bearer realm="customer-portal"`, with `, error="invalid_token"` when a token was given.',
        schema: { type: 'string' },
        required: true,
      },
    },
  ),
  SessionForbidden: failure(
    'A portal session outside its scopes (`webhooks`, `agreements`, `files`; never tickets or sessions), or a change made with a read-only one.',
  ),
  SigningUnauthorized: failure(
    'No signing token, a malformed, altered or unknown one, or one a newer link of the signer has replaced.',
    {
      'WWW-Authenticate': {
        description: '`Bearer realm="customer-portal-signing"`, with `, error="invalid_token"` for a replaced link.',
        schema: { type: 'string' },
        required: true,
      },
    },
  ),
  NotFound: failure('No route matches the path.'),
  MethodNotAllowed: failure('The path exists, but not with this method.', {
    Allow: { description: 'The methods the path has.', schema: { type: 'string' }, required: true },
  }),
  InternalError: failure('An unexpected fault, logged with the request id: `{"message":"Internal error"}`.'),
  Unavailable: failure(
    'The storage cannot be reached for now (a database restarting); nothing was changed unless the message says it may have been. Logged as a warning.',
    {
      'Retry-After': {
        description: 'Seconds to wait before trying again.',
        schema: { type: 'string' },
        required: true,
      },
    },
  ),
};

/** The shared responses as a HEAD answers them: each under its name + `NoBody`, without the Error body. */
const headResponses = Object.fromEntries(
  Object.entries(errorResponses).map(([name, { content: _content, ...rest }]) => [`${name}NoBody`, rest]),
);

/**
 * Every GET route answers HEAD too, with the status and headers of the GET and no body: each path
 * with a `get` and no `head` of its own gets one, made from the `get`.
 */
function withHeads(items: Record<string, Json>): Record<string, Json> {
  return Object.fromEntries(
    Object.entries(items).map(([path, item]) => {
      const get = item.get as Json | undefined;
      if (get === undefined || item.head !== undefined) return [path, item];
      const head = {
        ...headOf(get),
        operationId: `${get.operationId}Head`,
        summary: `${get.summary}: the headers alone`,
        description: 'The answer of the GET without its body.',
      };
      return [path, { ...item, head }];
    }),
  );
}

// The outgoing calls: what a receiver gets (OpenAPI 3.1 `webhooks`).

// One signature, or two during a rotation's grace: `v1,` (HMAC-SHA256) or `v1a,` (ed25519), as the webhook's scheme.
const oneSignature = '(v1,[A-Za-z0-9+/]{43}=|v1a,[A-Za-z0-9+/]{86}==)';
const signatureHeader = { type: 'string', pattern: `^${oneSignature}( ${oneSignature})?$` };
const callParameters = {
  WebhookId: {
    name: 'webhook-id',
    in: 'header',
    required: true,
    description: 'The event id, the same on every retry of the event: drop duplicates by it.',
    schema: schemaOf(v.pipe(v.string(), v.regex(idPattern('evt')))),
  },
  WebhookTimestamp: {
    name: 'webhook-timestamp',
    in: 'header',
    required: true,
    description: 'Unix seconds of this attempt. Refuse a call more than five minutes from your clock.',
    schema: { type: 'string', pattern: '^[0-9]{1,15}$' },
  },
  WebhookSignature: {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description:
      '`v1,` + base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`, keyed with the base64-decoded part of the webhook secret after `whsec_` (Standard Webhooks); for a webhook created with `"signatureScheme": "ed25519"`, `v1a,` + base64 of the ed25519 signature of the same message, verified with the webhook\'s `publicKey` (`whpk_` + base64 of the raw 32-byte key). During a rotation\'s grace two, space-separated, the new key\'s first (`v1,<new> v1,<old>`, or `v1a,…`): the call is genuine when any one matches.',
    schema: signatureHeader,
  },
  XWebhookSignature: {
    name: 'X-Webhook-Signature',
    in: 'header',
    required: true,
    description: "The same value as `webhook-signature`, under the Customer Portal API spec's name.",
    schema: signatureHeader,
  },
  UserAgent: {
    name: 'User-Agent',
    in: 'header',
    required: true,
    description: '`customer-portal/<package version>`.',
    schema: { type: 'string', pattern: '^customer-portal/' },
  },
};

const retryAfter = { 'Retry-After': { description: 'Seconds, or an HTTP date.', schema: { type: 'string' } } };
const callResponses = {
  '2XX': {
    description:
      "Delivered: any 2xx answered within `webhooks.timeoutMs` (15 s by default). The answer's body is read up to 64 KiB and ignored.",
  },
  410: {
    description:
      'Gone: the delivery ends at once, with no more retries, and the webhook is disabled (its health says `gone`).',
  },
  429: {
    description:
      "A failed attempt; the retry waits for `Retry-After` when it asks for longer than the schedule's next step (up to a day).",
    headers: retryAfter,
  },
  503: { description: 'As 429.', headers: retryAfter },
  default: {
    description:
      'Anything else (another status, a redirect, which is never followed, a timeout, a network error) is a failed attempt, retried on `webhooks.retrySchedule`; after the last one the delivery is `failed`.',
  },
};

/** `agreement-created` → `AgreementCreatedCall`, the component of its call's body. */
function callSchemaName(type: string): string {
  return (
    type
      .split(/[-.]/)
      .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
      .join('') + 'Call'
  );
}

/** The call of one event type: a signed `POST` to the webhook's URL, with an example body when the catalogue gives one. */
function webhookCall(type: string, body: string, description: string, example?: unknown): Json {
  const operationId = callSchemaName(type).replace(/^./, (first) => first.toLowerCase());
  const content: Record<string, Json> = { 'application/json': { schema: { $ref: `#/components/schemas/${body}` } } };
  if (example !== undefined) {
    content['application/json'] = {
      ...content['application/json'],
      example: { id: 'evt_9Lw3Nq7Xc2Vb5Zk8Rt1Ym4', type, createdAt: '2026-11-26T10:06:00+00:00', data: example },
    };
  }
  return {
    post: {
      operationId,
      summary: `A ${type} call`,
      description: `${description} Verify the signature on the raw body before acting on the call (\`verifyWebhook\`, or any Standard Webhooks library).`,
      tags: ['Webhook calls'],
      // The portal sends no Authorization: the signature is the call's proof.
      security: [],
      parameters: Object.keys(callParameters).map((name) => ({ $ref: `#/components/parameters/${name}` })),
      requestBody: { required: true, content },
      responses: callResponses,
    },
  };
}

const webhookCalls = {
  'customer-created': webhookCall(
    'customer-created',
    'CustomerCreatedCall',
    'Published by the host (`events.publish`), with the data it gave.',
  ),
  // One entry per type of the event catalogue the library defines, with its description and example.
  ...Object.fromEntries(
    LIBRARY_EVENT_TYPES.map(({ name, description, example }) => [
      name,
      webhookCall(
        name,
        callSchemaName(name),
        `${description} Its schema is also served by \`GET /event-types\`.`,
        example,
      ),
    ]),
  ),
  [TEST_EVENT_TYPE]: webhookCall(
    TEST_EVENT_TYPE,
    'WebhookTestCall',
    'Sent by `POST /webhooks/{webhookId}/test` (`webhooks.sendTest`) to that one webhook, whatever its type.',
  ),
};

function buildDocument(): Json {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Customer Portal API',
      version: VERSION,
      description:
        'The Customer Portal API (v1) served by the `customer-portal` package. Operations marked `x-extension: true` go beyond the spec and are served unless the portal is made with `extensions: false`, except the public keys link of a webhook, which is served always (its description says so). Every error is `{"message": "…"}`.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: DEFAULT_BASE_PATH, description: 'The base path, under the host the portal is mounted on.' }],
    security: [{ bearerAuth: [] }],
    tags: [
      ...['Webhooks', 'Agreements', 'Signing', 'Files', 'Tickets', 'Downloads', 'Portal sessions'].map((name) => ({
        name,
      })),
      {
        name: 'Webhook calls',
        description:
          'The calls the portal makes to webhook URLs, one per event type of the default `eventTypes` (a portal made with types of its own sends those in the same form).',
      },
    ],
    paths: pathsOf(routeTable({} as RouteServices, { extensions: true })),
    webhooks: webhookCalls,
    components: {
      schemas: toJsonSchemaDefs(componentSchemas, conversion),
      responses: { ...errorResponses, ...headResponses },
      parameters: {
        ...callParameters,
        'Idempotency-Key': {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description:
            'Makes a retry of this create safe (the IETF httpapi draft "The Idempotency-Key HTTP Header Field"): 1–255 visible ASCII characters, bare or as a structured-field String (`"…"`), per account, kept 24 hours. The same key with the same content gets the first answer again (`Idempotent-Replayed: true`), creating nothing; with other content, 422; while the first is in progress, 409. Only a created record (201) is kept: after a failure the key is free again.',
          schema: { type: 'string', minLength: 1, maxLength: 257 },
        },
      },
      headers: {
        'Idempotent-Replayed': {
          description:
            '`true` when the answer is the first answer to this `Idempotency-Key`, given again; absent otherwise.',
          schema: { const: 'true' },
        },
        'X-Request-Id': {
          description:
            "The client's own when it sent one of at most 200 characters of `[A-Za-z0-9._:-]`, else a generated UUID.",
          schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,200}$' },
          required: true,
        },
        Location: {
          description: 'The absolute URL of the record made.',
          schema: { type: 'string', format: 'uri' },
          required: true,
        },
        'Content-Range': {
          description: '`bytes <first>-<last>/<size>`, or `bytes */<size>` on a 416.',
          schema: { type: 'string' },
          required: true,
        },
      },
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <key>`.' },
        signingToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'A signing token, from the fragment of a signing link: `Authorization: Bearer <token>`.',
        },
      },
    },
  };
}

/** Freezes `value` and everything in it: the exported document is shared by every importer. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const item of Object.values(value)) deepFreeze(item);
    Object.freeze(value);
  }
  return value;
}

/**
 * The OpenAPI 3.1 document of the whole HTTP API: a plain JSON value, frozen (`structuredClone` it to
 * change a copy); `dist/openapi.json` holds the same.
 */
export const openapi: Readonly<Record<string, unknown>> = deepFreeze(buildDocument());
