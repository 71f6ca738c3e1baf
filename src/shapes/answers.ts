/**
 * The shapes the API answers with, as valibot schemas: the record types the API and the
 * programmatic methods return are derived from them (`records.ts`), and the OpenAPI document is
 * generated from them (`openapi/shapes.ts`), so a type, its check and its documentation cannot
 * drift apart. Objects are strict: in the document an undeclared field is an error.
 */
import * as v from 'valibot';
import {
  ERASED,
  IDENTIFICATION_METHODS,
  MAX_DECLINE_REASON,
  MAX_DOCUMENTS,
  MAX_SIGNERS,
  atomDateTime,
  count,
  displayName,
  eventFilter,
  id,
  mediaType,
  nullableTime,
  rateLimit,
  sha256Hex,
  signatureDataUrl,
} from './values.js';

export const webhook = v.strictObject({
  id: id('wbh'),
  type: v.pipe(v.string(), v.minLength(1), v.description("The event type, one of the portal's `eventTypes`.")),
  url: v.pipe(
    v.string(),
    v.description("Where its calls go; a broker URL's password is shown as `***`."),
    v.metadata({ format: 'uri' }),
  ),
  /**
   * The `whsec_` secret its calls are signed with (`v1,` HMAC-SHA256), which the receiver verifies
   * with; absent for a webhook signing with ed25519, whose private key never leaves the portal.
   */
  secret: v.exactOptional(
    v.pipe(
      v.string(),
      v.regex(/^whsec_[A-Za-z0-9+/]{43}=$/),
      v.description(
        "`whsec_` + base64 of 32 random bytes (Standard Webhooks); the key of every call's `v1,` signature. Absent for a webhook signing with ed25519.",
      ),
    ),
  ),
  createdAt: atomDateTime,
  /** Which events of its type it gets (`rules/event-filter.ts`); absent: every one. */
  filter: v.exactOptional(eventFilter),
  /** At most this many of its calls start in any one-second window (`rules/rate-limit.ts`); absent: no limit. */
  rateLimit: v.exactOptional(rateLimit),
  /** `ed25519` for a webhook whose calls carry `v1a,` signatures; absent: `v1,` HMAC-SHA256. */
  signatureScheme: v.exactOptional(
    v.pipe(
      v.literal('ed25519'),
      v.description(
        'Its calls carry `v1a,` ed25519 signatures, verified with `publicKey`; absent: `v1,` HMAC-SHA256 with `secret`.',
      ),
    ),
  ),
  /** The `whpk_` public key an ed25519 webhook's calls verify with. */
  publicKey: v.exactOptional(
    v.pipe(
      v.string(),
      v.regex(/^whpk_[A-Za-z0-9+/]{43}=$/),
      v.description(
        '`whpk_` + base64 of the 32-byte ed25519 public key the calls verify with (Standard Webhooks); the private key never leaves the portal.',
      ),
    ),
  ),
});

/** Why a webhook was disabled: a `410 Gone` answer, calls failing past the thresholds, or by hand. */
export const webhookDisabledReason = v.picklist(['gone', 'failing', 'manual']);

