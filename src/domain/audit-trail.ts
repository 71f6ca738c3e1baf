import { createHash } from 'node:crypto';
import type { AuditEntry } from '../records.js';

/** The `previousHash` of a trail's first entry. */
const GENESIS_HASH = '0'.repeat(64);

/** An entry before it is chained: what a step records. */
export type AuditStep = Omit<AuditEntry, 'previousHash' | 'hash'>;

/**
 * The hash of an entry: SHA-256 (hex) over the previous entry's hash, a line break, and the entry's
 * fields as JSON in a fixed order (`at, action, actor, signerId, ip, userAgent, documents, detail`,
 * each document as `{id, fileHash}`). Anyone holding the trail can recompute it (docs/signing.md).
 */
function auditHash(previousHash: string, step: AuditStep): string {
  const body = JSON.stringify([
    step.at,
    step.action,
    step.actor,
    step.signerId,
    step.ip,
    step.userAgent,
    step.documents.map((document) => [document.id, document.fileHash]),
    step.detail,
  ]);
  return createHash('sha256').update(`${previousHash}\n${body}`).digest('hex');
}

/** `trail` with `steps` appended, each chained to the one before. */
export function appendAudit(trail: readonly AuditEntry[], ...steps: AuditStep[]): AuditEntry[] {
  const out = [...trail];
  for (const step of steps) {
    const previousHash = out.at(-1)?.hash ?? GENESIS_HASH;
    out.push({ ...step, previousHash, hash: auditHash(previousHash, step) });
  }
  return out;
}

/** Whether every entry links to the one before and hashes to what it says: an edited, removed or reordered entry breaks it. */
export function verifyAudit(trail: readonly AuditEntry[]): boolean {
  let previousHash = GENESIS_HASH;
  for (const entry of trail) {
    if (entry.previousHash !== previousHash) return false;
    const { hash, previousHash: _previous, ...step } = entry;
    if (auditHash(previousHash, step) !== hash) return false;
    previousHash = hash;
  }
  return true;
}
