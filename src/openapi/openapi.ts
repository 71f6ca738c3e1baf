import { toJsonSchema, toJsonSchemaDefs, type ConversionConfig, type JsonSchema } from '@valibot/to-json-schema';
import * as v from 'valibot';
import { MAX_FORM_BYTES } from '../http/multipart.js';
import { UNIX_SECONDS } from '../domain/download-links.js';
import { idPattern } from '../shared/ids.js';
import { DEFAULT_BASE_PATH, DEFAULT_EVENT_TYPES } from '../options.js';
import * as shapes from './shapes.js';
import { LIBRARY_EVENT_TYPES } from './event-catalogue.js';
import {
  MAX_SECRET_GRACE_MS,
  DRY_RUN_LIMIT,
  dryRunInput,
  filterObject,
  webhookFilterInput,
  declineInput,
  recoverBody,
  secretRotationInput,
  signerInput,
  signingLinkInput,
  signingSignatureInput,
  webhookInput,
} from '../domain/inputs.js';
import { TEST_EVENT_TYPE } from '../domain/webhooks.js';
import { VERSION } from '../shared/version.js';

/**
 * The OpenAPI 3.1 document of the HTTP API. Every schema in it is generated from a valibot schema:
 * the inputs are the very schemas the routes validate with, the outputs those of `schemas.ts`. Built
 * once at import; `npm run build` also writes it to `dist/openapi.json`.
 */

type Json = Record<string, unknown>;

const conversion: Omit<ConversionConfig, 'definitions'> = {
  target: 'draft-2020-12',
  // `check` and `rawCheck` are functions JSON Schema cannot hold; each schema that uses one carries
  // `metadata` saying what it checks. Any other unsupported feature still throws, at build time.
  ignoreActions: ['check', 'raw_check'],
  overrideRef: ({ referenceId }) => `#/components/schemas/${referenceId}`,
  // A file part: binary, which OpenAPI 3.1 writes as a string (its media type comes from `metadata`).
  // A webhook's filter is checked by a function: an object, whose grammar its description gives.
  overrideSchema: ({ valibotSchema }) =>
    valibotSchema.type === 'blob' ? ({ type: 'string' } as JsonSchema) : valibotSchema === filterObject ? ({ type: 'object' } as JsonSchema) : undefined,
};

const componentSchemas = {
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
  SignInput: signingSignatureInput,
  DeclineInput: declineInput,
  AuditEntry: shapes.auditEntry,
  AuditTrail: shapes.auditTrail,
  EventType: shapes.eventType,
  EventTypeList: shapes.eventTypeList,
  // The calls of the event types the library emits, from the event catalogue.
  ...Object.fromEntries(LIBRARY_EVENT_TYPES.map(({ name, data }) => [callSchemaName(name), shapes.webhookCallBody(name, data)])),
};

/** A schema outside the components (a parameter's), converted the same way. */
const schemaOf = (schema: v.GenericSchema) => {
  const { $schema: _dialect, ...rest } = toJsonSchema(schema, conversion) as Json;
  return rest;
};

const ref = (name: keyof typeof componentSchemas) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: keyof typeof componentSchemas) => ({ 'application/json': { schema: ref(name) } });
const header = (name: string) => ({ $ref: `#/components/headers/${name}` });
const REQUEST_ID = { 'X-Request-Id': header('X-Request-Id') };

function response(description: string, name?: keyof typeof componentSchemas, headers: Json = {}): Json {
  return {
    description,
    headers: { ...REQUEST_ID, ...headers },
    ...(name === undefined ? {} : { content: json(name) }),
  };
}
const error = (description: string, headers: Json = {}) => response(description, 'Error', headers);
const common = (name: string) => ({ $ref: `#/components/responses/${name}` });

interface Operation {
  operationId: string;
  summary: string;
  tags: string[];
  description?: string;
  parameters?: Json[];
  requestBody?: Json;
  responses: Record<string, Json>;
  extension?: boolean;
  public?: boolean;
  /** Authorized by a signing token, not an API key (the signer's routes). */
  signer?: boolean;
}

/** Adds what every operation answers: 401 (unless public), 404 (no route), 405, 500, 503. */
function operation(spec: Operation): Json {
  const { extension, public: isPublic, signer, responses, ...rest } = spec;
  return {
    ...rest,
    ...(isPublic ? { security: [] } : signer ? { security: [{ signingToken: [] }] } : {}),
    responses: {
      ...responses,
      ...(isPublic ? {} : { 401: common(signer ? 'SigningUnauthorized' : 'Unauthorized') }),
      404: responses[404] ?? common('NotFound'),
      405: common('MethodNotAllowed'),
      500: common('InternalError'),
      503: common('Unavailable'),
    },
    ...(extension ? { 'x-extension': true } : {}),
  };
}

const pathParameter = (name: string, description: string, schema: Json = { type: 'string' }) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema,
});
const idParameter = (name: string, prefix: 'tck' | 'tcm' | 'tca', what: string) =>
  pathParameter(name, `The ${what} id (\`${prefix}_…\`); another shape is a 400.`, schemaOf(v.pipe(v.string(), v.regex(idPattern(prefix)))));
const messageParameters = [idParameter('ticketId', 'tck', 'ticket'), idParameter('messageId', 'tcm', 'message')];
const attachmentParameters = [...messageParameters, idParameter('attachmentId', 'tca', 'attachment')];
const webhookIdParameter = pathParameter('webhookId', 'The webhook id (`wbh_…`); an id of another shape is a 404.');

