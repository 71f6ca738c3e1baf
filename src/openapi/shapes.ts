import * as v from 'valibot';
import { idPattern, type IdPrefix } from '../shared/ids.js';
import { eventFilter, rateLimit } from '../domain/inputs.js';
import type { PortalSessionLink } from '../domain/portal-sessions.js';
import type {
  AgreementEventData,
  Agreement,
  AgreementDocument,
  AgreementSigner,
  Attachment,
  Delivery,
  DeliveryAttempt,
  DownloadLink,
  FileEntry,
  Webhook,
  WebhookHealth,
} from '../records.js';
import type { WebhookStats } from '../rules/call-stats.js';
import {
  MAX_DECLINE_REASON,
  MAX_DOCUMENTS,
  MAX_FIELDS,
  MAX_SIGNERS,
  displayName,
  expiresAtInput,
  localeInput,
  fieldInput,
  mediaType,
  signatureDataUrl,
  signerInput,
  signingOrderInput,
} from '../domain/inputs.js';
import type { Verification } from '../domain/agreements.js';
import { AUDIT_ACTIONS, ERASED, IDENTIFICATION_METHODS } from '../records.js';

/**
 * The shapes the API answers with, as valibot schemas: the OpenAPI document is generated from them
 * (with the input schemas the routes validate with), and the type checks at the end of this file tie
 * each to its record type, so a field added to a record and not here fails to compile.
 * Objects are strict: in the document an undeclared field is an error, so a response cannot drift.
 */

const id = (prefix: IdPrefix) => v.pipe(v.string(), v.regex(idPattern(prefix)));

/** ATOM, UTC, second precision (`time.ts`): a narrower form of RFC 3339 `date-time`. */
const atomDateTime = v.pipe(
  v.string(),
  v.regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/),
  v.metadata({ format: 'date-time', examples: ['2026-11-21T09:05:07+00:00'] }),
);
const sha256Hex = v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/), v.description('SHA-256, lower-case hex'));
const count = v.pipe(v.number(), v.integer(), v.minValue(0));

export const errorBody = v.strictObject({
  message: v.pipe(v.string(), v.minLength(1), v.description('One sentence naming what was wrong.')),
});

export const webhook = v.strictObject({
  id: id('wbh'),
  type: v.pipe(v.string(), v.minLength(1), v.description("The event type, one of the portal's `eventTypes`.")),
  url: v.pipe(
    v.string(),
    v.description("Where its calls go; a broker URL's password is shown as `***`."),
    v.metadata({ format: 'uri' }),
  ),
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
  filter: v.exactOptional(eventFilter),
  rateLimit: v.exactOptional(rateLimit),
  signatureScheme: v.exactOptional(
    v.pipe(
      v.literal('ed25519'),
      v.description(
        'Its calls carry `v1a,` ed25519 signatures, verified with `publicKey`; absent: `v1,` HMAC-SHA256 with `secret`.',
      ),
    ),
  ),
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

const nullableTime = (description: string) => v.nullable(v.pipe(atomDateTime, v.description(description)));

export const webhookHealth = v.strictObject({
  status: v.pipe(
    v.picklist(['enabled', 'disabled']),
    v.description('A disabled webhook gets no calls: its deliveries that fall due are cancelled.'),
  ),
  disabledReason: v.pipe(
    v.nullable(v.picklist(['gone', 'failing', 'manual'])),
    v.description(
      '`gone`: it answered 410; `failing`: its calls failed past `webhooks.disableAfterMs` and `webhooks.disableAfterFailures`; `manual`: disabled through the API.',
    ),
  ),
  disabledAt: nullableTime('When it was disabled; `null` while enabled.'),
  failingSince: nullableTime(
    'The first failed attempt of the current run of failures; `null` when the last attempt succeeded.',
  ),
  lastSuccessAt: nullableTime('The last attempt that succeeded.'),
  lastAttemptAt: nullableTime('The last attempt recorded.'),
  consecutiveFailures: v.pipe(count, v.description('Failed attempts since the last success (or since enabled again).')),
  heldUntil: nullableTime(
    "Until when its calls wait, as its receiver asked with `Retry-After` on a `429` or `503` (at most an hour), or while it seems down (overload at one call in flight: a pause of 1 s, doubling, at most 4 s, between tries); `null` when they do not. Its deliveries due before then are sent then. The answer that asked counts neither as a failure toward auto-disable nor against the delivery's retries; the call that found the receiver down does, as any failure.",
  ),
  rateLimit: v.pipe(
    v.nullable(rateLimit),
    v.description('Its `rateLimit`: at most this many calls start in any one-second window; `null` when it has none.'),
  ),
  inFlightLimit: v.pipe(
    v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1))),
    v.description(
      "Calls in flight at most, as the delivery workers adapt it to what its receiver takes: halved on a `429`, a `503`, a timeout or a failed connection, one more for each window of successes, and from one call again once a receiver that was down answers (slow start). Each worker keeps its own, for its share of the account; this is the last one a worker set. `null` when none limits it below the account's share (`webhooks.concurrencyPerAccount`).",
    ),
  ),
});

