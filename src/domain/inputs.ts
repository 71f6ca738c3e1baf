import * as v from 'valibot';
import { PortalError } from '../errors.js';
import { isId } from '../shared/ids.js';
import { inDateRange, isRealDateTime } from '../shared/time.js';
import { hasControlCharacter } from '../shared/text.js';
import { signatureInput } from './signature-data.js';
import {
  MAX_DECLINE_REASON,
  MAX_DOCUMENT_BYTES,
  MAX_DOCUMENTS,
  MAX_SIGNERS,
  displayName,
  eventFilter,
  filterObject,
  isMediaType,
  mediaType,
  noControlCharacters,
  rateLimit,
} from '../shapes/values.js';

export {
  MAX_DOCUMENT_BYTES,
  MAX_DOCUMENTS,
  MAX_SIGNERS,
  displayName,
  filterObject,
  isMediaType,
  mediaType,
  signatureInput,
};

type Schema<T> = v.GenericSchema<unknown, T>;

/**
 * Parses `input` with `schema`, or throws a 400 whose message names what was wrong: the subject
 * (`signers[1].email`, `the webhook`), then the schema's own sentence. Only the first issue is
 * reported: one clear sentence beats a list.
 */
export function parseInput<T>(schema: Schema<T>, input: unknown, subject: string): T {
  // valibot's objects take an array (it is an object with no unknown keys): a body of [] is no object.
  if (Array.isArray(input) && (schema.type === 'strict_object' || schema.type === 'object')) {
    const message = (schema as { message?: unknown }).message;
    throw new PortalError('INPUT_INVALID', subject, typeof message === 'string' ? message : 'must be a JSON object.');
  }
  // An unknown field is named before anything else is said of the object: a misspelt field would
  // otherwise read as the right one missing ("filter: is required" for {"filtre": …}).
  if (schema.type === 'strict_object' && input !== null && typeof input === 'object' && !Array.isArray(input)) {
    const known = (schema as unknown as { entries: Record<string, unknown> }).entries;
    const unknown = Object.keys(input).find((key) => !Object.hasOwn(known, key));
    if (unknown !== undefined) throw new PortalError('INPUT_UNKNOWN_FIELD', subject, unknown);
  }
  const result = v.safeParse(schema, input, { abortEarly: true });
  if (result.success) return result.output;
  const issue = result.issues[0];
  const where = subject + pathOf(issue.path);
  if (
    issue.type.endsWith('object') &&
    issue.path !== undefined &&
    issue.input === undefined &&
    issue.expected !== 'never'
  ) {
    throw new PortalError('INPUT_REQUIRED', where);
  }
  if (issue.type === 'strict_object' && issue.expected === 'never' && issue.path !== undefined) {
    const key = issue.path[issue.path.length - 1]?.key;
    const owner = subject + pathOf(issue.path.slice(0, -1) as typeof issue.path);
    throw new PortalError('INPUT_UNKNOWN_FIELD', owner, String(key));
  }
  throw new PortalError('INPUT_INVALID', where, issue.message);
}

function pathOf(path: v.BaseIssue<unknown>['path']): string {
  if (path === undefined) return '';
  let text = '';
  for (const item of path) {
    text += typeof item.key === 'number' ? `[${item.key}]` : `.${String(item.key)}`;
  }
  return text;
}

/** A display name for a file or directory: 1–255 characters, no path separators or control characters. */
const entryName = v.pipe(
  v.string('must be a string'),
  v.minLength(1, 'must not be empty'),
  v.maxLength(255, 'must be at most 255 characters'),
  v.check((name) => name !== '.' && name !== '..', 'must not be "." or ".."'),
  // eslint-disable-next-line no-control-regex
  v.regex(/^[^/\\\u0000-\u001f\u007f-\u009f]+$/, 'must not contain "/", "\\" or control characters'),
);

const accountId = v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'), noControlCharacters());

/**
 * A 400 unless `value` is an account id (a non-empty string without control characters). Every
 * service method calls it first, reads included, so no such text reaches a store; the common case
 * costs one regular-expression test.
 */
export function checkAccountId(value: unknown): asserts value is string {
  if (typeof value === 'string' && value !== '' && !hasControlCharacter(value)) return;
  parseInput(accountId, value, 'accountId');
}