const location = { Location: header('Location') };
/** What a create made with an `Idempotency-Key` adds: the header in, the replay mark out, 409 and 422. */
const idempotencyKeyParameter = { $ref: '#/components/parameters/Idempotency-Key' };
const created = { ...location, 'Idempotent-Replayed': header('Idempotent-Replayed') };
const RETRY_AFTER = { description: 'Seconds to wait before trying again.', schema: { type: 'string' } };
const keyInProgress = 'a request with the same `Idempotency-Key` is still in progress (on any instance; `Retry-After: 1`)';
const keyReused = error('The `Idempotency-Key` was used in the last 24 hours for a request with other content.');
/** A multipart upload of one file in a part named `file`. */
const uploadBody = (name: 'FileUploadForm' | 'AttachmentUploadForm') => ({
  required: true,
  content: { 'multipart/form-data': { schema: ref(name), encoding: { file: { contentType: 'application/octet-stream' } } } },
});
const extension = 'An extension route beyond the Customer Portal API spec; served unless the portal is made with `extensions: false`.';

function download(method: 'get' | 'head'): Json {
  const built = operation({
    operationId: method === 'get' ? 'download' : 'headDownload',
    summary:
      method === 'get' ? 'Download an attachment, a file or an agreement document through a signed link' : 'The headers of a download, without its bytes',
    tags: ['Downloads'],
    public: true,
    description:
      'The `link` of a download-link answer (a ticket attachment, a file, an agreement document): it needs no Authorization, as its signature (HMAC-SHA256 over every other part) is its authorization. Any instance holding the signing keys serves it.',
    parameters: [
      pathParameter('id', 'The attachment (`tca_…`), file (`fsf_…`) or document (`agd_…`) id, as the link carries it.'),
      ...(
        [
          ['account', true, 'The account the link was made in.', { type: 'string', minLength: 1 }],
          ['ticket', false, "The ticket id: on an attachment's link only.", { type: 'string', minLength: 1 }],
          ['message', false, "The message id: on an attachment's link only.", { type: 'string', minLength: 1 }],
          ['agreement', false, "The agreement id: on a document's link only.", { type: 'string', minLength: 1 }],
          ['expires', true, 'Unix seconds from which the link is refused.', schemaOf(v.pipe(v.string(), v.regex(UNIX_SECONDS)))],
          ['signature', true, 'base64url HMAC-SHA256 of the other parts.', schemaOf(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]{43}$/)))],
        ] as const
      ).map(([name, required, description, schema]) => ({ name, in: 'query', required, description, schema })),
      { name: 'Range', in: 'header', required: false, description: 'One byte range (`bytes=0-99`, `bytes=100-`, `bytes=-500`).', schema: { type: 'string' } },
      { name: 'If-Range', in: 'header', required: false, description: 'The range is honoured only when this names the ETag.', schema: { type: 'string' } },
    ],
    responses: {
      200: {
        description: 'The whole attachment, with its stored media type.',
        headers: { ...REQUEST_ID, ...BYTES_HEADERS },
        ...(method === 'get' ? { content: { '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } } : {}),
      },
      206: {
        description: 'The one range asked for.',
        headers: { ...REQUEST_ID, ...BYTES_HEADERS, 'Content-Range': header('Content-Range') },
        ...(method === 'get' ? { content: { '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } } : {}),
      },
      ...(method === 'get' && {
        302: {
          description:
            'With a blob store that serves bytes itself (`s3Blobs({ redirect: true })`): a presigned URL of the object, valid no longer than the link, answering with the same Content-Type and Content-Disposition and honouring Range.',
          headers: { ...REQUEST_ID, Location: { schema: { type: 'string', format: 'uri' }, required: true } },
        },
      }),
      400: failure('A query parameter no link carries.'),
      403: failure('The link is incomplete, altered, or signed with a key this server does not hold.'),
      404: failure('The attachment, file or document was removed after the link was made.'),
      410: failure('The link has expired.'),
      416: failure('The range starts past the end of the bytes.', { 'Content-Range': header('Content-Range') }),
    },
  });
  // A HEAD answer has no body, errors included: the shared ones too.
  return method === 'get'
    ? built
    : {
        ...built,
        responses: Object.fromEntries(Object.entries(built.responses as Record<string, Json>).map(([status, answer]) => [status, withoutBody(answer)])),
      };
  function failure(description: string, headers: Json = {}): Json {
    return method === 'get' ? error(description, headers) : response(description, undefined, headers);
  }
}

const BYTES_HEADERS = {
  'Content-Length': { schema: { type: 'integer', minimum: 0 }, required: true },
  'Content-Disposition': { description: '`attachment` with the filename (RFC 6266, RFC 8187).', schema: { type: 'string' }, required: true },
  'Accept-Ranges': { schema: { const: 'bytes' }, required: true },
  ETag: { schema: { type: 'string' }, required: true },
};

const paths = {
  '/webhooks': {
    post: operation({
      operationId: 'createWebhook',
      summary: 'Create a webhook',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} The secret is generated. The types listed are the default \`eventTypes\`; a portal made with others accepts those.`,
      parameters: [idempotencyKeyParameter],
      requestBody: { required: true, content: json('WebhookInput') },
      responses: {
        201: response(
          'The webhook made, with its secret; with `Idempotent-Replayed: true`, the first answer to this `Idempotency-Key`, given again.',
          'Webhook',
          created,
        ),
        400: error('The body is not JSON, or not `{type, url}` with a known type and an http(s) URL; or a malformed `Idempotency-Key`.'),
        409: error(`The account holds \`webhooks.maxPerAccount\` webhooks already (default 50); or ${keyInProgress}.`, { 'Retry-After': RETRY_AFTER }),
        413: error('The body is over 64 KiB.'),
        415: error('The body is not `application/json`.'),
        422: keyReused,
      },
    }),
    get: operation({
      operationId: 'listWebhooks',
      summary: 'List the webhooks of the account',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} Oldest first; not paginated.`,
      responses: { 200: response('Every webhook of the account.', 'WebhookList') },
    }),
  },
  '/webhooks/{webhookId}': {
    parameters: [webhookIdParameter],
    get: operation({
      operationId: 'getWebhook',
      summary: 'Get a webhook',
      tags: ['Webhooks'],
      responses: {
        200: response('The webhook.', 'Webhook'),
        404: error('No such webhook in this account.'),
      },
    }),
    patch: operation({
      operationId: 'setWebhookFilter',
      summary: 'Give a webhook a filter, or remove it',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} Events published from then on make a delivery for the webhook only when their \`data\` matches the filter; \`{"filter": null}\` removes it (every event of its type). Deliveries already made are kept. Try a filter first with \`POST /webhooks/dry-run\`.`,
      requestBody: { required: true, content: json('WebhookFilterInput') },
      responses: {
        200: response('The webhook, with its filter (none shown once removed).', 'Webhook'),
        400: error(
          'The body is not JSON, or the filter breaks its grammar or limits; the message names the part (an unknown operator, a bad path, an operand of the wrong kind).',
        ),
        404: error('No such webhook in this account.'),
        413: error('The body is over 64 KiB.'),
        415: error('A body that is not `application/json`.'),
      },
    }),
    delete: operation({
      operationId: 'deleteWebhook',
      summary: 'Delete a webhook',
      tags: ['Webhooks'],
      description: 'Its pending deliveries are cancelled.',
      responses: {
        204: response('Deleted; no body.'),
        404: error('No such webhook in this account.'),
      },
    }),
  },
  '/webhooks/{webhookId}/deliveries': {
    parameters: [webhookIdParameter],
    get: operation({
      operationId: 'listWebhookDeliveries',
      summary: 'The delivery log of a webhook',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} Newest first (by \`createdAt\`, those of one second the last made first), every attempt included, a page at a time. Each page after the first starts right after the last delivery of the page before, so deliveries made meanwhile do not shift a page; a refresh asks for the first page again, with \`since\` to get only what is newer. Filters combine: all must hold. Finished deliveries older than the portal's retention (\`retention.deliveriesMs\`, 30 days by default) are no longer listed.`,
      parameters: [
        {
          name: 'limit',
          in: 'query',
          required: false,
          description: 'How many deliveries a page holds: 1–500, 50 when not given.',
          schema: schemaOf(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(500))),
        },
        {
          name: 'cursor',
          in: 'query',
          required: false,
          description: 'The `nextCursor` of the page before; without it, the first page.',
          schema: schemaOf(v.pipe(v.string(), v.minLength(1), v.maxLength(200))),
        },
        {
          name: 'status',
          in: 'query',
          required: false,
          description: 'Only deliveries in this status.',
          schema: schemaOf(v.picklist(['pending', 'succeeded', 'failed', 'cancelled'])),
        },
        {
          name: 'eventType',
          in: 'query',
          required: false,
          description: 'Only deliveries of events of this type (`webhook.test` for test calls).',
          schema: schemaOf(v.pipe(v.string(), v.minLength(1), v.maxLength(200))),
        },
        {
          name: 'eventId',
          in: 'query',
          required: false,
          description: 'Only the deliveries of this event (usually one; more when a recovery sent it again). Found by the event, not by walking the log.',
          schema: schemaOf(v.pipe(v.string(), v.regex(idPattern('evt')))),
        },
        {
          name: 'since',
          in: 'query',
          required: false,
          description: 'Only deliveries made at or after this time (RFC 3339 with its offset, read to the second).',
          schema: schemaOf(v.pipe(v.string(), v.isoTimestamp())),
        },
        {
          name: 'until',
          in: 'query',
          required: false,
          description: 'Only deliveries made before this time (RFC 3339 with its offset, read to the second).',
          schema: schemaOf(v.pipe(v.string(), v.isoTimestamp())),
        },
      ],
      responses: {
        200: response('A page of the delivery log, and the cursor of the next one.', 'DeliveryList'),
        400: error(
          'A query parameter is malformed (`limit` outside 1–500, an unknown `status`, a `since` that is not a date-time, a `cursor` this list did not give), unknown, or given more than once.',
        ),
        404: error('No such webhook in this account.'),
      },
    }),
  },
  '/webhooks/{webhookId}/test': {
    parameters: [webhookIdParameter],
    post: operation({
      operationId: 'testWebhook',
      summary: 'Send a test call',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} A signed call of type \`webhook.test\` (its data \`{"webhookId"}\`) goes to the webhook now, whatever its type, and is recorded and retried like any delivery.`,
      responses: {
        202: response('The delivery of the test call, pending; its attempts show in the delivery log.', 'Delivery'),
        404: error('No such webhook in this account.'),
        409: error('The webhook is disabled: enable it first.'),
      },
    }),
  },
  '/webhooks/{webhookId}/health': {
    parameters: [webhookIdParameter],
    get: operation({
      operationId: 'getWebhookHealth',
      summary: 'How the calls of a webhook are going',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} Whether the webhook is enabled, why it was disabled, and its run of failures. A webhook is disabled at once by a \`410 Gone\` answer, and once its calls have all failed for \`webhooks.disableAfterMs\` (default 5 days) in at least \`webhooks.disableAfterFailures\` attempts in a row (default 10).`,
      responses: {
        200: response('The health of the webhook.', 'WebhookHealth'),
        404: error('No such webhook in this account.'),
      },
    }),
  },
  '/webhooks/{webhookId}/stats': {
    parameters: [webhookIdParameter],
    get: operation({
      operationId: 'getWebhookStats',
      summary: "A webhook's calls over the last 24 hours or 7 days",
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} The calls made to the webhook, in buckets ending with the current hour (hourly for \`24h\`, six-hourly for \`7d\`): by outcome, and the estimated median and 95th percentile of their durations. Counted as each attempt is recorded, so a week reads at most 168 hourly rows whatever the traffic. On fs, a delivery past 50 attempts read back from a compacted log counts the 50 it keeps.`,
      parameters: [
        {
          name: 'window',
          in: 'query',
          required: false,
          description: '`24h` (the default) or `7d`.',
          schema: schemaOf(v.picklist(['24h', '7d'])),
        },
      ],
      responses: {
        200: response('The calls by bucket, and the totals.', 'WebhookStats'),
        400: error('`window` is not `24h` or `7d`, or is given more than once.'),
        404: error('No such webhook in this account.'),
      },
    }),
  },
  '/webhooks/{webhookId}/public-keys': {
    parameters: [webhookIdParameter],
    get: operation({
      operationId: 'getWebhookPublicKeys',
      summary: "The public keys an ed25519 webhook's calls verify with, and the link for receivers",
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} For a webhook created with \`"signatureScheme": "ed25519"\`: its current key and, while a rotation's grace lasts, the previous one, and \`url\`, a link that serves them without the API key (\`GET /webhook-keys/{webhookId}\`). The link is signed with the portal's \`signingKeys\` and stays the same across rotations.`,
      responses: {
        200: response('The keys and the link.', 'WebhookPublicKeysLink'),
        404: error('No such webhook in this account.'),
        409: error('The webhook signs with a shared secret (`hmac-sha256`): it has no public keys.'),
      },
    }),
  },
  '/webhook-keys/{webhookId}': {
    parameters: [pathParameter('webhookId', 'The webhook id (`wbh_…`).')],
    get: operation({
      parameters: [
        { name: 'account', in: 'query', required: true, description: "The webhook's account, as the link gives it.", schema: { type: 'string' } },
        { name: 'signature', in: 'query', required: true, description: "The link's signature, as the link gives it.", schema: { type: 'string' } },
      ],
      operationId: 'fetchWebhookPublicKeys',
      summary: "An ed25519 webhook's public keys, for its receiver (no API key)",
      tags: ['Webhooks'],
      public: true,
      extension: true,
      description: `${extension} The link of \`GET /webhooks/{webhookId}/public-keys\`: a JWK Set of the webhook's current key and, during a rotation's grace, the previous one, so a receiver can verify \`v1a,\` signatures across a rotation without holding anything secret. \`Cache-Control: public, max-age=300\`.`,
      responses: {
        200: response('The keys.', 'WebhookPublicKeys'),
        400: error('A query parameter other than `account` and `signature`, or one given twice.'),
        404: error('The link is not one the portal made (a wrong or altered signature), or its webhook is gone or signs with a shared secret.'),
      },
    }),
  },
  '/webhooks/{webhookId}/disable': {
    parameters: [webhookIdParameter],
    post: operation({
      operationId: 'disableWebhook',
      summary: 'Disable a webhook',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} It gets no calls: its deliveries that fall due meanwhile are cancelled, and \`recover\` queues their events again once it is enabled. A webhook disabled already stays so, its reason kept.`,
      responses: {
        204: response('Disabled; no body.'),
        404: error('No such webhook in this account.'),
      },
    }),
  },
  '/webhooks/{webhookId}/enable': {
    parameters: [webhookIdParameter],
    post: operation({
      operationId: 'enableWebhook',
      summary: 'Enable a webhook again',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} Its run of failures is forgotten. Events it missed while disabled are sent only by \`recover\`.`,
      responses: {
        204: response('Enabled; no body.'),
        404: error('No such webhook in this account.'),
      },
    }),
  },
  '/webhooks/{webhookId}/recover': {
    parameters: [webhookIdParameter],
    post: operation({
      operationId: 'recoverWebhook',
      summary: 'Send again what a webhook missed',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} Every event of the webhook created at or after \`since\` (to the second) that it did not get (its deliveries failed, or were cancelled while it was disabled, and none succeeded or is pending) is queued again, once: one new delivery each, due now. A second recovery queues none of them twice.`,
      requestBody: { required: true, content: json('RecoverInput') },
      responses: {
        202: response('How many events were queued again.', 'RecoverResult'),
        400: error('The body is not JSON, or not `{since}` with a date-time.'),
        404: error('No such webhook in this account.'),
        409: error('The webhook is disabled: enable it first.'),
        413: error('The body is over 64 KiB.'),
        415: error('The body is not `application/json`.'),
      },
    }),
  },
  '/event-types': {
    get: operation({
      operationId: 'listEventTypes',
      summary: 'The event catalogue',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} Every type a webhook may subscribe to (the portal's \`eventTypes\`), with the JSON Schema its data matches, a description and an example: the library's own types come with theirs, and the host gives its types one with \`portal.eventTypes.define\`. A publish whose data breaks its type's schema is refused (400).`,
      responses: { 200: response('The catalogue, in the order of the `eventTypes` option.', 'EventTypeList') },
    }),
  },
  '/webhooks/dry-run': {
    post: operation({
      operationId: 'dryRunWebhookFilter',
      summary: "Try a filter on the account's recent events",
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} Which of the account's most recent events of \`type\` (\`limit\`, default ${DRY_RUN_LIMIT.default}, at most ${DRY_RUN_LIMIT.max}) a webhook with \`filter\` would get: each event, the most recent first, with \`matches\`. Nothing is stored or sent. Events older than the portal's retention are gone and not tried.`,
      requestBody: { required: true, content: json('DryRunInput') },
      responses: {
        200: response('The events tried, and how many matched.', 'DryRunResult'),
        400: error(
          'The body is not JSON, `type` is not one of the event types, `limit` is out of range, or the filter breaks its grammar or limits (the message names the part).',
        ),
        413: error('The body is over 64 KiB.'),
        415: error('A body that is not `application/json`.'),
      },
    }),
  },
  '/webhooks/{webhookId}/rotate-secret': {
    parameters: [webhookIdParameter],
    post: operation({
      operationId: 'rotateWebhookSecret',
      summary: 'Give a webhook a new secret, without downtime',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} Until \`graceMs\` has passed (default 24 h) every call is signed with both the new and the replaced secret (\`webhook-signature: v1,<new> v1,<old>\`), so a receiver verifies with either while it moves to the new one; then with the new one alone. A rotation within an earlier one's grace keeps only the secret it replaces. The body is optional.`,
      requestBody: { required: false, content: json('SecretRotationInput') },
      responses: {
        200: response('The webhook with its new secret.', 'Webhook'),
        400: error(`The body is not JSON, or \`graceMs\` is not a whole number of milliseconds from 0 to ${MAX_SECRET_GRACE_MS} (7 days).`),
        404: error('No such webhook in this account.'),
        413: error('The body is over 64 KiB.'),
        415: error('A body that is not `application/json`.'),
      },
    }),
  },
  '/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver': {
    parameters: [webhookIdParameter, pathParameter('deliveryId', 'The delivery id (`whd_…`).')],
    post: operation({
      operationId: 'redeliverWebhookDelivery',
      summary: 'Send a delivery again',
      tags: ['Webhooks'],
      extension: true,
      description: `${extension} The delivery becomes pending and due now, its earlier attempts kept; one that had ended starts the retry schedule again. While a call of the delivery is in flight, the redeliver is queued (\`redeliverQueued\`): one more call follows once that call is recorded, never two at once.`,
      responses: {
        202: response('The delivery, pending again, or with `redeliverQueued` while its call is in flight.', 'Delivery'),
        404: error('No such delivery of that webhook in this account.'),
        409: error('The webhook of the delivery was deleted (there is nowhere to send it) or is disabled.'),
      },
    }),
  },
  '/agreements': {
    get: operation({
      operationId: 'listAgreements',
      summary: 'List agreements',
      tags: ['Agreements'],
      extension: true,
      description: `${extension} The account's agreements, newest first (by \`createdAt\`, those of one second the last made first), a page at a time, without signature images (as \`AgreementEventData\`: \`GET /agreements/{agreementId}\` has them). Each page after the first starts right after the last agreement of the page before, so agreements created meanwhile do not shift a page: they come first in a new listing.`,
      parameters: [
        {
          name: 'limit',
          in: 'query',
          required: false,
          description: 'How many agreements a page holds: 1–100, 50 when not given.',
          schema: schemaOf(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100))),
        },
        {
          name: 'cursor',
          in: 'query',
          required: false,
          description: 'The `nextCursor` of the page before; without it, the first page.',
          schema: schemaOf(v.pipe(v.string(), v.regex(idPattern('agr')))),
        },
      ],
      responses: {
        200: response('A page of agreements, and the cursor of the next one.', 'AgreementList'),
        400: error('`limit` is not a whole number from 1 to 100, `cursor` is not one a list of this account gave, or either is given more than once.'),
      },
    }),
    post: operation({
      operationId: 'createAgreement',
      summary: 'Create an agreement',
      tags: ['Agreements'],
      description: 'Documents are streamed: hashed and stored as they arrive. A failed or aborted request leaves no record and no stored bytes.',
      parameters: [idempotencyKeyParameter],
      requestBody: {
        required: true,
        content: {
          'multipart/form-data': {
            schema: ref('AgreementForm'),
            encoding: {
              signers: { contentType: 'application/json' },
              documents: { contentType: 'application/octet-stream' },
            },
          },
        },
      },
      responses: {
        201: response(
          'The agreement made: status `sent`, no signer has signed. With `Idempotent-Replayed: true`, the first answer to this `Idempotency-Key`, given again.',
          'Agreement',
          created,
        ),
        400: error('A part missing, invalid, unknown or repeated; more than 5 signers or 5 documents; a malformed body; a malformed `Idempotency-Key`.'),
        409: error(`Answered before the body is read: ${keyInProgress}.`, { 'Retry-After': { ...RETRY_AFTER, required: true } }),
        413: error(`The documents are over 5 MiB (5,242,880 bytes) in total, or the body over ${MAX_FORM_BYTES} bytes.`),
        415: error('The body is not `multipart/form-data`, or is compressed.'),
        422: keyReused,
      },
    }),
  },
  '/agreements/{agreementId}': {
    parameters: [pathParameter('agreementId', 'The agreement id (`agr_…`).')],
    get: operation({
      operationId: 'getAgreement',
      summary: 'Get an agreement',
      tags: ['Agreements'],
      extension: true,
      description: `${extension} The address the \`Location\` of a created agreement names. The whole agreement, signature images included: the \`agreement-created\` and \`agreement-signed\` webhook events carry it without them (\`AgreementEventData\`), and a receiver that needs the images fetches them here.`,
      responses: {
        200: response('The agreement, signature images included.', 'Agreement'),
        404: error('No such agreement in this account.'),
      },
    }),
  },
  '/agreements/{agreementId}/documents/{documentId}/download': {
    parameters: [
      pathParameter('agreementId', 'The agreement id (`agr_…`).'),
      pathParameter('documentId', "The document id (`agd_…`), one of the agreement's `documents`."),
    ],
    get: operation({
      operationId: 'getDocumentDownloadLink',
      summary: 'A download link for an agreement document',
      tags: ['Agreements'],
      extension: true,
      description: `${extension} The link serves for 5 minutes without Authorization, like an attachment's. A document is served as \`application/pdf\` when its name ends in \`.pdf\`, else as \`application/octet-stream\`.`,
      responses: {
        200: response('The link and when it expires.', 'DownloadLink'),
        400: error('An id is malformed.'),
        404: error('No such agreement in this account, or no such document in it.'),
      },
    }),
  },
  '/agreements/{agreementId}/signers/{signerId}/signing-link': {
    parameters: [pathParameter('agreementId', 'The agreement id (`agr_…`).'), pathParameter('signerId', 'The signer id (`ags_…`).')],
    post: operation({
      operationId: 'createSigningLink',
      summary: 'A signing link for one signer',
      tags: ['Signing'],
      extension: true,
      description: `${extension} The link opens the signing page with the signer's token in its fragment. A new link replaces every older link of the signer. Recorded in the audit trail.`,
      requestBody: { required: false, content: json('SigningLinkInput') },
      responses: {
        201: response('The link and when it expires (72 hours unless `expiresInSeconds` says otherwise).', 'SigningLink'),
        400: error('`expiresInSeconds` outside 60 … 2,592,000, an unknown field, a malformed id or body.'),
        404: error('No such agreement in this account, or no such signer on it.'),
        409: error('The signer has signed or declined, the agreement is signed or closed, or the signer has been sent 20 links already.'),
        413: error('The body is over 64 KiB.'),
        415: error('A body that is not `application/json`.'),
      },
    }),
  },
  '/agreements/{agreementId}/audit': {
    parameters: [pathParameter('agreementId', 'The agreement id (`agr_…`).')],
    get: operation({
      operationId: 'getAgreementAudit',
      summary: 'The audit trail of an agreement',
      tags: ['Signing'],
      extension: true,
      description: `${extension} Every step (created, link issued, viewed, signed, declined, expired, reminder) with its time, actor, IP, user agent and the documents' hashes, each entry hashed over the one before.`,
      responses: {
        200: response('The trail, oldest first, and whether its chain verifies.', 'AuditTrail'),
        400: error('A malformed id.'),
        404: error('No such agreement in this account.'),
      },
    }),
  },
  '/agreements/{agreementId}/certificate': {
    parameters: [pathParameter('agreementId', 'The agreement id (`agr_…`).')],
    get: operation({
      operationId: 'getAgreementCertificate',
      summary: 'The certificate of completion of an agreement',
      tags: ['Signing'],
      extension: true,
      description: `${extension} A PDF: the agreement, each document's name, size and SHA-256, each signer's name, e-mail, time, IP and signature image, the audit trail and its final hash, and whether the chain verifies. Made once the agreement is signed or closed.`,
      responses: {
        200: {
          description: 'The certificate.',
          headers: {
            ...REQUEST_ID,
            'Content-Disposition': { description: '`attachment; filename="certificate-<agreementId>.pdf"`', schema: { type: 'string' }, required: true },
          },
          content: { 'application/pdf': { schema: { type: 'string', contentMediaType: 'application/pdf' } } },
        },
        400: error('A malformed id.'),
        404: error('No such agreement in this account.'),
        409: error('The agreement still awaits signatures.'),
      },
    }),
  },
  '/signing': {
    get: operation({
      operationId: 'getSigning',
      summary: 'What a signer sees',
      tags: ['Signing'],
      extension: true,
      signer: true,
      description: `${extension} Authorized by the signing token (\`Authorization: Bearer <token>\`), not an API key. The first read records the signer's \`viewedAt\` and sends \`agreement-viewed\`.`,
      responses: {
        200: response('The agreement without signature images, the signer, and a download link to each document.', 'SigningView'),
        410: error('The signing link has expired.'),
      },
    }),
  },
  '/signing/sign': {
    post: operation({
      operationId: 'sign',
      summary: "Sign as the token's signer",
      tags: ['Signing'],
      extension: true,
      signer: true,
      description: `${extension} The signature is a data-URL checked as \`signerSignatureData\` at creation. Sends \`agreement-signer-signed\`, and with the last signer \`agreement-signed\`.`,
      requestBody: { required: true, content: json('SignInput') },
      responses: {
        200: response('The view after signing.', 'SigningView'),
        400: error('The signature is missing or not an acceptable image; an unknown field; a malformed body.'),
        409: error('The signer has signed or declined, the agreement is signed or closed, or (sequential order) a signer before has not signed yet.'),
        410: error('The signing link has expired.'),
        413: error('The body is larger than the largest signature allows.'),
        415: error('A body that is not `application/json`.'),
      },
    }),
  },
  '/signing/decline': {
    post: operation({
      operationId: 'decline',
      summary: "Decline as the token's signer",
      tags: ['Signing'],
      extension: true,
      signer: true,
      description: `${extension} The agreement closes (\`closedReason: declined\`) and \`agreement-declined\` is sent.`,
      requestBody: { required: false, content: json('DeclineInput') },
      responses: {
        200: response('The view after declining.', 'SigningView'),
        400: error('A reason over 1,000 characters or with control characters; an unknown field; a malformed body.'),
        409: error('The signer has signed or declined, or the agreement is signed or closed.'),
        410: error('The signing link has expired.'),
        413: error('The body is over 64 KiB.'),
        415: error('A body that is not `application/json`.'),
      },
    }),
  },
  '/files': {
    get: operation({
      operationId: 'listFiles',
      summary: 'List a directory',
      tags: ['Files'],
      description: 'Directories first, then files, each by name without regard to case, then by id. Not paginated.',
      parameters: [
        {
          name: 'directoryId',
          in: 'query',
          required: false,
          description: "The directory to list (`fsd_…`); without it, the account's root.",
          schema: schemaOf(v.pipe(v.string(), v.regex(idPattern('fsd')))),
        },
      ],
      responses: {
        200: response('Every entry of the directory.', 'FileList'),
        400: error('`directoryId` is malformed or given more than once.'),
        404: error('No such directory in this account.'),
      },
    }),
    post: operation({
      operationId: 'uploadFile',
      summary: 'Upload a file',
      tags: ['Files'],
      extension: true,
      description: `${extension} The parts in any order. The file is streamed into the blob store as it arrives and the entry made once every part is read; a failed or aborted upload, or a \`directoryId\` that names no directory, keeps nothing.`,
      requestBody: uploadBody('FileUploadForm'),
      responses: {
        201: response('The file entry made.', 'FileEntry'),
        400: error('`directoryId` malformed or repeated; the `file` part missing, repeated or without a filename; an unknown part; a malformed body.'),
        404: error('No such directory in this account.'),
        413: error('The file is over 5 MiB (5,242,880 bytes).'),
        415: error('The body is not `multipart/form-data`, or is compressed.'),
      },
    }),
  },
  '/directories': {
    post: operation({
      operationId: 'createDirectory',
      summary: 'Create a directory',
      tags: ['Files'],
      extension: true,
      description: `${extension} In the account's root, or in \`directoryId\`.`,
      requestBody: { required: true, content: json('DirectoryInput') },
      responses: {
        201: response('The directory made.', 'FileEntry'),
        400: error('The body is not JSON, or not `{name, directoryId?}` with a valid name and id.'),
        404: error('No such parent directory in this account.'),
        415: error('The body is not `application/json`.'),
      },
    }),
  },
  '/files/{entryId}': {
    parameters: [pathParameter('entryId', 'The file (`fsf_…`) or directory (`fsd_…`) id.')],
    delete: operation({
      operationId: 'deleteFileEntry',
      summary: 'Delete a file or an empty directory',
      tags: ['Files'],
      extension: true,
      description: `${extension} A file's bytes go with it.`,
      responses: {
        204: response('Deleted.'),
        404: error('No such file or directory in this account.'),
        409: error('The directory is not empty.'),
      },
    }),
  },
  '/files/{fileId}/download': {
    parameters: [pathParameter('fileId', 'The file id (`fsf_…`).')],
    get: operation({
      operationId: 'getFileDownloadLink',
      summary: 'A download link for a file',
      tags: ['Files'],
      extension: true,
      description: `${extension} The link serves for 5 minutes without Authorization, like an attachment's (Range, HEAD, a presigned redirect with \`s3Blobs({ redirect: true })\`).`,
      responses: {
        200: response('The link and when it expires.', 'DownloadLink'),
        400: error("The id is neither a file's nor a directory's."),
        404: error('No such file in this account (a directory has no download).'),
      },
    }),
  },
  '/tickets/{ticketId}/message/{messageId}/attachment': {
    parameters: messageParameters,
    post: operation({
      operationId: 'createAttachment',
      summary: 'Attach a file to a ticket message',
      tags: ['Tickets'],
      extension: true,
      description: `${extension} The file is streamed into the blob store as it arrives; a failed or aborted upload keeps nothing.`,
      requestBody: uploadBody('AttachmentUploadForm'),
      responses: {
        201: response('The attachment, with its id.', 'Attachment'),
        400: error('An id is malformed; the `file` part is missing, repeated or without a filename; an unknown part; a malformed body.'),
        413: error('The file is over 5 MiB (5,242,880 bytes).'),
        415: error('The body is not `multipart/form-data`, or is compressed.'),
      },
    }),
  },
  '/tickets/{ticketId}/message/{messageId}/attachment/{attachmentId}': {
    parameters: attachmentParameters,
    delete: operation({
      operationId: 'deleteAttachment',
      summary: 'Remove an attachment',
      tags: ['Tickets'],
      extension: true,
      description: `${extension} Its bytes go with it; links to it answer 404 from then on.`,
      responses: {
        204: response('Removed.'),
        400: error('An id is malformed.'),
        404: error('No such attachment under that message and ticket in this account.'),
      },
    }),
  },
  '/tickets/{ticketId}/message/{messageId}/attachment/{attachmentId}/download': {
    parameters: attachmentParameters,
    get: operation({
      operationId: 'getAttachmentDownloadLink',
      summary: 'A download link for a ticket message attachment',
      tags: ['Tickets'],
      description: 'The link serves for 5 minutes without Authorization.',
      responses: {
        200: response('The link and when it expires.', 'DownloadLink'),
        400: error('An id is malformed.'),
        404: error('No such attachment under that message and ticket in this account.'),
      },
    }),
  },
  '/downloads/{id}': { get: download('get'), head: download('head') },
};

