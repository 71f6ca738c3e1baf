/**
 * Every failure the portal reports, as data: a code, the status it is answered with, the sentence
 * a person reads, and the few headers some answers need (names in lower case, as node:http
 * reports them). Services, routes and adapters throw
 * `PortalError`s made from this catalogue; the HTTP layer renders any of them in one place
 * (`http/render-error.ts`), and `docs/http-api.md` lists every code (a test checks both).
 */

const REALM = 'Bearer realm="customer-portal"';
const idShape = (field: string, what: string, prefix: string) =>
  `${field} must be ${what} id (${prefix}_ followed by letters and digits).`;

interface ErrorSpec {
  status: number;
  message: (...args: never[]) => string;
  headers?: (...args: never[]) => Record<string, string>;
  /**
   * `false` for a fault of ours (a bug, a broken invariant): the client is told only "Internal
   * error", and the message goes to the log. Default `true`.
   */
  expose?: boolean;
}

export const ERRORS = {
  // Authentication (every route but the signed download)
  AUTH_MISSING: {
    status: 401,
    message: () => 'Missing Authorization header: send "Authorization: Bearer <API key>".',
    headers: () => ({ 'www-authenticate': REALM }),
  },
  AUTH_MALFORMED: {
    status: 401,
    message: () => 'Malformed Authorization header: expected "Bearer <API key>".',
    headers: () => ({ 'www-authenticate': REALM }),
  },
  AUTH_INVALID: {
    status: 401,
    message: () => 'The API key is not valid.',
    headers: () => ({ 'www-authenticate': `${REALM}, error="invalid_token"` }),
  },

  // Portal sessions
  PORTAL_SESSION_SCOPE: {
    status: 403,
    message: (area: string, scopes: readonly string[]) =>
      area === 'sessions'
        ? 'A portal session cannot make or revoke portal sessions: use the API key.'
        : `This portal session may reach ${scopes.join(', ')}; not ${area}.`,
  },
  PORTAL_SESSION_READ_ONLY: {
    status: 403,
    message: (method: string) => `This portal session may only read; ${method} is a change.`,
  },
  PORTAL_SESSION_NOT_FOUND: { status: 404, message: (id: string) => `No portal session ${id} in this account.` },
  PORTAL_SESSION_LIMIT: {
    status: 409,
    message: (max: number) =>
      `This account already has ${max.toLocaleString('en-US')} live portal sessions, the most it may have: revoke some (DELETE /portal-sessions/{id}) or wait for them to expire.`,
  },

  // Routing
  ROUTE_NOT_FOUND: { status: 404, message: (method: string, path: string) => `No route matches ${method} ${path}.` },
  METHOD_NOT_ALLOWED: {
    status: 405,
    message: (method: string, allow: readonly string[]) =>
      `Method ${method} is not allowed here; allowed: ${allow.join(', ')}.`,
    headers: (_method: string, allow: readonly string[]) => ({ allow: allow.join(', ') }),
  },
  PATH_NOT_DECODABLE: { status: 400, message: () => 'The request path is not valid percent-encoding.' },
  PATH_SEGMENT_TOO_LONG: { status: 400, message: () => 'A path segment is too long.' },

  // Input: fields, ids, query parameters
  INPUT_INVALID: { status: 400, message: (where: string, problem: string) => `${where}: ${problem}` },
  INPUT_REQUIRED: { status: 400, message: (where: string) => `${where}: is required.` },
  INPUT_UNKNOWN_FIELD: {
    status: 400,
    message: (owner: string, key: string) => `${owner} has an unknown field "${key}".`,
  },
  ID_MALFORMED: { status: 400, message: idShape },
  QUERY_REPEATED: { status: 400, message: (name: string) => `${name} must be given at most once.` },
  QUERY_UNKNOWN: {
    status: 400,
    message: (name: string, known: readonly string[]) =>
      `Unknown query parameter "${name}": ${known.length === 0 ? 'this route takes none' : `this route takes ${known.join(', ')}`}.`,
  },
  EVENT_DATA_NOT_JSON: { status: 400, message: (detail: string) => `event data cannot be written as JSON: ${detail}` },
  EVENT_DATA_INVALID: {
    status: 400,
    message: (type: string, path: string, problem: string) =>
      `The data of a ${type} event breaks its schema (GET /event-types): ${path} ${problem}.`,
  },
  EVENT_DATA_NOT_OBJECT: { status: 400, message: () => 'event data must be a JSON object.' },

  // Request bodies
  JSON_CONTENT_TYPE: {
    status: 415,
    message: () => 'The request body must be JSON: send "Content-Type: application/json".',
  },
  JSON_BODY_EMPTY: { status: 400, message: () => 'The request body is empty; a JSON object was expected.' },
  JSON_BODY_INVALID: { status: 400, message: () => 'The request body is not valid JSON.' },
  // The rest of the body is not read: the connection is closed rather than drained.
  JSON_BODY_TOO_LARGE: {
    status: 413,
    message: (limitBytes: number) => `The request body is larger than ${Math.floor(limitBytes / 1024)} KiB.`,
    headers: () => ({ connection: 'close' }),
  },
  FORM_CONTENT_TYPE: {
    status: 415,
    message: (route: string, given: string) => `${route} takes multipart/form-data, not ${given}.`,
  },
  CONTENT_ENCODING_UNSUPPORTED: {
    status: 415,
    message: (encoding: string) => `Content-Encoding ${encoding} is not supported; send the form uncompressed.`,
  },
  MULTIPART_BOUNDARY_INVALID: {
    status: 400,
    message: () => 'The Content-Type multipart/form-data needs a boundary parameter of 1 to 70 characters.',
  },
  MULTIPART_BOUNDARY_UNREADABLE: {
    status: 400,
    message: () => 'The Content-Type multipart/form-data has no boundary parameter that can be read.',
  },
  MULTIPART_MALFORMED: {
    status: 400,
    message: () => 'The multipart body is malformed or ended before its closing boundary.',
  },
  MULTIPART_UNKNOWN_PART: {
    status: 400,
    message: (name: string, parts: string) => `Unknown part ${name}; the parts are ${parts}.`,
  },
  REQUEST_ABORTED: { status: 400, message: () => 'The client closed the connection before the form was complete.' },
  FORM_TOO_LARGE: {
    status: 413,
    message: (maxFormBytes: number, maxDocumentBytes: number, length?: number) =>
      `The request body${length === undefined ? '' : ` of ${length} bytes`} is over the ${maxFormBytes} bytes a valid form can take: documents may total at most 5 MiB (${maxDocumentBytes} bytes).`,
  },

  // Idempotency-Key (POST /agreements, POST /webhooks)
  IDEMPOTENCY_KEY_INVALID: {
    status: 400,
    message: () => 'Idempotency-Key must be 1 to 255 visible ASCII characters, bare or as a quoted string ("…").',
  },
  IDEMPOTENCY_KEY_IN_PROGRESS: {
    status: 409,
    message: () => 'A request with this Idempotency-Key is still in progress; retry once it has been answered.',
    headers: () => ({ 'retry-after': '1' }),
  },
  IDEMPOTENCY_KEY_REUSED: {
    status: 422,
    message: () => 'This Idempotency-Key was used for a different request; use a new key for a new request.',
  },

  // Agreements
  SIGNERS_LIMIT: { status: 400, message: (max: number) => `signers: at most ${max} signers are allowed.` },
  DOCUMENTS_LIMIT: { status: 400, message: (max: number) => `documents: at most ${max} documents are allowed.` },
  DOCUMENTS_TOO_LARGE: {
    status: 413,
    message: (maxBytes: number) => `The documents are over the limit of 5 MiB (${maxBytes} bytes) in total.`,
  },
  AGREEMENT_NOT_FOUND: { status: 404, message: (id: string) => `No agreement ${id} in this account.` },
  DOCUMENT_NOT_FOUND: {
    status: 404,
    message: (documentId: string, agreementId: string) => `No document ${documentId} in agreement ${agreementId}.`,
  },
  SIGNER_NOT_FOUND: {
    status: 404,
    message: (signerId: string, agreementId: string) => `No signer ${signerId} on agreement ${agreementId}.`,
  },
  SIGNER_ALREADY_SIGNED: {
    status: 409,
    message: (signerId: string, agreementId: string) =>
      `Signer ${signerId} has already signed agreement ${agreementId}.`,
  },
  SIGNER_DECLINED: {
    status: 409,
    message: (signerId: string, agreementId: string) => `Signer ${signerId} has declined agreement ${agreementId}.`,
  },
  SIGNER_NOT_YET: {
    status: 409,
    message: (signerId: string, waitingFor: string) =>
      `It is not signer ${signerId}'s turn yet: the agreement is signed in order, and ${waitingFor} signs first.`,
  },
  SIGNING_LINKS_LIMIT: {
    status: 409,
    message: (signerId: string, max: number) =>
      `Signer ${signerId} has been sent ${max} signing links, the most one signer may have; the newest still works.`,
  },
  AGREEMENT_STILL_OPEN: {
    status: 409,
    message: (agreementId: string, then: string) => `Agreement ${agreementId} is still awaiting signatures: ${then}`,
  },
  AGREEMENT_CLOSED: {
    status: 409,
    message: (agreementId: string, why: string) =>
      `Agreement ${agreementId} is ${why}: nothing more can be signed or declined.`,
  },
  SIGNING_TOKEN_INVALID: {
    status: 401,
    message: () =>
      'The signing link is not valid: it is incomplete, altered, or was not made by this portal. Ask the sender for a new one.',
    headers: () => ({ 'www-authenticate': 'Bearer realm="customer-portal-signing"' }),
  },
  SIGNING_LINK_REPLACED: {
    status: 401,
    message: () => 'This signing link has been replaced by a newer one. Use the most recent link you received.',
    headers: () => ({ 'www-authenticate': 'Bearer realm="customer-portal-signing", error="invalid_token"' }),
  },
  SIGNING_LINK_EXPIRED: {
    status: 410,
    message: (expiredAt: string) => `The signing link expired at ${expiredAt}. Ask the sender for a new one.`,
  },

  // Signer identification
  IDENTIFICATION_REQUIRED: {
    status: 403,
    message: () =>
      'Identify first: this signer must confirm who they are (POST /signing/identify) before seeing the documents, signing or declining.',
  },
  IDENTIFICATION_CODE_WRONG: {
    status: 403,
    message: (triesLeft: number) =>
      `The code is not right. ${triesLeft} ${triesLeft === 1 ? 'try' : 'tries'} left before this signing link is revoked.`,
  },
  IDENTIFICATION_CODE_EXPIRED: {
    status: 403,
    message: (triesLeft: number) =>
      `The code has expired (codes last 10 minutes): request a new one. ${triesLeft} ${triesLeft === 1 ? 'try' : 'tries'} left.`,
  },
  IDENTIFICATION_NO_CODE: {
    status: 403,
    message: () =>
      'No identification code is outstanding for this signing link: request one (POST /signing/identify/email-code).',
  },
  IDENTIFICATION_LOCKED: {
    status: 401,
    message: (wrong: number) =>
      `This signing link was revoked after ${wrong} wrong codes. Ask the sender for a new one.`,
    headers: () => ({ 'www-authenticate': 'Bearer realm="customer-portal-signing", error="invalid_token"' }),
  },
  IDENTIFICATION_NOT_REQUIRED: {
    status: 409,
    message: () => 'This signer does not need to identify: their link shows the documents.',
  },
  IDENTIFICATION_ALREADY_VERIFIED: { status: 409, message: () => 'This signer has already identified with this link.' },
  EMAIL_CODE_UNAVAILABLE: {
    status: 409,
    message: (why: string) => `An e-mail code cannot be sent: ${why}.`,
  },
  EMAIL_CODE_SENDS_LIMIT: {
    status: 429,
    message: (max: number, retryAfterSeconds: number) =>
      `${max} codes were sent to this signer in the last hour, the most allowed; another can be sent in ${retryAfterSeconds} seconds.`,
    headers: (_max: number, retryAfterSeconds: number) => ({ 'retry-after': String(retryAfterSeconds) }),
  },
  ACCESS_CODE_NEEDED: {
    status: 409,
    message: (signerId: string) =>
      `Signer ${signerId} must identify (shouldIdentify), and no notifier is configured to mail them a code: issue the link with an accessCode, given to them by another channel.`,
  },
  NOTIFIER_MISSING: {
    status: 409,
    message: () =>
      'send: true needs a notifier (option notifier, or SMTP_URL and MAIL_FROM for the standalone server) to mail the link.',
  },
  DISCLOSURE_CHANGED: {
    status: 409,
    message: (version: string) =>
      `consent.disclosureVersion is not the disclosure in force (version ${version}): read it again and consent to that one.`,
  },

  // Webhooks
  WEBHOOK_NOT_FOUND: { status: 404, message: (id: string) => `No webhook ${id} in this account.` },
  WEBHOOK_KEYS_NOT_FOUND: {
    status: 404,
    message: () => 'No public keys at this link: it is not one the portal made, or its webhook is gone.',
  },
  WEBHOOKS_LIMIT: {
    status: 409,
    message: (max: number) =>
      `This account already has ${max} webhooks, the most it may have (webhooks.maxPerAccount); delete one first.`,
  },
  WEBHOOK_NO_PUBLIC_KEYS: {
    status: 409,
    message: (id: string) =>
      `Webhook ${id} signs with a shared secret (hmac-sha256): it has no public keys. A webhook created with "signatureScheme": "ed25519" has.`,
  },
  WEBHOOK_DISABLED: {
    status: 409,
    message: (id: string) =>
      `Webhook ${id} is disabled and gets no calls: enable it first (POST /webhooks/${id}/enable).`,
  },
  DELIVERY_NOT_FOUND: {
    status: 404,
    message: (deliveryId: string, webhookId: string) =>
      `No delivery ${deliveryId} of webhook ${webhookId} in this account.`,
  },
  DELIVERY_WEBHOOK_DELETED: {
    status: 409,
    message: (deliveryId: string) => `Delivery ${deliveryId} cannot be sent again: its webhook was deleted.`,
  },

  // Files
  DIRECTORY_NOT_FOUND: { status: 404, message: (id: string) => `No directory ${id} in this account.` },
  DIRECTORY_NOT_EMPTY: { status: 409, message: (id: string) => `Directory ${id} is not empty.` },
  FILE_NOT_FOUND: { status: 404, message: (id: string) => `No file or directory ${id} in this account.` },
  NOT_A_FILE: {
    status: 404,
    message: (id: string) => `${id} is a directory, not a file: only a file has a download link.`,
  },
  UPLOAD_TOO_LARGE: {
    status: 413,
    message: (maxBytes: number) => `The file is over the limit of 5 MiB (${maxBytes} bytes).`,
  },

  // Attachments and download links
  ATTACHMENT_NOT_FOUND: {
    status: 404,
    message: (attachmentId: string, messageId: string, ticketId: string) =>
      `No attachment ${attachmentId} under message ${messageId} of ticket ${ticketId} in this account.`,
  },
  DOWNLOAD_REMOVED: {
    status: 404,
    message: (what: 'attachment' | 'file' | 'document' | 'signed') =>
      `The ${what === 'signed' ? 'signed copy' : what} has been removed.`,
  },
  VERIFY_CONTENT_TYPE: {
    status: 415,
    message: () => 'The request body must be a PDF: send "Content-Type: application/pdf".',
  },
  VERIFY_TOO_LARGE: { status: 413, message: () => 'The PDF is larger than 25 MiB (26,214,400 bytes).' },
  PDF_BUSY: {
    status: 503,
    message: () => 'PDFs are being read for other requests; try again in a moment.',
    headers: () => ({ 'retry-after': '1' }),
  },
  VERIFY_BUSY: {
    status: 429,
    message: (max: number) => `${max} PDFs are being verified already, the most at once; try again in a moment.`,
    headers: () => ({ 'retry-after': '1' }),
  },
  VERIFY_NOT_PDF: { status: 400, message: () => 'The request body is not a PDF: its bytes do not start with %PDF-.' },
  SIGNED_COPY_NOT_READY: {
    status: 409,
    message: (documentId: string, why: string) => `Document ${documentId} has no signed copy: ${why}.`,
  },
  LINK_INVALID: {
    status: 403,
    message: () =>
      'The download link is not valid: it is incomplete, altered, or signed with a key this server does not hold.',
  },
  LINK_EXPIRED: {
    status: 410,
    message: (expiredAt: string) => `The download link expired at ${expiredAt}; ask for a new one.`,
  },
  RANGE_NOT_SATISFIABLE: {
    status: 416,
    message: (size: number) => `The requested range is outside the download's ${size} bytes.`,
    headers: (size: number) => ({ 'accept-ranges': 'bytes', 'content-range': `bytes */${size}` }),
  },

  // The backend, and faults of ours
  STORAGE_UNAVAILABLE: {
    status: 503,
    message: (detail: string, _retryAfterSeconds = 1) => detail,
    headers: (_detail: string, retryAfterSeconds = 1) => ({ 'retry-after': String(retryAfterSeconds) }),
  },
  STORAGE_FULL: {
    status: 507,
    message: () => 'The storage is full: nothing was written. Try again once space has been freed.',
  },
  RECORD_EXISTS: { status: 500, message: (id: string) => `A record with id ${id} already exists`, expose: false },
  INTERNAL: { status: 500, message: () => 'Internal error' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;
/** What the message template of `code` takes. */
export type ErrorArgs<C extends ErrorCode> = Parameters<(typeof ERRORS)[C]['message']>;

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** What the catalogue makes of `code` with these arguments: the status, the sentence and the headers. */
export function answerOf<C extends ErrorCode>(
  code: C,
  ...args: ErrorArgs<C>
): { status: number; message: string; headers: Readonly<Record<string, string>>; expose: boolean } {
  const spec: ErrorSpec = ERRORS[code];
  const call = <R>(template: (...args: never[]) => R) => (template as (...args: unknown[]) => R)(...args);
  return {
    status: spec.status,
    message: call(spec.message),
    headers: spec.headers === undefined ? NO_HEADERS : call(spec.headers),
    expose: spec.expose ?? true,
  };
}

/**
 * The one error type of the portal: a catalogue `code`, its `status` and `message`, and the headers
 * its answer carries. Exported as `HttpError` too, the name a host catches.
 */
export class PortalError<C extends ErrorCode = ErrorCode> extends Error {
  override readonly name = 'PortalError';

  readonly code: C;
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** Whether `message` is for the client; `false` for a fault of ours, answered "Internal error". */
  readonly expose: boolean;

  constructor(code: C, ...args: ErrorArgs<C>) {
    const answer = answerOf(code, ...args);
    super(answer.message);
    this.code = code;
    this.status = answer.status;
    this.headers = answer.headers;
    this.expose = answer.expose;
  }
}

/**
 * Thrown by an adapter whose backend cannot be reached for now (a database refusing connections,
 * restarting, or dropping the connection under a statement); `cause` holds the driver's error.
 */
export function storageUnavailable(
  detail: string,
  options: { cause?: unknown; retryAfterSeconds?: number } = {},
): PortalError {
  const error = new PortalError('STORAGE_UNAVAILABLE', detail, options.retryAfterSeconds ?? 1);
  if (options.cause !== undefined) error.cause = options.cause;
  return error;
}

/** Thrown by an adapter whose disk (or quota) is full: nothing of the write was kept; `cause` holds the system error. */
export function storageFull(cause: unknown): PortalError {
  const error = new PortalError('STORAGE_FULL');
  error.cause = cause;
  return error;
}

/** Whether `error` is the catalogue error `code`. */
export const isPortalError = <C extends ErrorCode>(error: unknown, code: C): error is PortalError<C> =>
  error instanceof PortalError && error.code === code;

/** An error as a log field: name, message and stack, never the request. */
export function describeError(error: unknown): { name: string; message: string; stack?: string } {
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack };
  return { name: 'NonError', message: String(error) };
}

/** An error's message, for a log line or an attempt's record; a thrown non-error as text. */
export const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error));
