import type { Storage } from '../ports.js';
import type { AgreementRecord } from '../records.js';

/**
 * What the work an agreement owes (mail to its signers, its completed copies) shares: claims and
 * outcomes recorded by conditional updates, and runs started off a request that `close` waits for.
 */

/** What a `change` returns when it finds nothing to change: the store then writes nothing. */
export const NOTHING = Symbol('nothing to change');

/**
 * `storage.updateAgreement` with no events, where `change` may return `NOTHING` (another instance
 * took the claim, the work is done): resolves the stored agreement, or `null` when nothing was
 * written (or the agreement is absent).
 */
export async function updateUnlessNothing(
  storage: Storage,
  accountId: string,
  id: string,
  change: (current: AgreementRecord) => AgreementRecord | typeof NOTHING,
): Promise<AgreementRecord | null> {
  try {
    return await storage.updateAgreement(accountId, id, (current) => {
      const next = change(current);
      // Thrown, so the store's transaction writes nothing; caught below.
      if (next === NOTHING) throw NOTHING;
      return { agreement: next, events: [] };
    });
  } catch (error) {
    if (error === NOTHING) return null;
    throw error;
  }
}

/** Runs started off a request and kept track of: `settled` resolves once every one begun has ended. */
export function createBackgroundRuns(onError: (error: unknown, agreementId: string) => void) {
  const running = new Set<Promise<void>>();
  return {
    start(agreementId: string, task: () => Promise<void>): void {
      const run = task()
        .catch((error) => onError(error, agreementId))
        .finally(() => running.delete(run));
      running.add(run);
    },
    settled: async (): Promise<void> => {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  };
}