export const webhookHealth = v.strictObject({
  status: v.pipe(
    v.picklist(['enabled', 'disabled']),
    v.description('A disabled webhook gets no calls: its deliveries that fall due are cancelled.'),
  ),
  disabledReason: v.pipe(
    v.nullable(webhookDisabledReason),
    v.description(
      '`gone`: it answered 410; `failing`: its calls failed past `webhooks.disableAfterMs` and `webhooks.disableAfterFailures`; `manual`: disabled through the API.',
    ),
  ),
  disabledAt: nullableTime('When it was disabled; `null` while enabled.'),
  /** The first failed attempt of the current run of failures; `null` once an attempt succeeds. */
  failingSince: nullableTime(
    'The first failed attempt of the current run of failures; `null` when the last attempt succeeded.',
  ),
  lastSuccessAt: nullableTime('The last attempt that succeeded.'),
  lastAttemptAt: nullableTime('The last attempt recorded.'),
  /** Failed attempts since the last success (or since enabled again). */
  consecutiveFailures: v.pipe(count, v.description('Failed attempts since the last success (or since enabled again).')),
  /**
   * Until when its calls wait: as its receiver asked (`Retry-After` on a `429` or `503`), or while
   * it is down (a pause between tries, `rules/in-flight.ts`); `null` when they do not.
   */
  heldUntil: nullableTime(
    "Until when its calls wait, as its receiver asked with `Retry-After` on a `429` or `503` (at most an hour), or while it seems down (overload at one call in flight: a pause of 1 s, then 2 s, between tries); `null` when they do not. Its deliveries due before then are sent then. The answer that asked counts neither as a failure toward auto-disable nor against the delivery's retries; the call that found the receiver down does, as any failure.",
  ),
  /** The webhook's `rateLimit`: calls a second at most; `null` when it has none. */
  rateLimit: v.pipe(
    v.nullable(rateLimit),
    v.description('Its `rateLimit`: at most this many calls start in any one-second window; `null` when it has none.'),
  ),
  /**
   * Calls in flight at most, as the delivery workers adapted it to what its receiver takes (fewer
   * after `429`, `503`, timeouts or failed connections, more while calls succeed); `null` when no
   * worker limits it below its account's share.
   */
  inFlightLimit: v.pipe(
    v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1))),
    v.description(
      "Calls in flight at most, as the delivery workers adapt it to what its receiver takes: halved on a `429`, a `503`, a timeout or a failed connection, one more for each window of successes, and from one call again once a receiver that was down answers (slow start). Each worker keeps its own, for its share of the account; this is the last one a worker set. `null` when none limits it below the account's share (`webhooks.concurrencyPerAccount`).",
    ),
  ),
});

export const statsBucket = v.strictObject({
  start: v.pipe(atomDateTime, v.description('Where the bucket starts (an hour).')),
  succeeded: v.pipe(count, v.description('Calls answered 2xx.')),
  failed: v.pipe(count, v.description('Calls answered with another status.')),
  errors: v.pipe(count, v.description('Calls with no answer: a timeout, a refused address, a network error.')),
  p50Ms: v.pipe(
    v.nullable(count),
    v.description(
      'The median call duration in ms, estimated from duration bins (up to 50, 100, 250, 500, 1000, 2500, 5000, 10000 ms, and beyond); `null` without calls.',
    ),
  ),
  p95Ms: v.pipe(v.nullable(count), v.description('The 95th percentile, estimated alike.')),
});

export const webhookStats = v.strictObject({
  window: v.pipe(v.picklist(['24h', '7d']), v.description('The window asked for.')),
  from: v.pipe(atomDateTime, v.description('Where the first bucket starts.')),
  until: v.pipe(atomDateTime, v.description('Where the last bucket ends: the end of the current hour.')),
  bucketSeconds: v.pipe(count, v.description("Each bucket's span: 3600 for `24h`, 21600 for `7d`.")),
  buckets: v.pipe(v.array(statsBucket), v.description('Oldest first: 24 for `24h`, 28 for `7d`.')),
  totals: v.pipe(statsBucket, v.description('The whole window; its `start` is `from`.')),
});

export const deliveryAttempt = v.strictObject({
  at: atomDateTime,
  statusCode: v.nullable(v.pipe(v.number(), v.integer(), v.minValue(100), v.maxValue(599))),
  error: v.nullable(v.string()),
  durationMs: count,
  /** Set when the call never left the portal (its egress proxy failed): `WebhookCallResult.local`. */
  local: v.optional(
    v.pipe(
      v.literal(true),
      v.description(
        "Present when the call never left the portal: its egress proxy failed. Such an attempt counts neither toward the webhook's auto-disable nor toward the delivery's retries.",
      ),
    ),
  ),
  /** Set when the answer held the webhook's calls (a `429` or `503` with `Retry-After`): no failure, no retry spent. */
  held: v.optional(
    v.pipe(
      v.literal(true),
      v.description(
        "Present when the receiver answered `429` or `503` with `Retry-After`: the webhook's calls waited until then (at most an hour), and the attempt counts neither toward the webhook's auto-disable nor toward the delivery's retries.",
      ),
    ),
  ),
});

export const deliveryStatus = v.picklist(['pending', 'succeeded', 'failed', 'cancelled']);