const errorResponses = {
  Unauthorized: error('No `Authorization: Bearer <key>` header, a malformed one, or an unknown key.', {
    'WWW-Authenticate': {
      description: '`Bearer realm="customer-portal"`, with `, error="invalid_token"` when a token was given.',
      schema: { type: 'string' },
      required: true,
    },
  }),
  SigningUnauthorized: error('No signing token, a malformed, altered or unknown one, or one a newer link of the signer has replaced.', {
    'WWW-Authenticate': {
      description: '`Bearer realm="customer-portal-signing"`, with `, error="invalid_token"` for a replaced link.',
      schema: { type: 'string' },
      required: true,
    },
  }),
  NotFound: error('No route matches the path.'),
  MethodNotAllowed: error('The path exists, but not with this method.', {
    Allow: { description: 'The methods the path has.', schema: { type: 'string' }, required: true },
  }),
  InternalError: error('An unexpected fault, logged with the request id: `{"message":"Internal error"}`.'),
  Unavailable: error(
    'The storage cannot be reached for now (a database restarting); nothing was changed unless the message says it may have been. Logged as a warning.',
    {
      'Retry-After': { description: 'Seconds to wait before trying again.', schema: { type: 'string' }, required: true },
    },
  ),
};

/** The shared responses as a HEAD answers them: each under its name + `NoBody`, without the Error body. */
const headResponses = Object.fromEntries(Object.entries(errorResponses).map(([name, { content: _content, ...rest }]) => [`${name}NoBody`, rest]));

