import { isPortalError } from '../../src/errors.js';

export interface BatchOptions<I, R> {
  /** Statements of this kind running at once; calls that come meanwhile wait and go together. */
  maxRunning: number;
  /** Size of one statement at most (in `size` units); a larger single call goes alone. */
  maxSize: number;
  size(item: I): number;
  /** Runs one statement for the items, resolving each item's result in the same order. */
  run(items: I[]): Promise<R[]>;
}

/**
 * Writes together: calls made in one turn of the event loop, and calls that come while
 * `maxRunning` statements are running, go in the next statement as one batch. Under load each call
 * then costs a share of a statement's round trip and commit instead of its own; a lone call waits
 * for the end of the turn only (`setImmediate`), so an idle store adds no round trip.
 *
 * A batch that fails stored nothing (one statement, or one transaction). One call's items may be
 * what failed (an id stored already, say): each call is then tried again on its own, so that it
 * fails alone. A database that is unavailable (or a commit whose outcome stays unknown) answers
 * every call of the batch the same.
 */
export function createBatcher<I, R>({ maxRunning, maxSize, size, run }: BatchOptions<I, R>): (item: I) => Promise<R> {
  const waiting: { item: I; resolve(result: R): void; reject(error: unknown): void }[] = [];
  let running = 0;
  let scheduled = false;

  async function runGroup(group: typeof waiting): Promise<void> {
    let results: R[];
    try {
      results = await run(group.map((one) => one.item));
    } catch (error) {
      if (group.length === 1 || isPortalError(error, 'STORAGE_UNAVAILABLE')) {
        for (const one of group) one.reject(error);
        return;
      }
      await Promise.all(group.map((one) => run([one.item]).then(([result]) => one.resolve(result!), one.reject)));
      return;
    }
    for (const [i, one] of group.entries()) one.resolve(results[i]!);
  }

  function runWaiting(): void {
    while (running < maxRunning && waiting.length > 0) {
      let total = 0;
      let take = 0;
      while (take < waiting.length && (take === 0 || total + size(waiting[take]!.item) <= maxSize)) {
        total += size(waiting[take]!.item);
        take++;
      }
      running++;
      void runGroup(waiting.splice(0, take)).finally(() => {
        running--;
        runWaiting();
      });
    }
  }

  function runAtTurnEnd(): void {
    scheduled = false;
    runWaiting();
  }

  return (item) =>
    new Promise<R>((resolve, reject) => {
      waiting.push({ item, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(runAtTurnEnd);
      }
    });
}