/** One of the portal's `eventTypes`: a webhook subscribes to one, an event is published as one. */
export const eventType = (eventTypes: readonly string[]) =>
  v.picklist(eventTypes, `must be one of: ${eventTypes.join(', ')}`);

/**
 * The agreement id a caller gave, with the signer or document id given beside it, checked before
 * any lookup: an id not of its kind (`agr_…`, `ags_…`, `agd_…`) names nothing, and is answered as
 * one that names nothing in the account, `404` (DESIGN §5: a path id of the wrong shape is 404
 * where the route table lists no 400). Every route and method that takes an agreement id asks here
 * first (the table in docs/http-api.md, "Malformed ids").
 */
export function agreementIdOf(ids: { agreementId: string; signerId?: string; documentId?: string }): string {
  const { agreementId, signerId, documentId } = ids;
  if (!isId('agr', agreementId)) throw new PortalError('AGREEMENT_NOT_FOUND', agreementId);
  if (signerId !== undefined && !isId('ags', signerId))
    throw new PortalError('SIGNER_NOT_FOUND', signerId, agreementId);
  if (documentId !== undefined && !isId('agd', documentId))
    throw new PortalError('DOCUMENT_NOT_FOUND', documentId, agreementId);
  return agreementId;
}

const signerEmail = v.pipe(
  v.string('must be a string'),
  v.maxLength(254, 'must be at most 254 characters'),
  noControlCharacters(),
  v.email('must be a valid e-mail address'),
);

/** One signer as a client sends it: exactly these four keys. */
export const signerInput = v.strictObject(
  {
    firstName: displayName,
    lastName: displayName,
    email: signerEmail,
    shouldIdentify: v.boolean('must be true or false'),
  },
  'must be a JSON object',
);
export type SignerInput = v.InferOutput<typeof signerInput>;

/** The body of `PATCH /agreements/{agreementId}/signers/{signerId}`: the fields to correct, at least one. */
export const signerCorrectionInput = v.pipe(
  v.strictObject(
    { firstName: v.optional(displayName), lastName: v.optional(displayName), email: v.optional(signerEmail) },
    'must be an object such as {"email": "bo@example.com"}',
  ),
  v.check((input) => Object.keys(input).length > 0, 'give at least one of firstName, lastName and email'),
);

/** The longest reason a sender may give for voiding an agreement. */
const MAX_VOID_REASON = 1000;
/** The body of `POST /agreements/{agreementId}/void`: why, 1–1,000 characters. */
export const voidInput = v.strictObject(
  {
    reason: v.pipe(
      v.string('must be text'),
      v.check((text) => text.trim() !== '', 'must not be empty'),
      v.maxLength(MAX_VOID_REASON, `must be at most ${MAX_VOID_REASON} characters`),
      noControlCharacters(),
    ),
  },
  'must be an object such as {"reason": "…"}',
);

/** The most fields one agreement places: 20 for each of five signers. */
export const MAX_FIELDS = 100;
const FIELD_TYPES = ['signature', 'name', 'date', 'initials'] as const;
const index = (what: string) =>
  v.pipe(
    v.number('must be a number'),
    v.integer(`must be a whole number: a 0-based index into the ${what} as given`),
    v.minValue(0, 'must be at least 0'),
  );
const percent = v.pipe(
  v.number('must be a number'),
  v.minValue(0, 'must be at least 0'),
  v.maxValue(100, 'must be at most 100'),
);
const extent = v.pipe(
  v.number('must be a number'),
  v.gtValue(0, 'must be more than 0'),
  v.maxValue(100, 'must be at most 100'),
);

/**
 * One entry of the `fields` part (DESIGN §12): where a signer's value is stamped, the box in percent
 * of the page from its top-left corner and lying wholly on it. Which signer, document and page exist
 * is checked against the form once it is whole.
 */