/** A response as a HEAD answers it: the same status and headers, no body. */
function withoutBody(item: Json): Json {
  if (typeof item.$ref === 'string') return { $ref: `${item.$ref}NoBody` };
  const { content: _content, ...rest } = item;
  return rest;
}

/**
 * Every GET route answers HEAD too, with the status and headers of the GET and no body: each path
 * with a `get` and no `head` of its own gets one, made from the `get`.
 */
function withHeads(items: Record<string, Json>): Record<string, Json> {
  return Object.fromEntries(
    Object.entries(items).map(([path, item]) => {
      const get = item.get as Json | undefined;
      if (get === undefined || item.head !== undefined) return [path, item];
      const responses = Object.fromEntries(Object.entries(get.responses as Record<string, Json>).map(([status, answer]) => [status, withoutBody(answer)]));
      const head = {
        ...get,
        operationId: `${get.operationId}Head`,
        summary: `${get.summary}: the headers alone`,
        description: 'The answer of the GET without its body.',
        responses,
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
  '2XX': { description: "Delivered: any 2xx answered within `webhooks.timeoutMs` (15 s by default). The answer's body is read up to 64 KiB and ignored." },
  410: { description: 'Gone: the delivery ends at once, with no more retries, and the webhook is disabled (its health says `gone`).' },
  429: {
    description: "A failed attempt; the retry waits for `Retry-After` when it asks for longer than the schedule's next step (up to a day).",
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
  const content = json(body as keyof typeof componentSchemas) as Record<string, Json>;
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
  'customer-created': webhookCall('customer-created', 'CustomerCreatedCall', 'Published by the host (`events.publish`), with the data it gave.'),
  // One entry per type of the event catalogue the library defines, with its description and example.
  ...Object.fromEntries(
    LIBRARY_EVENT_TYPES.map(({ name, description, example }) => [
      name,
      webhookCall(name, callSchemaName(name), `${description} Its schema is also served by \`GET /event-types\`.`, example),
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
        'The Customer Portal API (v1) served by the `customer-portal` package. Operations marked `x-extension: true` go beyond the spec and are served unless the portal is made with `extensions: false`. Every error is `{"message": "…"}`.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: DEFAULT_BASE_PATH, description: 'The base path, under the host the portal is mounted on.' }],
    security: [{ bearerAuth: [] }],
    tags: [
      ...['Webhooks', 'Agreements', 'Signing', 'Files', 'Tickets', 'Downloads'].map((name) => ({ name })),
      {
        name: 'Webhook calls',
        description:
          'The calls the portal makes to webhook URLs, one per event type of the default `eventTypes` (a portal made with types of its own sends those in the same form).',
      },
    ],
    paths: withHeads(paths),
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
          description: '`true` when the answer is the first answer to this `Idempotency-Key`, given again; absent otherwise.',
          schema: { const: 'true' },
        },
        'X-Request-Id': {
          description: "The client's own when it sent one of at most 200 characters of `[A-Za-z0-9._:-]`, else a generated UUID.",
          schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,200}$' },
          required: true,
        },
        Location: { description: 'The absolute URL of the record made.', schema: { type: 'string', format: 'uri' }, required: true },
        'Content-Range': { description: '`bytes <first>-<last>/<size>`, or `bytes */<size>` on a 416.', schema: { type: 'string' }, required: true },
      },
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <key>`.' },
        signingToken: { type: 'http', scheme: 'bearer', description: 'A signing token, from the fragment of a signing link: `Authorization: Bearer <token>`.' },
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
