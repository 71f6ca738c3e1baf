import { createHash } from 'node:crypto';
import type { AgreementRecord, AuditAction, AuditEntry, EventRecord, IdentificationMethod } from '../records.js';
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

/**
 * The hash of an entry: SHA-256 (hex) over the previous entry's hash, a line break, and the entry's
 * fields as JSON in a fixed order (`at, action, actor, signerId, ip, userAgent, documents, detail`,
 * each document as `{id, fileHash}`, then `state` when the entry has one, then `{method}` and
 * `{disclosureHash}` when it has them). Anyone holding the trail
 * can recompute it (docs/signing.md).
 */
function auditHash(previousHash: string, step: AuditStep): string {
  const fields: unknown[] = [
    step.at,
    step.action,
    step.actor,
    step.signerId,
    step.ip,
    step.userAgent,
    step.documents.map((document) => [document.id, document.fileHash]),
    step.detail,
  ];
  if (step.state !== undefined) fields.push(step.state);
  if (step.method !== undefined) fields.push({ method: step.method });
  if (step.disclosureHash !== undefined) fields.push({ disclosureHash: step.disclosureHash });
  return sha256Hex(`${previousHash}\n${JSON.stringify(fields)}`);
}

/**
 * SHA-256 (hex) of what an agreement's evidence is: its name, sender, the sender's signature hash,
 * dates, order and outcome, each document's id, name, size and hash, and each signer's identity,
 * signature hash and steps, as JSON in a fixed order. What a store keeps only to work (signing
 * link ids, the next reminder) is left out.
 */
function stateDigest(record: AgreementRecord): string {
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
      record.signers.map((signer) => [
        signer.id,
        signer.firstName,
        signer.lastName,
        signer.email,
        signer.shouldIdentify,
        signer.signatureHash,
        signer.signedAt,
        signer.viewedAt,
        signer.declinedAt,
        signer.declineReason,
      ]),
    ]),
  );
}

/** `trail` with `steps` appended, each chained to the one before. */
function appendAudit(trail: readonly AuditEntry[], ...steps: AuditStep[]): AuditEntry[] {
  const out = [...trail];
  for (const step of steps) {
    const previousHash = out.at(-1)?.hash ?? GENESIS_HASH;
    out.push({ ...step, previousHash, hash: auditHash(previousHash, step) });
  }
  return out;
}

/**
 * `record` after one step: the entry, committing to the record's evidence as it now stands,
 * appended to its trail, and the trail's new head kept on the record, so the one atomic update
 * that stores the step stores both.
 */
export function withStep(record: AgreementRecord, step: Omit<AuditStep, 'state'>): AgreementRecord {
  const audit = appendAudit(record.audit, { ...step, state: stateDigest(record) });
  return { ...record, audit, auditHead: { hash: audit.at(-1)!.hash, length: audit.length } };
}

/** Whether every entry links to the one before and hashes to what it says: an edited, removed or reordered entry breaks it. */
function chainHolds(trail: readonly AuditEntry[]): boolean {
  let previousHash = GENESIS_HASH;
  for (const entry of trail) {
    if (entry.previousHash !== previousHash) return false;
    const { hash, previousHash: _previous, ...step } = entry;
    if (auditHash(previousHash, step) !== hash) return false;
    previousHash = hash;
  }
  return true;
}

/**
 * Whether the trail vouches for the agreement as stored: the chain holds; it ends where the head
 * kept on the agreement says (no entry removed from its end); its last entry's `state` is the
 * digest of the agreement's evidence now (no name, e-mail, document hash or outcome changed after
 * it); and each signature image, and the sender's, hashes to the hash that evidence holds. A trail
 * written before heads and states existed is held to its chain alone until its next step.
 */
export function verifyTrail(record: AgreementRecord): boolean {
  const { audit, auditHead } = record;
  if (!chainHolds(audit)) return false;
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