export const fieldInput = v.pipe(
  v.strictObject(
    {
      signer: index('signers'),
      document: index('documents'),
      page: v.pipe(
        v.number('must be a number'),
        v.integer('must be a whole number'),
        v.minValue(1, 'must be at least 1 (pages count from 1)'),
      ),
      x: percent,
      y: percent,
      width: extent,
      height: extent,
      type: v.optional(v.picklist(FIELD_TYPES, `must be one of: ${FIELD_TYPES.join(', ')}`), 'signature'),
    },
    'must be a JSON object such as {"signer": 0, "document": 0, "page": 1, "x": 10, "y": 80, "width": 30, "height": 8}',
  ),
  v.check((field) => field.x + field.width <= 100, 'x + width must be at most 100: the box must lie on the page'),
  v.check((field) => field.y + field.height <= 100, 'y + height must be at most 100: the box must lie on the page'),
);

export type FieldInput = v.InferOutput<typeof fieldInput>;

// Webhooks

/**
 * A webhook URL as the WHATWG parser writes it, which is what the transport calls: scheme and host in
 * lower case, default port dropped, dot segments resolved, IDN host in punycode, spaces and non-ASCII
 * percent-encoded. Stored and shown so, the URL a tenant reads is the URL called.
 */
export const normalUrl = (text: string): string => new URL(text).href;

/**
 * The schemes a webhook URL may have, and what a broker's URL must hold besides: `http` and `https`
 * always, and those of the configured `destinations` (`webhooks/destinations.ts`).
 */
export interface WebhookUrls {
  /** Lower case, without the colon; `http` and `https` first. */
  readonly schemes: readonly string[];
  /** What is wrong with a URL of a broker's scheme (a missing stream, say), or `null`. */
  check(url: URL): string | null;
}

/** Webhook URLs when no destination beyond HTTP is configured. */
const HTTP_URLS: WebhookUrls = { schemes: ['http', 'https'], check: () => null };

/** What is wrong with a webhook URL, in the words of a `400`; `null` when nothing is. */
function urlProblem(text: string, urls: WebhookUrls): string | null {
  if (!URL.canParse(text)) return 'must be an absolute URL';
  const url = new URL(text);
  const scheme = url.protocol.slice(0, -1);
  if (!urls.schemes.includes(scheme))
    return urls.schemes.length === 2
      ? 'must use http or https'
      : `must use one of the schemes ${urls.schemes.join(', ')}`;
  if (scheme === 'http' || scheme === 'https') {
    // A broker's URL names its user and password (shown masked); an HTTP receiver's never does.
    if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  } else {
    const problem = urls.check(url);
    if (problem !== null) return problem;
  }
  // Stored as the parser writes it (see `normalUrl`), which may be longer than what was sent.
  return normalUrl(text).length <= 2048 ? null : 'must be at most 2048 characters';
}

function webhookUrl(urls: WebhookUrls) {
  return v.pipe(
    v.string('must be a string'),
    v.maxLength(2048, 'must be at most 2048 characters'),
    // The URL parser drops tabs and line breaks and percent-encodes the rest: the URL called would not be the one shown.
    noControlCharacters(),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const problem = urlProblem(dataset.value, urls);
      if (problem !== null) addIssue({ message: problem });
    }),
    v.description(
      `Where its calls go: an \`http(s)\` receiver (no credentials in the URL), or, where the portal has \`destinations\` configured, a broker: \`amqp(s)://user:pass@host:port/vhost?exchange=X&routingKey=Y\`, \`nats://host:port/subject\`, \`mqtt(s)://host:port/topic\`, \`redis(s)://host:port/stream?db=N\`, \`sqs://queue-url-without-scheme\`. A broker's password is shown as \`***\`.`,
    ),
    // What the checks above mean, for the OpenAPI document (they are functions, which JSON Schema cannot hold).
    v.metadata({
      format: 'uri',
      pattern:
        '^([Hh][Tt][Tt][Pp][Ss]?|[Aa][Mm][Qq][Pp][Ss]?|[Nn][Aa][Tt][Ss]|[Mm][Qq][Tt][Tt][Ss]?|[Rr][Ee][Dd][Ii][Ss][Ss]?|[Ss][Qq][Ss])://',
    }),
  );
}