export const delivery = v.strictObject({
  id: id('whd'),
  webhookId: id('wbh'),
  eventId: id('evt'),
  /** The event's type: the webhook's own, or `webhook.test` for a test call. */
  eventType: v.pipe(v.string(), v.minLength(1)),
  status: deliveryStatus,
  /** The last attempts, oldest first: at most 50 (`MAX_ATTEMPTS_KEPT`), older ones dropped. */
  attempts: v.pipe(v.array(deliveryAttempt), v.maxLength(50)),
  /** Every attempt ever made, those dropped from `attempts` included. */
  attemptCount: count,
  nextAttemptAt: v.nullable(atomDateTime),
  createdAt: atomDateTime,
  /**
   * Its event's ordering key (`null`: none). A pending delivery of a key that waits for an earlier
   * one of the same webhook and key has no `nextAttemptAt` until that one ends.
   */
  orderingKey: v.pipe(
    v.nullable(v.string()),
    v.description(
      "Its event's ordering key: deliveries of one webhook and key are called one at a time, in publish order. A pending one with no `nextAttemptAt` waits for an earlier one of its key.",
    ),
  ),
  /**
   * Set by a redeliver asked for while a call of the delivery was in flight: once that call is
   * recorded, whatever its outcome, the delivery is pending and due again, and one more call follows.
   */
  redeliverQueued: v.pipe(
    v.boolean(),
    v.description(
      'A redeliver was asked for during a call in flight: one more call follows once that call is recorded.',
    ),
  ),
});

export const fileEntryType = v.picklist(['file', 'directory']);

export const fileEntry = v.strictObject({
  id: v.pipe(v.string(), v.regex(/^(fsf|fsd)_[0-9A-Za-z]{1,64}$/)),
  type: fileEntryType,
  name: v.pipe(v.string(), v.minLength(1), v.maxLength(255)),
  size: count,
  mime: mediaType,
  fileShareId: v.nullable(id('fss')),
  createdAt: atomDateTime,
});

export const identificationMethod = v.picklist(IDENTIFICATION_METHODS);

/** A signer's identification as the host sees it: `method` and `at` once verified with the current link, else `null`. */
export const signerIdentification = v.strictObject({
  required: v.pipe(
    v.boolean(),
    v.description('`shouldIdentify`, or the current signing link was issued with an `accessCode`.'),
  ),
  verified: v.pipe(v.boolean(), v.description('The signer identified with their current link.')),
  method: v.nullable(identificationMethod),
  at: v.nullable(atomDateTime),
});

export const agreementSigner = v.strictObject({
  id: id('ags'),
  firstName: displayName,
  lastName: displayName,
  email: v.pipe(
    v.union([v.pipe(v.string(), v.email()), v.literal(ERASED)]),
    v.description('The address, or `"[erased]"` once the agreement\'s personal data is erased (so are both names).'),
  ),
  shouldIdentify: v.boolean(),
  signature: v.nullable(signatureDataUrl),
  signatureHash: v.nullable(sha256Hex),
  signedAt: v.nullable(atomDateTime),
  /** When the signer first opened the agreement through a signing link. */
  viewedAt: v.pipe(
    v.nullable(atomDateTime),
    v.description('When the signer first opened the agreement through a signing link.'),
  ),
  declinedAt: v.nullable(atomDateTime),
  declineReason: v.pipe(
    v.nullable(v.pipe(v.string(), v.maxLength(MAX_DECLINE_REASON))),
    v.description('What the signer gave as the reason to decline, if anything.'),
  ),
  /**
   * Whether the signer must identify before seeing the documents (`shouldIdentify`, or a link
   * issued with an access code), and whether, how and when they did with their current link.
   */
  identification: v.pipe(
    signerIdentification,
    v.description(
      "The signer's identification with their current signing link: required, and once verified how and when.",
    ),
  ),
});

export const agreementDocument = v.strictObject({
  id: id('agd'),
  documentName: v.pipe(v.string(), v.minLength(1), v.maxLength(255)),
  fileSize: count,
  fileHash: sha256Hex,
  /** SHA-256 (hex) of the completed copy (the signatures stamped in, sealed); `null` until it is made, and for a document that is not a PDF. */
  signedFileHash: v.pipe(
    v.nullable(sha256Hex),
    v.description(
      "SHA-256 (hex) of the completed copy (every signer's signature stamped in, sealed); `null` until it is made, and for a document that is not a PDF.",
    ),
  ),
});

export const agreementStatus = v.picklist(['sent', 'signed']);
/** `parallel`: every signer may sign at any time; `sequential`: each only after those before. */
export const signingOrder = v.picklist(['parallel', 'sequential']);
/** Why an agreement closed unsigned. */
export const closedReason = v.picklist(['declined', 'expired', 'voided']);

