/*
 * A webhook's calls in flight, adapted to what its receiver takes: additive increase,
 * multiplicative decrease, with a slow start (as TCP's congestion window). The limit halves on a
 * sign of overload (`429`, `503`, a timeout, a connection that failed), at most once for the calls
 * in flight then; it grows by one for each window of successes (as many as the limit) above the
 * threshold, and by one for each success below it. Within a tenth of where the last overload came
 * it grows 64 times slower, and an overload there again sets the threshold at nine tenths of it: a
 * receiver that answers `Retry-After` to each overload costs a hold (a second or more of no calls)
 * every time the limit touches it, so the limit comes back quickly to just under what it takes and
 * stays there. After the webhook is enabled again or its receiver recovers from a run of failures,
 * it starts again from one call, so a receiver that just came back is not sent its backlog all at
 * once. While the one call left still shows overload (a receiver down), the webhook pauses between
 * tries (`pauseAfter`), so a backlog is not spent on a receiver that cannot answer.
 */

/**
 * The longest pause between tries of a receiver that is down: what a receiver back from an outage
 * may wait before its first call (a pause ends at a whole second, so up to 3 s), against one call
 * every 2–3 s spent on a receiver that is still down.
 */
const MAX_PAUSE_MS = 2000;

/** The pause after the `pauses`-th overload in a row at one call: 1 s, doubling, at most `MAX_PAUSE_MS`. */
export const pauseAfter = (pauses: number): number => Math.min(MAX_PAUSE_MS, 1000 * 2 ** pauses);

/** Where a webhook's limit stands. Times are the worker's own (ms, monotonic). */
export interface InFlightLimit {
  /** Calls in flight at most. */
  limit: number;
  /** Below it, the limit grows by one a success (slow start); at or above, by one a window. */
  threshold: number;
  /** Successes since the limit last changed. */
  successes: number;
  /** When the limit last fell: a call started before then that shows overload lowers it no more. */
  fellAt: number;
  /** The limit the last overload came at (0: none yet): near it, the limit grows 64 times slower. */
  overloadedAt: number;
}

/** What a call's answer says of its receiver's load. */
export type Load = 'ok' | 'overloaded' | 'other';

/** A webhook no call has told anything of yet: as many calls as `ceiling` (its account's share). */
export const freshLimit = (ceiling: number): InFlightLimit => ({
  limit: ceiling,
  threshold: ceiling,
  successes: 0,
  fellAt: Number.NEGATIVE_INFINITY,
  overloadedAt: 0,
});

/**
 * Windows of successes for one more call in flight near where the last overload came: against a
 * receiver of 1,000 calls a second answering `429` with `Retry-After: 1` beyond, 4 had a hold every
 * 3–4 s, 64 every 10–20 s (`npm run bench`, row "throttling").
 */
const NEAR_OVERLOAD_WINDOWS = 64;

/** Whether `limit` is within a tenth of `overloadedAt` (0: no overload yet, never near). */
const near = (limit: number, overloadedAt: number) =>
  overloadedAt > 0 && limit >= 0.9 * overloadedAt && limit < 1.1 * overloadedAt;

/** The limit after a call started at `startedAt` and answered at `now`, never above `ceiling`. */
export function afterCall(
  current: InFlightLimit,
  load: Load,
  startedAt: number,
  now: number,
  ceiling: number,
): InFlightLimit {
  if (load === 'overloaded') {
    // One fall for the calls in flight when it fell: they were sent at the load that caused it.
    if (startedAt < current.fellAt) return current;
    const limit = Math.max(1, Math.floor(current.limit / 2));
    // Overloaded again where the last overload came: that is what the receiver takes, and the limit
    // climbs back one a success to just under it. Anywhere else, one a window from the half.
    const threshold = near(current.limit, current.overloadedAt)
      ? Math.max(limit, Math.floor(0.9 * current.limit))
      : limit;
    return { limit, threshold, successes: 0, fellAt: now, overloadedAt: current.limit };
  }
  if (load !== 'ok' || current.limit >= ceiling) return current;
  const successes = current.successes + 1;
  const window = near(current.limit, current.overloadedAt) ? NEAR_OVERLOAD_WINDOWS * current.limit : current.limit;
  if (current.limit < current.threshold || successes >= window)
    return { ...current, limit: current.limit + 1, successes: 0 };
  return { ...current, successes };
}

/**
 * Slow start: one call in flight, growing by one a success up to `threshold`, then by one a window.
 * After a recovery the threshold is the one the falls left; after the webhook is enabled again, its
 * account's share.
 */
export const slowStart = (threshold: number): InFlightLimit => ({
  limit: 1,
  threshold: Math.max(1, threshold),
  successes: 0,
  fellAt: Number.NEGATIVE_INFINITY,
  overloadedAt: 0,
});
