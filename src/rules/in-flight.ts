/*
 * A webhook's calls in flight, adapted to what its receiver takes: additive increase,
 * multiplicative decrease, with a slow start (as TCP's congestion window). The limit halves on a
 * sign of overload (`429`, `503`, a timeout, a connection that failed), at most once for the calls
 * in flight then; it grows by one for each window of successes (as many as the limit) above the
 * threshold (once within a tenth of where the last overload came, by one for four windows: a
 * receiver that answers `Retry-After` to each overload costs a hold every time the limit touches
 * it), and by one for each success below it. After the webhook is enabled again or its
 * receiver recovers from a run of failures, it starts again from one call, so a receiver that just
 * came back is not sent its backlog all at once. While the one call left still shows overload (a
 * receiver down), the webhook pauses between tries (`pauseAfter`), so a backlog is not spent on a
 * receiver that cannot answer.
 */

/**
 * The longest pause between tries of a receiver that is down: what a receiver back from an outage
 * may wait before its first call (8 s left the bench's receiver idle 7 s after it came back).
 */
const MAX_PAUSE_MS = 4000;

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
  /** The limit the last overload came at (0: none yet): near it, the limit grows four times slower. */
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

/** Windows of successes for one more call in flight near where the last overload came. */
const NEAR_OVERLOAD_WINDOWS = 4;

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
    return { limit, threshold: limit, successes: 0, fellAt: now, overloadedAt: current.limit };
  }
  if (load !== 'ok' || current.limit >= ceiling) return current;
  const successes = current.successes + 1;
  const near = current.overloadedAt > 0 && current.limit >= 0.9 * current.overloadedAt;
  const window = near ? NEAR_OVERLOAD_WINDOWS * current.limit : current.limit;
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
