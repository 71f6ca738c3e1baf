/**
 * The records the portal keeps. Every stored record carries the `accountId` it belongs to; the
 * public shapes (what the API and the programmatic methods return) leave it out.
 * Date-times are ATOM strings (see `time.ts`), so comparing two of them as strings compares times.
 * The types of what the API answers are derived from its valibot shapes (`shapes/answers.ts`), which
 * the OpenAPI document is generated from: a field is added there, once, with its documentation.
 */

import type * as v from 'valibot';
import type * as answers from './shapes/answers.js';
import { ERASED, type EventFilter, IDENTIFICATION_METHODS, type IdentificationMethod } from './shapes/values.js';

export { ERASED, type EventFilter, IDENTIFICATION_METHODS, type IdentificationMethod };

/** A webhook as the API answers: where an event type's calls go, and how they are signed. */
export interface Webhook extends v.InferOutput<typeof answers.webhook> {}
export interface WebhookRecord extends Omit<Webhook, 'secret' | 'publicKey' | 'signatureScheme'> {
  accountId: string;
  /** What signs its calls: a `whsec_` secret, or a `whsk_` ed25519 private key (`shared/webhook-keys.ts`). */
  secret: string;
  /**
   * The secret a rotation replaced, which still signs every call beside `secret` until
   * `previousSecretUntil` (ATOM, exclusive); both absent when the webhook was never rotated or its
   * last rotation had no grace. Never shown by the API: the receiver holds it already.
   */
  previousSecret?: string;
  previousSecretUntil?: string;
}

/** What a secret rotation stores: the new secret, and until when the one it replaces still signs (`null`: not at all). */
export interface SecretRotation {
  secret: string;
  previousSecretUntil: string | null;
}

/**
 * `webhook` after `rotation`: the new secret, and the current one kept as the previous secret
 * while the grace lasts (a previous secret of an earlier rotation is dropped). A new record.
 */
export function withRotation(webhook: WebhookRecord, rotation: SecretRotation): WebhookRecord {
  const { previousSecret: _dropped, previousSecretUntil: _until, ...rest } = webhook;
  return rotation.previousSecretUntil === null
    ? { ...rest, secret: rotation.secret }
    : {
        ...rest,
        secret: rotation.secret,
        previousSecret: webhook.secret,
        previousSecretUntil: rotation.previousSecretUntil,
      };
}

/** Why a webhook was disabled: a `410 Gone` answer, calls failing past the thresholds, or by hand. */
export type WebhookDisabledReason = v.InferOutput<typeof answers.webhookDisabledReason>;
/** A reason the delivery worker disables a webhook for; `manual` is the host's or the tenant's doing. */
export type AutomaticDisableReason = Exclude<WebhookDisabledReason, 'manual'>;

/** How a webhook's calls are going, as `GET /webhooks/{id}/health` answers. Date-times ATOM or `null`. */
export interface WebhookHealth extends v.InferOutput<typeof answers.webhookHealth> {}
/**
 * A webhook's health as stored, under the webhook's id: a record apart from the webhook, written
 * with each recorded attempt. A webhook no attempt has reached yet has none (it is healthy).
 */
export interface WebhookHealthRecord {
  /** The webhook's id. */
  id: string;
  accountId: string;
  consecutiveFailures: number;
  failingSince: string | null;
  lastSuccessAt: string | null;
  lastAttemptAt: string | null;
  /** Set while the webhook is disabled: its deliveries that fall due are cancelled, not sent. */
  disabledAt: string | null;
  disabledReason: WebhookDisabledReason | null;
  /**
   * Until when the receiver asked to be left alone (`Retry-After` on a `429` or `503`), or a worker
   * pauses it while it seems down (`rules/in-flight.ts`): its deliveries that fall due before then
   * wait until then. `null`: never held; a time past holds nothing.
   */
  heldUntil: string | null;
  /** The calls in flight a delivery worker last limited it to (`rules/in-flight.ts`); `null`: none below its account's share. */
  inFlightLimit: number | null;
}

export type FileEntryType = v.InferOutput<typeof answers.fileEntryType>;

/** A file or a directory of a file share, as the API lists it. */
export interface FileEntry extends v.InferOutput<typeof answers.fileEntry> {}
export interface FileEntryRecord extends FileEntry {
  accountId: string;
  /** The directory holding the entry; `null` for the account's root. */
  directoryId: string | null;
}