export const agreement = v.strictObject({
  id: id('agr'),
  name: displayName,
  status: agreementStatus,
  signerName: displayName,
  signerSignature: signatureDataUrl,
  signerSignatureHash: sha256Hex,
  signers: v.pipe(v.array(agreementSigner), v.minLength(1), v.maxLength(MAX_SIGNERS)),
  documents: v.pipe(v.array(agreementDocument), v.minLength(1), v.maxLength(MAX_DOCUMENTS)),
  createdAt: atomDateTime,
  signingOrder: v.pipe(signingOrder, v.description('`sequential`: each signer may sign only after those before.')),
  /** When the agreement closes unsigned (ATOM), or `null`: never. */
  expiresAt: v.pipe(v.nullable(atomDateTime), v.description('When the agreement closes unsigned; `null`: never.')),
  /** When it closed unsigned (declined or expired), with why; both `null` while open or once signed. */
  closedAt: v.pipe(v.nullable(atomDateTime), v.description('When it closed unsigned (declined or expired).')),
  closedReason: v.nullable(closedReason),
});

/** A signer as an event carries it: no signature image (its hash and time are kept). */
export const agreementEventSigner = v.omit(agreementSigner, ['signature']);

/**
 * The agreement as `agreement-created` and `agreement-signed` carry it: without the signature
 * images (`signerSignature`, each signer's `signature`), hashes kept, so that a call stays a few
 * KiB; `GET /agreements/{agreementId}` answers the whole agreement.
 */
export const agreementEventData = v.strictObject({
  ...v.omit(agreement, ['signerSignature', 'signers']).entries,
  signers: v.pipe(v.array(agreementEventSigner), v.minLength(1), v.maxLength(MAX_SIGNERS)),
});

/** A link that serves an attachment without Authorization until `expiresAt`. */
export const downloadLink = v.strictObject({
  link: v.pipe(v.string(), v.metadata({ format: 'uri' })),
  expiresAt: atomDateTime,
});

export const verification = v.strictObject({
  sealed: v.pipe(
    v.boolean(),
    v.description(
      "The PDF's last signature covers every byte of the file and each of its signatures checks against the bytes it covers (integrity, not trust). A file that is not `intact` is read strictly: one that opens only once repaired is not sealed.",
    ),
  ),
  intact: v.pipe(v.boolean(), v.description('The bytes are, to the byte, a completed copy this account issued.')),
  level: v.pipe(
    v.nullable(v.picklist(['B-B', 'B-T', 'B-LT', 'B-LTA'])),
    v.description(
      "The seal's PAdES level; `null` when it is not sealed, or sealed other than as PAdES (`adbe.pkcs7.detached`).",
    ),
  ),
  signedAt: v.pipe(
    v.nullable(atomDateTime),
    v.description("When it was sealed: the timestamp's time, else the signing time the seal claims."),
  ),
  agreementId: v.pipe(v.nullable(id('agr')), v.description('The agreement whose completed copy it is, when `intact`.')),
  documentId: v.pipe(v.nullable(id('agd')), v.description('The document whose completed copy it is, when `intact`.')),
});

export const attachment = v.strictObject({
  id: id('tca'),
  ticketId: id('tck'),
  messageId: id('tcm'),
  name: v.pipe(v.string(), v.minLength(1), v.maxLength(255)),
  mime: mediaType,
  size: count,
  createdAt: atomDateTime,
});

/** The answer of `POST /portal-sessions`. */
export const portalSession = v.strictObject({
  id: v.pipe(
    v.string(),
    v.regex(/^pts_[A-Za-z0-9_-]{22}$/),
    v.description('Names the session for `DELETE /portal-sessions/{id}`.'),
  ),
  url: v.nullable(
    v.pipe(
      v.string(),
      v.description(
        "The portal page with the token and the scopes in its fragment (`#session=<token>&scopes=<scopes>`, and `&readOnly=1` for a read-only session; never sent to a server by a browser); `null` when the portal serves no page. Absolute with `publicUrl` or from the request's host.",
      ),
    ),
  ),
  token: v.pipe(
    v.string(),
    v.regex(/^pts_[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/),
    v.description(
      'A Bearer credential for the API as this account, within the scopes, until `expiresAt` or a revoke. Shown once: only a hash of it is kept.',
    ),
  ),
  expiresAt: atomDateTime,
});