/** The body of `POST /webhooks` and the input of `webhooks.create`: `{ type, url, filter? }`. */
export function webhookInput(eventTypes: readonly string[], urls: WebhookUrls = HTTP_URLS) {
  return v.strictObject(
    {
      type: eventType(eventTypes),
      url: webhookUrl(urls),
      filter: v.optional(v.nullable(eventFilter)),
      rateLimit: v.optional(v.nullable(rateLimit)),
      signatureScheme: v.optional(
        v.pipe(
          v.picklist(['hmac-sha256', 'ed25519'], 'must be "hmac-sha256" or "ed25519"'),
          v.description(
            'How its calls are signed: `hmac-sha256` (default; `v1,` under the `whsec_` secret) or `ed25519` (`v1a,`; the receiver verifies with the public key).',
          ),
        ),
      ),
    },
    'must be an object with "type" and "url"',
  );
}

/**
 * The body of `PATCH /webhooks/{id}` and the input of `webhooks.update`: `{ filter?, rateLimit? }`,
 * one of them at least; `null` removes it.
 */
export const webhookFilterInput = v.pipe(
  v.strictObject(
    { filter: v.optional(v.nullable(eventFilter)), rateLimit: v.optional(v.nullable(rateLimit)) },
    'must be an object such as {"filter": {"customer.tier": "gold"}}, {"filter": null} or {"rateLimit": 50}',
  ),
  v.check(
    (body) => body.filter !== undefined || body.rateLimit !== undefined,
    'must name "filter" or "rateLimit" (or both)',
  ),
);

/** The most recent events a filter's dry run reads: 20 by default, at most 100. */
export const DRY_RUN_LIMIT = { default: 20, max: 100 } as const;

/** The body of `POST /webhooks/dry-run` and the input of `webhooks.dryRun`: `{ type, filter, limit? }`. */
export function dryRunInput(eventTypes: readonly string[]) {
  return v.strictObject(
    {
      type: eventType(eventTypes),
      filter: v.nullable(eventFilter),
      limit: v.optional(
        v.pipe(
          v.number('must be a number'),
          v.integer('must be a whole number'),
          v.minValue(1, 'must be 1 or more'),
          v.maxValue(DRY_RUN_LIMIT.max, `must be at most ${DRY_RUN_LIMIT.max}`),
          v.description(`How many of the most recent events of the type to try; default ${DRY_RUN_LIMIT.default}.`),
        ),
      ),
    },
    'must be an object with "type" and "filter"',
  );
}

/** The options of `events.publish`: `{ orderingKey? }`. */
export const publishOptions = v.strictObject(
  {
    orderingKey: v.optional(
      v.pipe(
        v.string('must be a string'),
        v.minLength(1, 'must not be empty'),
        v.maxLength(255, 'must be at most 255 characters'),
        v.check((key) => !hasControlCharacter(key), 'must not hold control characters'),
      ),
    ),
  },
  'must be an object such as {"orderingKey": "cus_42"}',
);

/** How long a rotated secret still signs calls when the rotation names no grace: 24 hours. */
export const DEFAULT_SECRET_GRACE_MS = 24 * 60 * 60 * 1000;
/** The longest grace a rotation may ask for: 7 days, a week to roll the new secret out. */
export const MAX_SECRET_GRACE_MS = 7 * 24 * 60 * 60 * 1000;

/** The body of `POST /webhooks/{id}/rotate-secret` and the options of `webhooks.rotateSecret`: `{ graceMs? }`. */
export const secretRotationInput = v.strictObject(
  {
    graceMs: v.optional(
      v.pipe(
        v.number('must be a number of milliseconds'),
        v.integer('must be a whole number of milliseconds'),
        v.minValue(0, 'must be 0 or more'),
        v.maxValue(MAX_SECRET_GRACE_MS, `must be at most ${MAX_SECRET_GRACE_MS} (7 days)`),
        v.description(
          'How long the replaced secret still signs calls, beside the new one; 0 ends it at once. Default 86400000 (24 h).',
        ),
      ),
    ),
  },
  'must be an object such as {"graceMs": 3600000}',
);
export type SecretRotationInput = v.InferInput<typeof secretRotationInput>;
/** An RFC 3339 date-time with its offset (`Z` or `±hh:mm`), fractions of a second allowed (ATOM is one), naming a real instant of years 0001–9999. */
const SINCE_MESSAGE =
  'must be a date-time such as 2026-11-21T09:05:07+00:00 (RFC 3339, with its offset, a real date of years 0001 to 9999)';