/** One key for the entries of a directory (`null`: the account's root), for a store's index of them. */
export const directoryKey = (accountId: string, directoryId: string | null): string =>
  `${accountId}\u0000${directoryId ?? ''}`;

export type AgreementStatus = v.InferOutput<typeof answers.agreementStatus>;

/** A signer of an agreement, as the API answers. */
export interface AgreementSigner extends v.InferOutput<typeof answers.agreementSigner> {}

/** A signer's identification as the host sees it: `method` and `at` once verified with the current link, else `null`. */
export interface SignerIdentification extends v.InferOutput<typeof answers.signerIdentification> {}

/**
 * What a store keeps of a signer's identification (`domain/signer-identity.ts`): never a code. The
 * e-mail code is derived from the signing keys and `code.id` when it is sent and checked; the access
 * code is kept as an scrypt hash.
 */
export interface SignerIdentityRecord {
  /** The link these hold for: a new link starts with no tries, no code and not verified. */
  linkId: string;
  /** `scrypt$<salt>$<hash>` (base64url) of the link's access code, or `null`. */
  accessCode: string | null;
  /** Wrong codes given with this link. */
  tries: number;
  /** The link was revoked by its fifth wrong code. */
  locked: boolean;
  /** The e-mail code outstanding: its id (the code is derived from it) and when it stops working. */
  code: { id: string; expiresAt: string } | null;
  verified: { method: IdentificationMethod; at: string } | null;
  /** When e-mail codes were sent in the last hour (any link): at most five. */
  sends: string[];
}

/** What a mail to a signer is for (`Notifier`). */
export type MailKind =
  | 'signing-invitation'
  | 'identification-code'
  | 'signing-reminder'
  | 'agreement-completed'
  | 'agreement-voided';

/**
 * A mail to a signer not yet sent, kept on its agreement (so it is stored in the step that makes it
 * and survives a restart); what it says is made when it is sent. `link` names the signing link it
 * carries (the token is minted from it), `codeId` the identification code.
 */
export interface PendingMail {
  id: string;
  kind: MailKind;
  signerId: string;
  link: { id: string; expires: number } | null;
  codeId: string | null;
  /** The API root the link is made under: the request's, or `publicUrl` for a reminder. */
  baseUrl: string | null;
  /** Attempts made; the next waits `webhooks.retrySchedule[attempts - 1]` seconds. */
  attempts: number;
  /** When it is due: its first attempt, its retry, or the end of an attempt's lease. */
  nextAttemptAt: string;
  lastError: string | null;
}

/** `parallel`: every signer may sign at any time; `sequential`: each only after those before. */
export type SigningOrder = v.InferOutput<typeof answers.signingOrder>;
/** Why an agreement closed unsigned. */
export type ClosedReason = v.InferOutput<typeof answers.closedReason>;

/** A document of an agreement, as the API answers. */
export interface AgreementDocument extends v.InferOutput<typeof answers.agreementDocument> {}

/** What a field shows once its signer has signed (DESIGN §12): the signature image, the name, the date signed, the initials. */
export type FieldType = 'signature' | 'name' | 'date' | 'initials';

/**
 * A place on a PDF document's page where one signer's value is stamped into the completed copy:
 * `page` 1-based, the box in percent of the page from its top-left corner.
 */
export interface AgreementField {
  signerId: string;
  page: number;
  x: number;
  y: number;
  width: number;
  height: number;
  type: FieldType;
}

/** A document as stored: with the blob key of its completed copy and the fields placed on it. */
export interface AgreementDocumentRecord extends AgreementDocument {
  /** Where the completed copy's bytes are kept (`agx_…`); `null` until it is made. */
  signedFileKey: string | null;
  /** The fields the `fields` part placed on this document (text anchors are found when the copy is made). */
  fields: AgreementField[];
}

/** The public shape of a stored document: its fields in the contract's order, never the copy's key. */
export const documentOf = (document: AgreementDocument): AgreementDocument => ({
  id: document.id,
  documentName: document.documentName,
  fileSize: document.fileSize,
  fileHash: document.fileHash,
  signedFileHash: document.signedFileHash ?? null,
});

