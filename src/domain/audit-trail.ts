import { createHash, createHmac, randomBytes } from 'node:crypto';
import {
  type AgreementRecord,
  type AuditAction,
  type AuditEntry,
  ERASED,
  type EventRecord,
  type IdentificationMethod,
} from '../records.js';
import { atom } from '../shared/time.js';

/** The `previousHash` of a trail's first entry. */
const GENESIS_HASH = '0'.repeat(64);

/** An entry before it is chained: what a step records. */
export type AuditStep = Omit<AuditEntry, 'previousHash' | 'hash'>;

export const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** A signer's `signatureHash`: SHA-256 (hex) of their signature's data-URL. */
export const signatureHash = (dataUrl: string) => sha256Hex(dataUrl);

/** The agreement's `signerSignatureHash`: SHA-256 (hex) of the sender's data-URL, a line break and `createdAt`. */
export const senderSignatureHash = (dataUrl: string, createdAt: string) => sha256Hex(`${dataUrl}\n${createdAt}`);

/** A new agreement's `personalKey`: 32 random bytes, hex. */
export const newPersonalKey = () => randomBytes(32).toString('hex');

/** The key an agreement's trail commits to personal fields with; `null` for a trail made before it had one. */
type PersonalKey = string | null;
const keyOf = (record: Pick<AgreementRecord, 'personalKey'>): PersonalKey => record.personalKey ?? null;

/**
 * What a trail commits to personal values through: HMAC-SHA256 (hex) of their JSON, keyed with the
 * agreement's `personalKey`; once they are erased (the key with them), SHA-256 of the markers' JSON.
 * Keyed, so that a digest left after erasure cannot confirm a guess at what it hid (an e-mail, an IP).
 */
function personalDigest(key: string, values: readonly unknown[]): string {
  const json = JSON.stringify(values);
  return key === ERASED ? sha256Hex(json) : createHmac('sha256', Buffer.from(key, 'hex')).update(json).digest('hex');
}

const entryPersonal = (key: string, step: Pick<AuditStep, 'ip' | 'userAgent' | 'detail'>) =>
  personalDigest(key, [step.ip, step.userAgent, step.detail]);

/**
 * The hash of an entry: SHA-256 (hex) over the previous entry's hash, a line break, and the entry's
 * fields as JSON in a fixed order: `at, action, actor, signerId, personal, documents` (each document
 * as `[id, fileHash]`), then `state` when the entry has one, then `{method}` and `{disclosureHash}`
 * when it has them. An entry written before `personal` existed has `ip, userAgent, documents,
 * detail` where `personal, documents` stand. Anyone holding the trail can recompute it
 * (docs/signing.md).
 */
function auditHash(previousHash: string, step: AuditStep): string {
  const documents = step.documents.map((document) => [document.id, document.fileHash]);
  const fields: unknown[] =
    step.personal === undefined
      ? [step.at, step.action, step.actor, step.signerId, step.ip, step.userAgent, documents, step.detail]
      : [step.at, step.action, step.actor, step.signerId, step.personal, documents];
  if (step.state !== undefined) fields.push(step.state);
  if (step.method !== undefined) fields.push({ method: step.method });
  if (step.disclosureHash !== undefined) fields.push({ disclosureHash: step.disclosureHash });
  return sha256Hex(`${previousHash}\n${JSON.stringify(fields)}`);
}

/**
 * SHA-256 (hex) of what an agreement's evidence is: its name, sender, the sender's signature hash,
 * dates, order and outcome, each document's id, name, size and hash, and each signer's identity,
 * signature hash and steps, as JSON in a fixed order. A signer's names, e-mail and decline reason
 * enter through `personalDigest` (in clear for an agreement made before its `personalKey`). What a
 * store keeps only to work (signing link ids, the next reminder) is left out.
 */
function stateDigest(record: AgreementRecord): string {
  const key = keyOf(record);
  return sha256Hex(
    JSON.stringify([
      record.id,
      record.name,
      record.status,
      record.signerName,
      record.signerSignatureHash,
      record.createdAt,
      record.signingOrder,
      record.expiresAt,
      record.closedAt,
      record.closedReason,
      record.documents.map((document) => [document.id, document.documentName, document.fileSize, document.fileHash]),
      record.signers.map((signer) => {
        const personal = [signer.firstName, signer.lastName, signer.email];
        const steps = [signer.signatureHash, signer.signedAt, signer.viewedAt, signer.declinedAt];
        return key === null
          ? [signer.id, ...personal, signer.shouldIdentify, ...steps, signer.declineReason]
          : [signer.id, personalDigest(key, [...personal, signer.declineReason]), signer.shouldIdentify, ...steps];
      }),
    ]),
  );
}

