import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { NOTHING, createBackgroundRuns, updateUnlessNothing } from './agreement-work.js';
import { describeError, errorMessage } from '../errors.js';
import type { BlobStore, Storage } from '../ports.js';
import type { AgreementRecord } from '../records.js';
import type { Logger } from '../shared/logger.js';
import { atom } from '../shared/time.js';
import { type CompletedCopy, SealError, copyPlan, isPdf } from './completed-copy.js';
import type { OperationalEvent } from './operational-events.js';
import { PdfBusy, type PdfWork } from './pdf-work.js';
import { queueMail } from './signer-mail-queue.js';

/** An attempt's claim: no other instance starts the copies of the agreement until it runs out. */
const LEASE_MS = 10 * 60_000;

/**
 * The completed copy of a document is kept under `agx_`, its document id's own part, and a random
 * part of its own: each attempt writes new keys, and only the attempt whose update records them
 * first has its copies kept (the others delete theirs; the orphan sweep takes what a crash left).
 */
const copyKey = (documentId: string) => `agx_${documentId.slice('agd_'.length)}${randomBytes(6).toString('hex')}`;

/**
 * Makes the completed copies of signed agreements, exactly once across instances: the step that
 * signs an agreement stores that they are owed (`completion`); `deliver` claims that with a lease
 * in one atomic update, makes each PDF's copy (`completed-copy.ts`) in the PDF worker thread (`pdf-work.ts`), writes it
 * under a key of its own, and records the keys and hashes in one update that only the claim's
 * holder can make. A process killed at any point leaves either no recorded copy (the claim runs
 * out and another attempt makes them) or every copy recorded; never a copy recorded but missing.
 * A PDF the library cannot read keeps `signedFileHash: null` (`sealing.failed`, final); a sealing
 * key that fails is retried on the retry schedule. Then, with a notifier, `agreement-completed`
 * is queued to every signer.
 */