/**
 * The making of an agreement's completed copies, owed from the moment it is signed until they are
 * kept (`domain/completed-copies.ts`): claimed with a lease, retried on the retry schedule.
 */
export interface CompletionRecord {
  attempts: number;
  /** When it is due: first at once, then its retry, or the end of an attempt's lease. */
  nextAttemptAt: string;
  lastError: string | null;
}

/** An agreement, as `GET /agreements/{agreementId}` answers it: signature images included. */
export interface Agreement extends v.InferOutput<typeof answers.agreement> {}
/** A signer as an event carries it: no signature image (its hash and time are kept). */
export type AgreementEventSigner = v.InferOutput<typeof answers.agreementEventSigner>;
/**
 * The agreement as `agreement-created` and `agreement-signed` carry it: without the signature
 * images (`signerSignature`, each signer's `signature`), hashes kept, so that a call stays a few
 * KiB; `GET /agreements/{agreementId}` answers the whole agreement.
 */
export interface AgreementEventData extends v.InferOutput<typeof answers.agreementEventData> {}

/** A signer as stored: with the id of the one signing link that still works for them. */
export interface AgreementSignerRecord extends Omit<AgreementSigner, 'identification'> {
  /** The id the signer's newest signing link carries; an older link names another and is refused. `null`: none issued. */
  signingLinkId: string | null;
  /** The signer's identification state; `null` until a link that needs one is issued. */
  identity: SignerIdentityRecord | null;
}

/** What an audit entry records. */
export type AuditAction =
  | 'created'
  | 'link-issued'
  | 'viewed'
  | 'signed'
  | 'declined'
  | 'expired'
  | 'reminder'
  | 'identification-code-sent'
  | 'identified'
  | 'identification-failed'
  | 'identification-locked'
  | 'consented'
  | 'voided'
  | 'signer-corrected'
  | 'erased';
export const AUDIT_ACTIONS: readonly AuditAction[] = [
  'created',
  'link-issued',
  'viewed',
  'signed',
  'declined',
  'expired',
  'reminder',
  'identification-code-sent',
  'identified',
  'identification-failed',
  'identification-locked',
  'consented',
  'voided',
  'signer-corrected',
  'erased',
];

/**
 * One step of an agreement's audit trail. `hash` is the SHA-256 (hex) over `previousHash`, a line
 * break and the entry's other fields as JSON in this order (see `domain/audit-trail.ts`); the first
 * entry's `previousHash` is 64 zeros. Append-only: stores add entries, never change one.
 */
export interface AuditEntry {
  at: string;
  action: AuditAction;
  /** `account:<accountId>` for what the host did through the API, the signer's id, or `system` (expiry, reminders). */
  actor: string;
  /** The signer the step concerns, or `null`. */
  signerId: string | null;
  ip: string | null;
  userAgent: string | null;
  /** The documents the step concerned, with their SHA-256 at that moment. */
  documents: { id: string; fileHash: string }[];
  /** A decline's or void's reason, what a correction changed, or `null`. */
  detail: string | null;
  /**
   * HMAC-SHA256 (hex), keyed with the agreement's `personalKey`, of `[ip, userAgent, detail]` as
   * JSON: the hash commits to those fields through it, so the chain still holds once they are
   * erased. Absent from entries written before the trail carried it (their hash covers the fields).
   */
  personal?: string;
  /**
   * SHA-256 (hex) of the agreement's evidence just after this step (`domain/audit-trail.ts`,
   * `stateDigest`): the chain commits to what was signed, not only to its own entries. Absent from
   * entries written before the trail carried it.
   */
  state?: string;
  /** An `identified` entry's method. */
  method?: IdentificationMethod;
  /** A `consented` entry's SHA-256 (hex) of the disclosure text the signer was shown. */
  disclosureHash?: string;
  previousHash: string;
  hash: string;
}

/** The trail's last hash and its length, kept on the agreement in the same atomic update as the entries. */
export interface AuditHead {
  hash: string;
  length: number;
}

/** What a store's `updateAgreement` rejects with when a change would rewrite its trail. */
export const TRAIL_APPEND_ONLY =
  'updateAgreement: the audit trail is append-only; change must keep every stored entry as it is';

/**
 * Whether `next` is `current` with entries appended, none changed, removed or reordered: stores
 * refuse any other change of a trail.
 */
