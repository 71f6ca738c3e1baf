import * as v from 'valibot';
import { idPattern } from '../shared/ids.js';

/**
 * What a route says of itself in the OpenAPI document: its operation, written beside its handler
 * so that the method, the path, the query parameters it takes and their description are declared
 * once. `src/openapi/openapi.ts` renders the document from the route table: it adds what every
 * operation answers (401, 404, 405, 500, 503), marks the extensions, converts the valibot schemas
 * of parameters to JSON Schema, and derives each HEAD from its GET.
 */

export type Json = Record<string, unknown>;

/** The components of the document a route may name: each is a valibot schema there. */
export type SchemaName =
  | 'Error'
  | 'Webhook'
  | 'WebhookList'
  | 'WebhookInput'
  | 'WebhookHealth'
  | 'WebhookStats'
  | 'RecoverInput'
  | 'RecoverResult'
  | 'WebhookFilterInput'
  | 'DryRunInput'
  | 'DryRunResult'
  | 'WebhookPublicKeys'
  | 'WebhookPublicKeysLink'
  | 'Delivery'
  | 'DeliveryList'
  | 'FileEntry'
  | 'FileList'
  | 'Agreement'
  | 'AgreementList'
  | 'AgreementForm'
  | 'DownloadLink'
  | 'Verification'
  | 'Attachment'
  | 'FileUploadForm'
  | 'AttachmentUploadForm'
  | 'DirectoryInput'
  | 'SecretRotationInput'
  | 'SigningLinkInput'
  | 'SigningLink'
  | 'SigningView'
  | 'Branding'
  | 'BrandingAnswer'
  | 'SignInput'
  | 'IdentifyInput'
  | 'IdentificationCodeSent'
  | 'DeclineInput'
  | 'VoidInput'
  | 'SignerCorrectionInput'
  | 'AuditTrail'
  | 'EventTypeList'
  | 'PortalSessionInput'
  | 'PortalSession';

/** A parameter: its `schema` a valibot schema (converted when the document is built) or JSON Schema. */
export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  description: string;
  schema: v.GenericSchema | Json;
}

export interface Operation {
  operationId: string;
  summary: string;
  tags: ('Webhooks' | 'Agreements' | 'Signing' | 'Files' | 'Tickets' | 'Downloads' | 'Portal sessions')[];
  description?: string;
  /** Every `:name` of the route's path, each query parameter the route takes, and headers it reads. */
  parameters?: (Parameter | { $ref: string })[];
  requestBody?: Json;
  responses: Record<number, Json>;
  /** Authorized by a signing token, not an API key (the signer's routes). */
  signer?: boolean;
}

/** The names of the query parameters an operation lists: the route refuses any other with 400. */
export function queryNames(operation: Operation | null): string[] {
  return (operation?.parameters ?? []).flatMap((parameter) =>
    'in' in parameter && parameter.in === 'query' ? [parameter.name] : [],
  );
}

export const ref = (name: SchemaName) => ({ $ref: `#/components/schemas/${name}` });
export const json = (name: SchemaName) => ({ 'application/json': { schema: ref(name) } });
export const header = (name: string) => ({ $ref: `#/components/headers/${name}` });
export const REQUEST_ID_HEADER = { 'X-Request-Id': header('X-Request-Id') };

/** A response: its description, the component its body is (none: no body), and headers beyond `X-Request-Id`. */
export function response(description: string, name?: SchemaName, headers: Json = {}): Json {
  return {
    description,
    headers: { ...REQUEST_ID_HEADER, ...headers },
    ...(name === undefined ? {} : { content: json(name) }),
  };
}
/** A refusal: `{"message": …}`. */
export const failure = (description: string, headers: Json = {}) => response(description, 'Error', headers);

export const pathParameter = (
  name: string,
  description: string,
  schema: v.GenericSchema | Json = { type: 'string' },
): Parameter => ({
  name,
  in: 'path',
  required: true,
  description,
  schema,
});
export const queryParameter = (
  name: string,
  description: string,
  schema: v.GenericSchema | Json,
  required = false,
): Parameter => ({
  name,
  in: 'query',
  required,
  description,
  schema,
});
const idParameter = (name: string, prefix: 'tck' | 'tcm' | 'tca', what: string) =>
  pathParameter(
    name,
    `The ${what} id (\`${prefix}_…\`); another shape is a 400.`,
    v.pipe(v.string(), v.regex(idPattern(prefix))),
  );
export const messageParameters = [idParameter('ticketId', 'tck', 'ticket'), idParameter('messageId', 'tcm', 'message')];
export const attachmentParameters = [...messageParameters, idParameter('attachmentId', 'tca', 'attachment')];
export const webhookIdParameter = pathParameter(
  'webhookId',
  'The webhook id (`wbh_…`); an id of another shape is a 404.',
);
export const agreementIdParameter = pathParameter(
  'agreementId',
  'The agreement id (`agr_…`); an id of another shape is a 404.',
);

/** What a create made with an `Idempotency-Key` adds: the header in, the replay mark out, 409 and 422. */
export const idempotencyKeyParameter = { $ref: '#/components/parameters/Idempotency-Key' };
export const created = { Location: header('Location'), 'Idempotent-Replayed': header('Idempotent-Replayed') };
export const RETRY_AFTER = { description: 'Seconds to wait before trying again.', schema: { type: 'string' } };
export const keyInProgress =
  'a request with the same `Idempotency-Key` is still in progress (on any instance; `Retry-After: 1`)';
export const keyReused = failure(
  'The `Idempotency-Key` was used in the last 24 hours for a request with other content.',
);

/** A multipart upload of one file in a part named `file`. */
export const uploadBody = (name: 'FileUploadForm' | 'AttachmentUploadForm') => ({
  required: true,
  content: {
    'multipart/form-data': { schema: ref(name), encoding: { file: { contentType: 'application/octet-stream' } } },
  },
});

/** The headers of bytes served whole or by range. */
export const BYTES_HEADERS = {
  'Content-Length': { schema: { type: 'integer', minimum: 0 }, required: true },
  'Content-Disposition': {
    description: '`attachment` with the filename (RFC 6266, RFC 8187).',
    schema: { type: 'string' },
    required: true,
  },
  'Accept-Ranges': { schema: { const: 'bytes' }, required: true },
  ETag: { schema: { type: 'string' }, required: true },
};