const dateTimeText = v.pipe(
  v.string(SINCE_MESSAGE),
  v.check(isRealDateTime, SINCE_MESSAGE),
  v.metadata({ format: 'date-time', examples: ['2026-11-21T09:05:07+00:00'] }),
);

/** The body of `POST /webhooks/{id}/recover`: `{ since }`, a date-time, read to the second. */
export const recoverBody = v.strictObject({ since: dateTimeText }, 'must be an object with "since"');

/** The bounds of a delivery log page (`GET /webhooks/{id}/deliveries?limit=`). */
export const DELIVERIES_PAGE = { default: 50, max: 500 } as const;

const dateTime = v.union([v.pipe(v.date(), v.check(inDateRange)), dateTimeText], SINCE_MESSAGE);

/** Which page of a delivery log: `webhooks.deliveries`' query, and the route's query string once read. */
export const deliveryQueryInput = v.strictObject(
  {
    limit: v.optional(
      v.pipe(
        v.number(`must be a whole number from 1 to ${DELIVERIES_PAGE.max}`),
        v.integer(`must be a whole number from 1 to ${DELIVERIES_PAGE.max}`),
        v.minValue(1, `must be a whole number from 1 to ${DELIVERIES_PAGE.max}`),
        v.maxValue(DELIVERIES_PAGE.max, `must be a whole number from 1 to ${DELIVERIES_PAGE.max}`),
      ),
    ),
    cursor: v.optional(
      v.pipe(
        v.string('must be the nextCursor of a page, as it came'),
        v.maxLength(200, 'must be the nextCursor of a page, as it came'),
      ),
    ),
    status: v.optional(
      v.picklist(
        ['pending', 'succeeded', 'failed', 'cancelled'],
        'must be one of pending, succeeded, failed, cancelled',
      ),
    ),
    eventType: v.optional(
      v.pipe(
        v.string('must be an event type'),
        v.minLength(1, 'must be an event type'),
        v.maxLength(200, 'must be at most 200 characters'),
      ),
    ),
    eventId: v.optional(v.custom<string>((value) => isId('evt', value), 'must be an event id (evt_…)')),
    since: v.optional(dateTime),
    until: v.optional(dateTime),
  },
  'must be an object such as { limit, cursor, status, eventType, eventId, since, until }',
);
export type DeliveryQueryInput = v.InferInput<typeof deliveryQueryInput>;

/** The input of `webhooks.recover`: the body, or with `since` a `Date`. */
export const recoverInput = v.strictObject({ since: dateTime }, 'must be an object with "since"');

// Files and attachments

const parentId = v.nullish(v.custom<string>((value) => isId('fsd', value), 'must be a directory id (fsd_…)'));
export const directoryInput = v.strictObject(
  { name: entryName, directoryId: parentId },
  'must be an object such as {"name": "Contracts"}',
);
export const fileInput = v.object(
  {
    name: entryName,
    mime: mediaType,
    directoryId: parentId,
    fileShareId: v.nullish(v.custom<string>((value) => isId('fss', value), 'must be a file share id (fss_…)')),
  },
  'must be an object',
);

const hostId = (prefix: 'tck' | 'tcm', what: string) =>
  v.nullish(
    v.custom<string>(
      (value) => isId(prefix, value),
      `must be a ${what} id (${prefix}_ followed by letters and digits)`,
    ),
  );
export const attachmentInput = v.object(
  {
    ticketId: hostId('tck', 'ticket'),
    messageId: hostId('tcm', 'message'),
    name: entryName,
    mime: mediaType,
  },
  'must be an object',
);

/** `POST /agreements`'s optional `signingOrder` part. */
export const signingOrderInput = v.picklist(['parallel', 'sequential'], 'must be "parallel" or "sequential"');
/** `POST /agreements`'s optional `expiresAt` part: a date-time (checked to lie in the future when the agreement is made). */
export const expiresAtInput = dateTimeText;
/**
 * `POST /agreements`'s optional `locale` part: a BCP 47 language tag (`fr`, `fr-CA`, `en-GB`), kept
 * in its canonical form. The signing page, mails and certificate speak its language where the
 * portal has it (`src/domain/locales/`), English otherwise.
 */