export function extendsTrail(current: readonly AuditEntry[], next: readonly AuditEntry[]): boolean {
  if (next.length < current.length) return false;
  for (let i = 0; i < current.length; i++) if (JSON.stringify(current[i]) !== JSON.stringify(next[i])) return false;
  return true;
}

/** `value` erased: `ERASED`, unless it is `null` (nothing was kept). */
export const erasedValue = <T extends string | null>(value: T) => (value === null ? null : ERASED);

/** An audit entry erased: its `ip`, `userAgent` and `detail` that are not `null` become `ERASED`. */
export const erasedEntry = (entry: AuditEntry): AuditEntry => ({
  ...entry,
  ip: erasedValue(entry.ip),
  userAgent: erasedValue(entry.userAgent),
  detail: erasedValue(entry.detail),
});

/**
 * Whether `next` is `current` with personal fields erased and entries appended: each stored entry
 * as it was, or as `erasedEntry` makes it. What a store's `eraseAgreement` allows of a trail, and
 * nothing else.
 */
export function redactsTrail(current: readonly AuditEntry[], next: readonly AuditEntry[]): boolean {
  if (next.length < current.length) return false;
  for (let i = 0; i < current.length; i++) {
    const was = current[i]!;
    const now = JSON.stringify(next[i]);
    if (JSON.stringify(was) !== now && JSON.stringify(erasedEntry(was)) !== now) return false;
  }
  return true;
}

/** The bytes of each document are in the `BlobStore` under the document's id. */
export interface AgreementRecord extends Omit<Agreement, 'signers' | 'documents'> {
  accountId: string;
  signers: AgreementSignerRecord[];
  documents: AgreementDocumentRecord[];
  /** The completed copies still to make; `null` when none are owed (open, closed unsigned, or made). */
  completion: CompletionRecord | null;
  /** The audit trail, oldest first: stores append to it, never change an entry. */
  audit: AuditEntry[];
  /** The trail's head as of the last step; `null` for an agreement whose trail predates it. */
  auditHead: AuditHead | null;
  /**
   * When the next reminder round is due (`agreements.reminderIntervalMs`); `null`: none scheduled
   * (made while reminders were off: the tick schedules one once they are on); 9999-12-31 once every
   * round is made (`remind` in `domain/signing-rules.ts`).
   */
  nextReminderAt: string | null;
  /** Mail to its signers not yet sent, oldest first (`domain/signer-mail.ts`). */
  mail: PendingMail[];
  /**
   * The random key (hex) the trail's entries and evidence digest commit to personal fields with
   * (`domain/audit-trail.ts`); `ERASED` once they are erased (the key goes with them, so no guess
   * at an erased value can be checked); absent or `null` for an agreement made before it existed.
   */
  personalKey?: string | null;
  /** The signers' language, a BCP 47 tag (`POST /agreements`'s `locale`); absent: English. */
  locale?: string;
}

/** Whether the agreement is still open: not signed, not closed (declined, expired, voided). */
export const isOpen = (record: Pick<AgreementRecord, 'status' | 'closedAt'>): boolean =>
  record.status === 'sent' && record.closedAt === null;

/** When the agreement's completed copies are due to be made, or `null` when none are owed: what a store indexes to find it. */
export const completionDueAt = (record: Pick<AgreementRecord, 'completion'>): string | null =>
  record.completion?.nextAttemptAt ?? null;

/** When the agreement's next mail is due, or `null` when it owes none: what a store indexes to find it. */
export function mailDueAt(record: Pick<AgreementRecord, 'mail'>): string | null {
  let earliest: string | null = null;
  for (const mail of record.mail)
    if (earliest === null || Date.parse(mail.nextAttemptAt) < Date.parse(earliest)) earliest = mail.nextAttemptAt;
  return earliest;
}

/** An agreement as a list holds it: without the signature images (`AgreementEventData`), with its account. */
export interface AgreementSummaryRecord extends AgreementEventData {
  accountId: string;
}

/**
 * The agreement without its signature images (`signerSignature`, each signer's `signature`), hashes
 * kept: what agreement events carry and lists hold. Field by field, so that a summary a store read
 * (without images already) and a whole agreement give the same JSON.
 */