/** `trail` with `step` appended, chained to the entry before, committing to its personal fields through `key` when there is one. */
function appendAudit(trail: readonly AuditEntry[], key: PersonalKey, step: AuditStep): AuditEntry[] {
  const previousHash = trail.at(-1)?.hash ?? GENESIS_HASH;
  const chained = key === null ? step : { ...step, personal: entryPersonal(key, step) };
  return [...trail, { ...chained, previousHash, hash: auditHash(previousHash, chained) }];
}

/**
 * `record` after one step: the entry, committing to the record's evidence as it now stands,
 * appended to its trail, and the trail's new head kept on the record, so the one atomic update
 * that stores the step stores both.
 */
export function withStep(record: AgreementRecord, step: Omit<AuditStep, 'state'>): AgreementRecord {
  const audit = appendAudit(record.audit, keyOf(record), { ...step, state: stateDigest(record) });
  return { ...record, audit, auditHead: { hash: audit.at(-1)!.hash, length: audit.length } };
}

/**
 * Whether every entry links to the one before and hashes to what it says: an edited, removed or
 * reordered entry breaks it. While the agreement holds its key, each entry's personal fields must
 * match their digest. Once erased, an entry written before `personal` existed, its fields erased,
 * can only be held to its link: its hash covered what is gone (docs/signing.md, Erasure).
 */
function chainHolds(trail: readonly AuditEntry[], key: PersonalKey): boolean {
  let previousHash = GENESIS_HASH;
  for (const entry of trail) {
    if (entry.previousHash !== previousHash) return false;
    const { hash, previousHash: _previous, ...step } = entry;
    const linkOnly = key === ERASED && step.personal === undefined && wasErased(step);
    if (!linkOnly && auditHash(previousHash, step) !== hash) return false;
    if (key !== null && key !== ERASED && step.personal !== entryPersonal(key, step)) return false;
    previousHash = hash;
  }
  return true;
}

const wasErased = (step: Pick<AuditStep, 'ip' | 'userAgent' | 'detail'>) =>
  step.ip === ERASED || step.userAgent === ERASED || step.detail === ERASED;

/**
 * Whether the trail vouches for the agreement as stored: the chain holds; it ends where the head
 * kept on the agreement says (no entry removed from its end); its last entry's `state` is the
 * digest of the agreement's evidence now (no name, e-mail, document hash or outcome changed after
 * it); and each signature image, and the sender's, hashes to the hash that evidence holds. A trail
 * written before heads and states existed is held to its chain alone until its next step.
 */
export function verifyTrail(record: AgreementRecord): boolean {
  const { audit, auditHead } = record;
  if (!chainHolds(audit, keyOf(record))) return false;
  if (auditHead !== null && (auditHead.length !== audit.length || auditHead.hash !== audit.at(-1)?.hash)) return false;
  const last = audit.at(-1);
  if (last?.state !== undefined && last.state !== stateDigest(record)) return false;
  if (auditHead === null) return true;
  if (record.signerSignatureHash !== senderSignatureHash(record.signerSignature, record.createdAt)) return false;
  return record.signers.every(
    (signer) => signer.signature === null || signer.signatureHash === signatureHash(signer.signature),
  );
}

/** Where a step came from, as the audit trail records it. */
export interface ClientInfo {
  ip: string | null;
  userAgent: string | null;
}
export const NO_CLIENT: ClientInfo = { ip: null, userAgent: null };

/** What a step of the signing rules makes of an agreement: the record to store and the events to store with it. */
export interface Step {
  agreement: AgreementRecord;
  events: EventRecord[];
}

/** Who took a step, and what its entry records beside the time and action. */
export interface StepBy {
  actor: string;
  signerId?: string | null;
  client?: ClientInfo;
  detail?: string | null;
  withDocuments?: boolean;
  method?: IdentificationMethod;
  disclosureHash?: string;
}

/** `record` with one audit entry more. */
export function audited(record: AgreementRecord, now: Date, action: AuditAction, who: StepBy): AgreementRecord {
  const client = who.client ?? NO_CLIENT;
  return withStep(record, {
    at: atom(now),
    action,
    actor: who.actor,
    signerId: who.signerId ?? null,
    ip: client.ip,
    userAgent: client.userAgent,
    documents:
      who.withDocuments === false
        ? []
        : record.documents.map((document) => ({ id: document.id, fileHash: document.fileHash })),
    detail: who.detail ?? null,
    ...(who.method === undefined ? {} : { method: who.method }),
    ...(who.disclosureHash === undefined ? {} : { disclosureHash: who.disclosureHash }),
  });
}