const statsBucket = v.strictObject({
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

export const recoverResult = v.strictObject({
  queued: v.pipe(count, v.description('The events queued again: one new delivery each, due now.')),
});

export const webhookPublicKey = v.strictObject({
  kty: v.literal('OKP'),
  crv: v.literal('Ed25519'),
  alg: v.literal('EdDSA'),
  use: v.literal('sig'),
  kid: v.pipe(
    v.string(),
    v.regex(/^whpk_[A-Za-z0-9+/]{43}=$/),
    v.description('The key as `whpk_…`, which `verifyWebhook` takes.'),
  ),
  x: v.pipe(
    v.string(),
    v.regex(/^[A-Za-z0-9_-]{43}$/),
    v.description('The raw 32-byte public key, base64url (RFC 8037).'),
  ),
  status: v.pipe(
    v.picklist(['current', 'previous']),
    v.description(
      '`current`: the key every call is signed with; `previous`: the key a rotation replaced, which still signs beside it until `until`.',
    ),
  ),
  until: v.pipe(
    v.nullable(atomDateTime),
    v.description('Until when a previous key still signs; `null` for the current one.'),
  ),
});

export const webhookPublicKeys = v.strictObject({
  keys: v.pipe(
    v.array(webhookPublicKey),
    v.description("The current key first, then the previous one while a rotation's grace lasts (JWK Set, RFC 7517)."),
  ),
});

export const webhookPublicKeysLink = v.strictObject({
  keys: v.array(webhookPublicKey),
  url: v.pipe(
    v.string(),
    v.metadata({ format: 'uri' }),
    v.description(
      'Serves the same keys without the API key (`GET /webhook-keys/{webhookId}`): give it to the receiver. It stays the same across rotations.',
    ),
  ),
});

export const eventType = v.strictObject({
  name: v.pipe(v.string(), v.minLength(1), v.description("The type, one of the portal's `eventTypes`.")),
  description: v.nullable(v.string()),
  schema: v.pipe(
    v.nullable(v.record(v.string(), v.unknown())),
    v.description(
      "The JSON Schema (draft 2020-12) of the event's `data`; a publish whose data breaks it is refused. `null`: none defined (any JSON object).",
    ),
  ),
  example: v.pipe(
    v.unknown(),
    v.description("An example of the event's `data`, valid under its schema; `null` when none was given."),
  ),
  deprecated: v.boolean(),
});

export const eventTypeList = v.strictObject({ data: v.array(eventType) });

export const dryRunResult = v.strictObject({
  data: v.array(
    v.strictObject({
      id: id('evt'),
      type: v.pipe(v.string(), v.minLength(1)),
      createdAt: atomDateTime,
      data: v.pipe(v.unknown(), v.description("The event's data, as its calls carry it.")),
      matches: v.pipe(
        v.boolean(),
        v.description('Whether the filter matches the event: a webhook with it would get a delivery.'),
      ),
    }),
  ),
  matched: v.pipe(count, v.description('How many of the events the filter matches.')),
});

export const deliveryAttempt = v.strictObject({
  at: atomDateTime,
  statusCode: v.nullable(v.pipe(v.number(), v.integer(), v.minValue(100), v.maxValue(599))),
  error: v.nullable(v.string()),
  durationMs: count,
  local: v.optional(
    v.pipe(
      v.literal(true),
      v.description(
        "Present when the call never left the portal: its egress proxy failed. Such an attempt counts neither toward the webhook's auto-disable nor toward the delivery's retries.",
      ),
    ),
  ),
  held: v.optional(
    v.pipe(
      v.literal(true),
      v.description(
        "Present when the receiver answered `429` or `503` with `Retry-After`: the webhook's calls waited until then (at most an hour), and the attempt counts neither toward the webhook's auto-disable nor toward the delivery's retries.",
      ),
    ),
  ),
});

export const delivery = v.strictObject({
  id: id('whd'),
  webhookId: id('wbh'),
  eventId: id('evt'),
  eventType: v.pipe(v.string(), v.minLength(1)),
  status: v.picklist(['pending', 'succeeded', 'failed', 'cancelled']),
  attempts: v.pipe(v.array(deliveryAttempt), v.maxLength(50)),
  attemptCount: count,
  nextAttemptAt: v.nullable(atomDateTime),
  createdAt: atomDateTime,
  orderingKey: v.pipe(
    v.nullable(v.string()),
    v.description(
      "Its event's ordering key: deliveries of one webhook and key are called one at a time, in publish order. A pending one with no `nextAttemptAt` waits for an earlier one of its key.",
    ),
  ),
  redeliverQueued: v.pipe(
    v.boolean(),
    v.description(
      'A redeliver was asked for during a call in flight: one more call follows once that call is recorded.',
    ),
  ),
});

export const fileEntry = v.strictObject({
  id: v.pipe(v.string(), v.regex(/^(fsf|fsd)_[0-9A-Za-z]{1,64}$/)),
  type: v.picklist(['file', 'directory']),
  name: v.pipe(v.string(), v.minLength(1), v.maxLength(255)),
  size: count,
  mime: mediaType,
  fileShareId: v.nullable(id('fss')),
  createdAt: atomDateTime,
});

const identificationMethod = v.picklist(IDENTIFICATION_METHODS);

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
  viewedAt: v.pipe(
    v.nullable(atomDateTime),
    v.description('When the signer first opened the agreement through a signing link.'),
  ),
  declinedAt: v.nullable(atomDateTime),
  declineReason: v.pipe(
    v.nullable(v.pipe(v.string(), v.maxLength(MAX_DECLINE_REASON))),
    v.description('What the signer gave as the reason to decline, if anything.'),
  ),
  identification: v.pipe(
    v.strictObject({
      required: v.pipe(
        v.boolean(),
        v.description('`shouldIdentify`, or the current signing link was issued with an `accessCode`.'),
      ),
      verified: v.pipe(v.boolean(), v.description('The signer identified with their current link.')),
      method: v.nullable(identificationMethod),
      at: v.nullable(atomDateTime),
    }),
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
  signedFileHash: v.pipe(
    v.nullable(sha256Hex),
    v.description(
      "SHA-256 (hex) of the completed copy (every signer's signature stamped in, sealed); `null` until it is made, and for a document that is not a PDF.",
    ),
  ),
});

export const agreement = v.strictObject({
  id: id('agr'),
  name: displayName,
  status: v.picklist(['sent', 'signed']),
  signerName: displayName,
  signerSignature: signatureDataUrl,
  signerSignatureHash: sha256Hex,
  signers: v.pipe(v.array(agreementSigner), v.minLength(1), v.maxLength(MAX_SIGNERS)),
  documents: v.pipe(v.array(agreementDocument), v.minLength(1), v.maxLength(MAX_DOCUMENTS)),
  createdAt: atomDateTime,
  signingOrder: v.pipe(
    v.picklist(['parallel', 'sequential']),
    v.description('`sequential`: each signer may sign only after those before.'),
  ),
  expiresAt: v.pipe(v.nullable(atomDateTime), v.description('When the agreement closes unsigned; `null`: never.')),
  closedAt: v.pipe(v.nullable(atomDateTime), v.description('When it closed unsigned (declined or expired).')),
  closedReason: v.nullable(v.picklist(['declined', 'expired', 'voided'])),
});

const agreementEventSigner = v.omit(agreementSigner, ['signature']);

export const agreementEventData = v.strictObject({
  ...v.omit(agreement, ['signerSignature', 'signers']).entries,
  signers: v.pipe(v.array(agreementEventSigner), v.minLength(1), v.maxLength(MAX_SIGNERS)),
});

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

export const webhookList = v.strictObject({ data: v.array(webhook) });
export const deliveryList = v.strictObject({
  data: v.pipe(v.array(delivery), v.maxLength(500), v.description('Newest first.')),
  nextCursor: v.pipe(
    v.nullable(v.pipe(v.string(), v.minLength(1), v.maxLength(200))),
    v.description('Give it as `cursor` for the next page; `null` on the last. Opaque: pass it back as it came.'),
  ),
});
export const fileList = v.strictObject({ data: v.array(fileEntry) });
export const agreementList = v.strictObject({
  data: v.pipe(v.array(agreementEventData), v.maxLength(100), v.description('Newest first, without signature images.')),
  nextCursor: v.pipe(
    v.nullable(id('agr')),
    v.description('Give it as `cursor` for the next page; `null` on the last. Opaque: pass it back as it came.'),
  ),
});

/**
 * The body of a webhook call of `type` whose `data` is `data`: exactly the four fields `callBody`
 * writes, in its order. The OpenAPI document's `webhooks` section describes each event type's call
 * with one, so a receiver can generate its types.
 */
export const webhookCallBody = (type: string, data: v.GenericSchema) =>
  v.strictObject({
    id: v.pipe(
      id('evt'),
      v.description(
        'The event id, also sent as the `webhook-id` header: the same on every retry, so a receiver can drop duplicates.',
      ),
    ),
    type: v.literal(type),
    createdAt: atomDateTime,
    data,
  });

/** What the host publishes as `data` (`events.publish(accountId, type, data)`): any JSON object. */
export const hostEventData = v.pipe(
  v.record(v.string(), v.unknown()),
  v.description('The JSON object the host published.'),
);

/** The data of an agreement event about one signer: the agreement without images, and which signer. */
export const agreementSignerEventData = v.strictObject({
  ...agreementEventData.entries,
  signerId: v.pipe(id('ags'), v.description('The signer the event is about.')),
});

/** The answer of `POST /agreements/{agreementId}/signers/{signerId}/signing-link`. */
export const identificationCodeSent = v.strictObject({
  expiresAt: v.pipe(atomDateTime, v.description('When the code mailed stops working: 10 minutes on.')),
});

export const signingLink = v.strictObject({
  link: v.pipe(
    v.string(),
    v.url(),
    v.description(
      '`<API root>/sign#<token>`: the signing page, with the signing token in the fragment (never sent to a server by a browser).',
    ),
  ),
  expiresAt: atomDateTime,
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

/** What a signer sees through `GET /signing`, and what signing or declining answers. */
/** Another signer, as a signer's view shows them: who, and their outcome; no e-mail, no decline reason. */
const coSigner = v.strictObject({
  id: id('ags'),
  firstName: v.string(),
  lastName: v.string(),
  signedAt: v.nullable(atomDateTime),
  declinedAt: v.nullable(atomDateTime),
});

/** The company a signer is asked by (option `branding`), as pages show it. */
export const branding = v.strictObject({
  name: v.string(),
  logoUrl: v.pipe(
    v.nullable(v.string()),
    v.description('An `https:` URL, or a `data:image/…;base64,` URL; `null` without a logo.'),
  ),
  accentColor: v.pipe(v.nullable(v.pipe(v.string(), v.regex(/^#[0-9a-f]{6}$/))), v.description('`#rrggbb`.')),
  supportEmail: v.nullable(v.pipe(v.string(), v.email())),
});

export const signingView = v.strictObject({
  agreement: v.strictObject({
    ...agreementEventData.entries,
    documents: v.pipe(
      v.array(agreementDocument),
      v.maxLength(MAX_DOCUMENTS),
      v.description('Empty, as are the other signers, until the signer has identified.'),
    ),
    signers: v.pipe(
      v.array(v.union([agreementEventSigner, coSigner])),
      v.description('The signer whole; every other signer by name and outcome only.'),
    ),
  }),
  signer: v.pipe(
    agreementSigner,
    v.description('The signer, with their own signature image once they signed (`null` before).'),
  ),
  identification: v.pipe(
    v.union([
      v.strictObject({ required: v.literal(false) }),
      v.strictObject({
        required: v.literal(true),
        verified: v.literal(false),
        methods: v.pipe(
          v.array(identificationMethod),
          v.description(
            '`access-code` when the link was issued with one; else `email-code` when a notifier is configured.',
          ),
        ),
      }),
      v.strictObject({
        required: v.literal(true),
        verified: v.literal(true),
        method: identificationMethod,
        at: atomDateTime,
      }),
    ]),
    v.description(
      'Whether the signer must identify, and how; until they have, `documents` is empty and signing or declining answers `403`.',
    ),
  ),
  disclosure: v.pipe(
    v.strictObject({ version: v.string(), text: v.string() }),
    v.description(
      'The consumer disclosure (ESIGN §101(c)) shown before signing; `POST /signing/sign` takes `consent: {disclosureVersion}`.',
    ),
  ),
  documents: v.array(
    v.strictObject({
      ...agreementDocument.entries,
      link: v.pipe(v.string(), v.url(), v.description('A download link to the document, valid 5 minutes.')),
      signedLink: v.pipe(
        v.nullable(v.pipe(v.string(), v.url())),
        v.description(
          'Once the agreement is signed and the copy made, a download link to its completed copy (5 minutes); `null` before, and for a document that is not a PDF.',
        ),
      ),
    }),
  ),
  locale: v.pipe(
    v.string(),
    v.description(
      "The agreement's `locale` (BCP 47), `en` when it was made without one: the language the page speaks.",
    ),
  ),
  branding: v.pipe(
    v.nullable(branding),
    v.description('Who asks for the signature (option `branding`), shown at the top of the page; `null` without one.'),
  ),
});

/** One step of an agreement's audit trail. */
export const auditEntry = v.strictObject({
  at: atomDateTime,
  action: v.picklist(AUDIT_ACTIONS),
  actor: v.pipe(
    v.string(),
    v.description('`account:<accountId>` (the host through the API), a signer id (`ags_…`), or `system`.'),
  ),
  signerId: v.nullable(id('ags')),
  ip: v.nullable(v.string()),
  userAgent: v.nullable(v.string()),
  documents: v.array(v.strictObject({ id: id('agd'), fileHash: sha256Hex })),
  detail: v.pipe(
    v.nullable(v.string()),
    v.description(
      'A decline\'s or void\'s reason, what a correction changed; `ip`, `userAgent` and `detail` read `"[erased]"` once erased.',
    ),
  ),
  personal: v.optional(
    v.pipe(
      sha256Hex,
      v.description(
        'HMAC-SHA256 (hex) of the JSON array `[ip, userAgent, detail]`, keyed with a random key the portal keeps with the agreement until its personal data is erased (then discarded; entries after it use plain SHA-256). The hash commits to these fields through it, so it survives their erasure. Absent from entries written before the trail carried it (docs/signing.md).',
      ),
    ),
  ),
  state: v.optional(
    v.pipe(
      sha256Hex,
      v.description(
        "SHA-256 (hex) of the agreement's evidence just after this step: the JSON array `[id, name, status, signerName, signerSignatureHash, createdAt, signingOrder, expiresAt, closedAt, closedReason, [[documentId, documentName, fileSize, fileHash]…], [[signerId, personal, shouldIdentify, signatureHash, signedAt, viewedAt, declinedAt]…]]`, each signer's `personal` the keyed digest (as the entry's) of `[firstName, lastName, email, declineReason]`; before the key existed, those four stood in clear (`[signerId, firstName, lastName, email, shouldIdentify, signatureHash, signedAt, viewedAt, declinedAt, declineReason]`). Absent from entries written before the trail carried it.",
      ),
    ),
  ),
  method: v.optional(v.pipe(identificationMethod, v.description('How the signer identified (`identified`).'))),
  disclosureHash: v.optional(
    v.pipe(sha256Hex, v.description('SHA-256 (hex) of the disclosure text the signer consented to (`consented`).')),
  ),
  previousHash: sha256Hex,
  hash: v.pipe(
    sha256Hex,
    v.description(
      'SHA-256 (hex) over `previousHash`, a line break, and the JSON array `[at, action, actor, signerId, personal, [[documentId, fileHash]…]]` (for an entry without `personal`: `[at, action, actor, signerId, ip, userAgent, [[documentId, fileHash]…], detail]`), with `state` appended when the entry has one, then `{"method": …}` and `{"disclosureHash": …}` when it has them.',
    ),
  ),
});

export const auditTrail = v.strictObject({
  data: v.pipe(v.array(auditEntry), v.description('Oldest first.')),
  verified: v.pipe(
    v.boolean(),
    v.description(
      "Whether every entry links to the one before and hashes to what it says, the trail ends where the head kept with the agreement says, the last entry's `state` is the agreement as stored, and each signature image hashes to its `signatureHash`.",
    ),
  ),
  personalKey: v.pipe(
    v.nullable(v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/))),
    v.description(
      "The key (hex) of the HMAC-SHA256 digests the trail commits to personal fields with (each entry's `personal`, each signer's part of `state`): with it, anyone holding the agreement and its trail recomputes them. `null` once the agreement's personal data is erased (the key is discarded with it) and for a trail made before keys.",
    ),
  ),
});

/** The data of a `webhook.test` call: the webhook it was sent to. */
export const webhookTestData = v.strictObject({ webhookId: id('wbh') });

/** One uploaded document: a file part. valibot's `blob` stands for it; the document renders it as binary. */
const documentPart = v.pipe(v.blob(), v.metadata({ contentMediaType: 'application/octet-stream' }));

/** The one file of an upload: a file part named `file`, with a filename; its part's type is stored as the mime. */
const uploadPart = v.pipe(
  v.blob(),
  v.metadata({ contentMediaType: 'application/octet-stream' }),
  v.description(
    "The file, with a filename; 5 MiB (5,242,880 bytes) at most. Its part's Content-Type is kept as its mime.",
  ),
);

/** The `POST /files` form: the file, and the directory to put it in (the root without it), in any order. */
export const fileUploadForm = v.strictObject({
  directoryId: v.optional(
    v.pipe(id('fsd'), v.description('The directory (`fsd_…`), before or after the file part; the root without it.')),
  ),
  file: uploadPart,
});

/** The `POST /directories` body, as `directoryInput` (inputs.ts) checks it; its id check is a function, so it is restated here. */
export const directoryInput = v.object({
  name: v.pipe(v.string(), v.minLength(1), v.maxLength(255)),
  directoryId: v.nullish(v.pipe(id('fsd'), v.description('The parent directory (`fsd_…`); the root without it.'))),
});

/** The attachment upload form: the file alone. */
export const attachmentUploadForm = v.strictObject({ file: uploadPart });

/**
 * The `POST /agreements` form as one object. The reader (`agreement-form.ts`) checks it part by part
 * as the body streams in, with these same part schemas and limits.
 */
export const agreementForm = v.strictObject({
  name: displayName,
  signerName: displayName,
  signerSignatureData: signatureDataUrl,
  signers: v.pipe(
    v.array(signerInput),
    v.minLength(1),
    v.maxLength(MAX_SIGNERS),
    v.description('One part per signer holding a JSON object, or one part holding a JSON array of them.'),
  ),
  documents: v.pipe(
    v.array(documentPart),
    v.minLength(1),
    v.maxLength(MAX_DOCUMENTS),
    v.description(
      'File parts named `documents`, `documents[]`, `documents[N]` or `documents.items`, each with a filename; 5 MiB (5,242,880 bytes) in total at most.',
    ),
  ),
  signingOrder: v.optional(signingOrderInput),
  expiresAt: v.optional(expiresAtInput),
  locale: v.optional(
    v.pipe(
      localeInput,
      v.description(
        'The language the signing page, the mails to signers and the certificate speak (BCP 47: `fr`, `fr-CA`), English (`en`) when absent. English and French are complete; another language is kept and shown in English.',
      ),
    ),
  ),
  fields: v.optional(
    v.pipe(
      v.array(fieldInput),
      v.maxLength(MAX_FIELDS),
      v.description(
        "One part holding a JSON array: where each signer's values are stamped into the completed copy. `signer` and `document` are 0-based indexes into the parts as given, `page` 1-based, the box in percent of the page from its top-left corner and wholly on it. Instead, a PDF may carry text anchors `{{signature:N}}`, `{{name:N}}`, `{{date:N}}`, `{{initials:N}}` (`N` the signer's 1-based position); a PDF with neither gets a signature page appended.",
      ),
    ),
  ),
});

// Each schema's output is exactly its record type; `Equal` is false for any difference, `?` included.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Holds<T extends true> = T;
/** @public a check at compile time: each schema's output is exactly its record type. */
export type SchemaMatchesRecords = [
  Holds<Equal<v.InferOutput<typeof webhook>, Webhook>>,
  Holds<Equal<v.InferOutput<typeof webhookHealth>, WebhookHealth>>,
  Holds<Equal<v.InferOutput<typeof webhookStats>, WebhookStats>>,
  Holds<Equal<v.InferOutput<typeof delivery>, Delivery>>,
  Holds<Equal<v.InferOutput<typeof deliveryAttempt>, DeliveryAttempt>>,
  Holds<Equal<v.InferOutput<typeof fileEntry>, FileEntry>>,
  Holds<Equal<v.InferOutput<typeof agreement>, Agreement>>,
  Holds<Equal<v.InferOutput<typeof agreementSigner>, AgreementSigner>>,
  Holds<Equal<v.InferOutput<typeof agreementDocument>, AgreementDocument>>,
  Holds<Equal<v.InferOutput<typeof agreementEventData>, AgreementEventData>>,
  Holds<Equal<v.InferOutput<typeof downloadLink>, DownloadLink>>,
  Holds<Equal<v.InferOutput<typeof verification>, Verification>>,
  Holds<Equal<v.InferOutput<typeof attachment>, Attachment>>,
  Holds<Equal<v.InferOutput<typeof portalSession>, PortalSessionLink>>,
];