export function withoutImages(agreement: Agreement | AgreementEventData | AgreementRecord): AgreementEventData {
  return {
    id: agreement.id,
    name: agreement.name,
    status: agreement.status,
    signerName: agreement.signerName,
    signerSignatureHash: agreement.signerSignatureHash,
    documents: agreement.documents.map(documentOf),
    createdAt: agreement.createdAt,
    signingOrder: agreement.signingOrder,
    expiresAt: agreement.expiresAt,
    closedAt: agreement.closedAt,
    closedReason: agreement.closedReason,
    signers: agreement.signers.map((signer) => ({
      id: signer.id,
      firstName: signer.firstName,
      lastName: signer.lastName,
      email: signer.email,
      shouldIdentify: signer.shouldIdentify,
      signatureHash: signer.signatureHash,
      signedAt: signer.signedAt,
      viewedAt: signer.viewedAt,
      declinedAt: signer.declinedAt,
      declineReason: signer.declineReason,
      identification: 'identity' in signer ? identificationOf(signer) : { ...signer.identification },
    })),
  };
}

/**
 * A stored signer's identification as the host sees it: required when `shouldIdentify` or their
 * current link carries an access code; verified, with how and when, once they identified with it.
 */
export function identificationOf(
  signer: Pick<AgreementSignerRecord, 'shouldIdentify' | 'signingLinkId' | 'identity'>,
): SignerIdentification {
  const identity = signer.identity !== null && signer.identity.linkId === signer.signingLinkId ? signer.identity : null;
  const verified = identity?.verified ?? null;
  return {
    required: signer.shouldIdentify || (identity?.accessCode ?? null) !== null,
    verified: verified !== null,
    method: verified?.method ?? null,
    at: verified?.at ?? null,
  };
}

/**
 * An agreement as stored before signing existed, read as today's: parallel, no expiry, open, no
 * signer has a link or a step, no trail. Stores that keep records as written (the fs log) read
 * old ones through this; the SQL migration gives old rows the same defaults.
 */
export function withSigningDefaults(record: AgreementRecord): AgreementRecord {
  record.signingOrder ??= 'parallel';
  record.expiresAt ??= null;
  record.closedAt ??= null;
  record.closedReason ??= null;
  record.audit ??= [];
  record.auditHead ??= null;
  record.nextReminderAt ??= null;
  record.mail ??= [];
  record.completion ??= null;
  for (const document of record.documents) {
    document.signedFileHash ??= null;
    document.signedFileKey ??= null;
    document.fields ??= [];
  }
  for (const signer of record.signers) {
    signer.identity ??= null;
    signer.viewedAt ??= null;
    signer.declinedAt ??= null;
    signer.declineReason ??= null;
    signer.signingLinkId ??= null;
  }
  return record;
}

/** A stored agreement as a list holds it. */
export const agreementSummary = (record: AgreementRecord): AgreementSummaryRecord => ({
  ...withoutImages(record),
  accountId: record.accountId,
});

/** One page of a newest-first list: up to `limit` records, after the one whose id is `after` (from the newest without it). */
export interface PageRequest {
  limit: number;
  after?: string;
}

/** A file attached to a ticket message. */
export interface Attachment extends v.InferOutput<typeof answers.attachment> {}
/** The bytes are in the `BlobStore` under the attachment's id. */
export interface AttachmentRecord extends Attachment {
  accountId: string;
}

/** A link that serves an attachment without Authorization until `expiresAt`. */
export interface DownloadLink extends v.InferOutput<typeof answers.downloadLink> {}

export interface PortalEvent {
  id: string;
  type: string;
  createdAt: string;
  data: unknown;
  /**
   * Deliveries of one webhook that share an ordering key are called one at a time, in publish
   * order; absent: none (the library's agreement events carry the agreement's id).
   */
  orderingKey?: string;
}
export interface EventRecord extends PortalEvent {
  accountId: string;
}

export type DeliveryStatus = v.InferOutput<typeof answers.deliveryStatus>;

/** One call of a delivery, as its log keeps it. */
export interface DeliveryAttempt extends v.InferOutput<typeof answers.deliveryAttempt> {}