export const localeInput = v.pipe(
  v.string(),
  v.maxLength(35, 'must be at most 35 characters'),
  v.regex(/^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*$/, 'must be a BCP 47 language tag such as "fr" or "en-GB"'),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    try {
      return Intl.getCanonicalLocales(dataset.value)[0]!;
    } catch {
      addIssue({ message: 'must be a BCP 47 language tag such as "fr" or "en-GB"' });
      return NEVER;
    }
  }),
);

/** A lifetime in whole seconds within `range`; `longest` says its maximum in words (`30 days`). */
const wholeSeconds = (range: { min: number; max: number }, longest: string) =>
  v.pipe(
    v.number('must be a whole number of seconds'),
    v.integer('must be a whole number of seconds'),
    v.minValue(range.min, `must be at least ${range.min} seconds`),
    v.maxValue(range.max, `must be at most ${range.max} seconds (${longest})`),
  );

/** The shortest and longest life of a signing link, and its default (72 h). */
export const SIGNING_LINK_SECONDS = { min: 60, max: 30 * 24 * 3600, default: 72 * 3600 } as const;

/** The optional body of `POST /agreements/{id}/signers/{signerId}/signing-link`. */
export const signingLinkInput = v.strictObject(
  {
    expiresInSeconds: v.optional(wholeSeconds(SIGNING_LINK_SECONDS, '30 days')),
    accessCode: v.optional(
      v.pipe(
        v.string('must be a string of 4 to 64 characters'),
        v.minLength(4, 'must be at least 4 characters'),
        v.maxLength(64, 'must be at most 64 characters'),
        v.check((code) => !hasControlCharacter(code), 'must not hold control characters'),
      ),
    ),
    send: v.optional(v.boolean('must be true or false')),
  },
  'must be an object such as {"expiresInSeconds": 259200, "accessCode": "…", "send": true}',
);

/** The body of `POST /signing/identify`: the code the signer was mailed or given. */
export const identifyInput = v.strictObject(
  {
    code: v.pipe(
      v.string('must be a string'),
      v.minLength(1, 'must not be empty'),
      v.maxLength(64, 'must be at most 64 characters'),
    ),
  },
  'must be an object such as {"code": "123456"}',
);

/** The body of `POST /signing/decline`: an optional reason, at most 1,000 characters. */
export const declineInput = v.strictObject(
  {
    reason: v.optional(
      v.nullable(
        v.pipe(
          v.string('must be text'),
          v.maxLength(MAX_DECLINE_REASON, `must be at most ${MAX_DECLINE_REASON} characters`),
          noControlCharacters(),
        ),
      ),
    ),
  },
  'must be an object such as {"reason": "…"}',
);

/** The body of `POST /signing/sign`: the signature as a data-URL, as `signerSignatureData` at creation. */
export const signingSignatureInput = v.strictObject(
  {
    signature: signatureInput,
    consent: v.optional(
      v.strictObject(
        {
          disclosureVersion: v.pipe(
            v.string('must be a string'),
            v.minLength(1, 'must not be empty'),
            v.maxLength(64, 'must be at most 64 characters'),
          ),
        },
        'must be an object such as {"disclosureVersion": "1"}',
      ),
    ),
  },
  'must be an object such as {"signature": "data:image/png;base64,…"}',
);

/** A portal session's lifetime, in seconds: a minute to a day, an hour by default. */
export const PORTAL_SESSION_SECONDS = { min: 60, max: 86_400, default: 3_600 } as const;

/** `POST /portal-sessions`: its lifetime, what it may reach, whether it may only read. */
export const portalSessionInput = v.strictObject(
  {
    ttlSeconds: v.optional(wholeSeconds(PORTAL_SESSION_SECONDS, 'a day')),
    scopes: v.optional(
      v.pipe(
        v.array(
          v.picklist(['webhooks', 'agreements', 'files'], 'must be "webhooks", "agreements" or "files"'),
          'must be a list of scopes',
        ),
        v.minLength(1, 'must name at least one scope'),
        v.check((scopes) => new Set(scopes).size === scopes.length, 'must name each scope once'),
      ),
    ),
    readOnly: v.optional(v.boolean('must be true or false')),
  },
  'must be a JSON object',
);