export function createCompletedCopies(deps: {
  storage: Storage;
  blobs: BlobStore;
  clock: () => Date;
  logger: Logger;
  /** Where each copy is made: a worker thread with limits of its own. */
  pdf: Pick<PdfWork, 'completedCopy'>;
  retrySchedule: readonly number[];
  emit: (event: OperationalEvent) => void;
  /** With a notifier: told once the completion mail is queued. */
  mail?: { queued: (record: AgreementRecord) => void } | undefined;
}) {
  const { storage, blobs, clock, logger } = deps;
  const background = createBackgroundRuns((error, agreementId) =>
    logger.warn({ agreementId, err: describeError(error) }, 'completed copies: failed; the tick tries again'),
  );
  const update = (
    accountId: string,
    id: string,
    change: (current: AgreementRecord) => AgreementRecord | typeof NOTHING,
  ) => updateUnlessNothing(storage, accountId, id, change);

  /** Records what the attempt made, if the claim is still this attempt's; `false` when another has settled it. */
  async function record(
    claimed: AgreementRecord,
    attempts: number,
    copies: Map<string, { key: string; copy: CompletedCopy }>,
    now: Date,
  ): Promise<boolean> {
    const stored = await update(claimed.accountId, claimed.id, (current) => {
      if (current.completion?.attempts !== attempts) return NOTHING;
      const documents = current.documents.map((document) => {
        const made = copies.get(document.id);
        return made === undefined ? document : { ...document, signedFileHash: made.copy.hash, signedFileKey: made.key };
      });
      const done: AgreementRecord = { ...current, documents, completion: null };
      if (deps.mail === undefined) return done;
      return done.signers.reduce(
        (mailed, signer) => queueMail(mailed, { kind: 'agreement-completed', signerId: signer.id }, now),
        done,
      );
    });
    if (stored !== null) deps.mail?.queued(stored);
    return stored !== null;
  }

  /** Claims, makes and records the copies of one agreement whose completion is due now. */
  async function deliver(accountId: string, id: string): Promise<void> {
    const now = clock();
    let attempts = 0;
    const claimed = await update(accountId, id, (current) => {
      const owed = current.completion;
      if (owed === null || Date.parse(owed.nextAttemptAt) > now.getTime()) return NOTHING;
      attempts = owed.attempts + 1;
      return { ...current, completion: { ...owed, attempts, nextAttemptAt: atom(new Date(now.getTime() + LEASE_MS)) } };
    });
    if (claimed === null) return;
    const copies = new Map<string, { key: string; copy: CompletedCopy }>();
    const event = { accountId, agreementId: id, at: atom(now) };
    try {
      for (const document of claimed.documents) {
        if (document.signedFileKey !== null) continue;
        const stream = await blobs.get(document.id);
        if (stream === null) throw new Error(`the bytes of ${document.id} are missing from the blob store`);
        const original = await buffer(stream);
        if (!isPdf(original)) continue;
        let copy: CompletedCopy;
        try {
          copy = await deps.pdf.completedCopy(original, copyPlan(claimed, document, now));
        } catch (error) {
          // The key, or a worker too busy to take it now: the whole attempt is tried again later.
          if (error instanceof SealError || error instanceof PdfBusy) throw error;
          // This PDF will never be read: it keeps no copy, and the agreement is told once.
          deps.emit({
            type: 'sealing.failed',
            ...event,
            documentId: document.id,
            reason: errorMessage(error).slice(0, 500),
            final: true,
          });
          logger.warn(
            { agreementId: id, documentId: document.id, err: describeError(error) },
            'completed copy: the PDF could not be read or updated; it keeps no copy',
          );
          continue;
        }
        if (copy.degraded !== null)
          deps.emit({
            type: 'sealing.degraded',
            ...event,
            documentId: document.id,
            reason: copy.degraded.slice(0, 500),
          });
        const key = copyKey(document.id);
        await blobs.put(key, Readable.from([copy.bytes]));
        copies.set(document.id, { key, copy });
      }
      if (!(await record(claimed, attempts, copies, now))) await discard(copies);
    } catch (error) {
      await discard(copies);
      await retry(claimed, attempts, error, event);
    }
  }

  async function discard(copies: Map<string, { key: string }>): Promise<void> {
    for (const { key } of copies.values()) await blobs.delete(key).catch(() => false);
  }

  /** The attempt failed as a whole (the key, the blob store): due again on the schedule, or given up past it. */
  async function retry(
    claimed: AgreementRecord,
    attempts: number,
    error: unknown,
    event: { accountId: string; agreementId: string; at: string },
  ): Promise<void> {
    const now = clock();
    const reason = errorMessage(error).slice(0, 500);
    const givenUp = attempts > deps.retrySchedule.length;
    logger.warn(
      { agreementId: claimed.id, attempts, givenUp, err: describeError(error) },
      'completed copies: the attempt failed',
    );
    deps.emit({ type: 'sealing.failed', ...event, documentId: null, reason, final: givenUp });
    await update(claimed.accountId, claimed.id, (current) => {
      if (current.completion?.attempts !== attempts) return NOTHING;
      if (givenUp) return { ...current, completion: null };
      const nextAttemptAt = atom(new Date(now.getTime() + deps.retrySchedule[attempts - 1]! * 1000));
      return { ...current, completion: { attempts, nextAttemptAt, lastError: reason } };
    }).catch((failure) =>
      logger.error(
        { agreementId: claimed.id, err: describeError(failure) },
        'completed copies: the retry could not be recorded; the lease runs out',
      ),
    );
  }

  return {
    deliver,
    /** Makes an agreement's copies now, off the request that signed it. */
    kick(accountId: string, id: string): void {
      background.start(id, () => deliver(accountId, id));
    },
    /** Resolves once every making begun so far has ended (the portal's `close` waits for it). */
    settled: background.settled,
  };
}

export type CompletedCopies = ReturnType<typeof createCompletedCopies>;