/** One event's delivery to one webhook, as its log lists it. */
export interface Delivery extends v.InferOutput<typeof answers.delivery> {}
export interface DeliveryRecord extends Delivery {
  accountId: string;
  /** Who holds the delivery while a call is in flight, and until when; `null` when free. */
  leaseOwner: string | null;
  leaseUntil: string | null;
}

/**
 * Where a page of a delivery log starts: just past the delivery made at `createdAt` that the store
 * knows by `key` (its id, or its place in a table). Given to clients as an opaque cursor.
 */
export interface DeliveryCursor {
  createdAt: string;
  key: string;
}

/** Which deliveries of a webhook a page lists, newest first. */
export interface DeliveryQuery {
  limit: number;
  /** The last delivery of the page before; from the newest without it. */
  after?: DeliveryCursor;
  status?: DeliveryStatus;
  eventType?: string;
  /** The deliveries of this one event (a store finds them by the event, not by walking the log). */
  eventId?: string;
  /** Made at or after this time (ATOM). */
  since?: string;
  /** Made before this time (ATOM). */
  until?: string;
}

/** A page of a delivery log, and where the next one starts (`null`: this is the last). */
export interface DeliveryPage {
  deliveries: DeliveryRecord[];
  next: DeliveryCursor | null;
}

/** A delivery a worker has leased, with what it needs to make the call. */
export interface ClaimedDelivery {
  delivery: DeliveryRecord;
  event: EventRecord;
  webhook: WebhookRecord;
}

/** Strips the account from a stored record, giving the shape the API returns. */
export function publicShape<T extends { accountId: string }>(record: T): Omit<T, 'accountId'> {
  const { accountId: _accountId, ...rest } = record;
  return rest;
}

/**
 * The first answer to a request made with an `Idempotency-Key`, kept to be given again: its
 * status, its body exactly as sent (JSON text), and its `Location`.
 */
export interface IdempotentAnswer {
  status: number;
  body: string;
  location: string | null;
}

/** What a portal session may reach: the API's webhooks, agreements or files. */
export type PortalSessionScope = 'webhooks' | 'agreements' | 'files';

/**
 * A portal session: a short-lived credential the host hands to one of its customers, which opens
 * the portal page (and the API) for that account within its scopes. Its token is `<id>.<secret>`;
 * only the secret's SHA-256 is kept.
 */
export interface PortalSessionRecord {
  /** `pts_` and 22 random characters. */
  id: string;
  accountId: string;
  /** Hex SHA-256 of the token's secret part. */
  secretHash: string;
  scopes: PortalSessionScope[];
  /** When set, the session may read only. */
  readOnly: boolean;
  createdAt: string;
  expiresAt: string;
  /** When it was revoked, or `null`. */
  revokedAt: string | null;
}

/**
 * What an account's `Idempotency-Key` holds: a claim while its first request runs (`pending`), or
 * that request's answer once it created its record (`completed`). `expiresAt` ends either: a claim's
 * lease (so the claim of a process that died frees the key), or a completed answer's 24 hours.
 */
export interface IdempotencyRecord {
  accountId: string;
  key: string;
  status: 'pending' | 'completed';
  /** Who holds the claim: a random token of the request that made it. */
  token: string;
  /** Hash of what the request asked for; `null` while a claim does not know it yet (a form still arriving). */
  fingerprint: string | null;
  /** The answer to give again; `null` while pending. */
  answer: IdempotentAnswer | null;
  createdAt: string;
  expiresAt: string;
}

/** Handed to the insert that creates a record: the claim it completes, and the answer to keep, stored in the same atomic step. */
export interface IdempotencyCompletion {
  key: string;
  token: string;
  fingerprint: string;
  answer: IdempotentAnswer;
  /** When the answer stops being replayed (24 hours on). */
  expiresAt: string;
}

/** One hour of a webhook's calls, as a store keeps it (`Storage.callStats`, `rules/call-stats.ts`). */
export interface CallStatsHour {
  /** The hour's start (ATOM, `…T14:00:00+00:00`). */
  hour: string;
  /** Calls answered 2xx. */
  succeeded: number;
  /** Calls answered with another status. */
  failed: number;
  /** Calls with no answer: a timeout, a refused address, a network error. */
  errors: number;
  /** `latency[i]`: calls that took up to `LATENCY_BOUNDS_MS[i]` ms (and more than the bound before); the last, longer. */
  latency: number[];
}
