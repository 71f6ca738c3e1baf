import * as v from 'valibot';
import {
  MAX_DOCUMENTS,
  MAX_FIELDS,
  expiresAtInput,
  localeInput,
  fieldInput,
  signerInput,
  signingOrderInput,
} from '../domain/inputs.js';
import { AUDIT_ACTIONS } from '../records.js';
import {
  agreementDocument,
  agreementEventData,
  agreementEventSigner,
  agreementSigner,
  delivery,
  fileEntry,
  identificationMethod,
  webhook,
} from '../shapes/answers.js';
import { atomDateTime, count, displayName, id, sha256Hex, signatureDataUrl, MAX_SIGNERS } from '../shapes/values.js';

/**
 * The shapes of the OpenAPI document: the answers' (`shapes/answers.ts`, which the record types are
 * derived from), the lists and results made of them, and the forms the routes read. Objects are
 * strict: in the document an undeclared field is an error, so a response cannot drift.
 */
export * from '../shapes/answers.js';

export const errorBody = v.strictObject({
  message: v.pipe(v.string(), v.minLength(1), v.description('One sentence naming what was wrong.')),
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
