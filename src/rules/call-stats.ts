import type * as v from 'valibot';
import type { CallStatsHour, DeliveryAttempt } from '../records.js';
import type * as answers from '../shapes/answers.js';
import { PortalError } from '../errors.js';
import { attemptSucceeded } from './webhook-health.js';

/**
 * A webhook's calls counted by the hour as each attempt is recorded, so that a chart of a week reads
 * at most 168 rows whatever the traffic: by outcome, and by duration in bins, from which the
 * percentiles are estimated.
 */

/** The upper bounds of the duration bins, in ms; the last bin holds every call beyond the last bound. */
export const LATENCY_BOUNDS_MS = [50, 100, 250, 500, 1000, 2500, 5000, 10000] as const;
/** How many duration bins an hour has: one per bound, and one beyond. */
export const LATENCY_BINS = LATENCY_BOUNDS_MS.length + 1;
/** How long a store keeps an hour's counts: the longest window and the hour it is in. */
export const CALL_STATS_KEPT_MS = 8 * 24 * 3600_000;

export type { CallStatsHour };

/** The hour an attempt falls in (ATOM). */
export const hourOf = (at: string): string => `${at.slice(0, 13)}:00:00+00:00`;

/** 0 for a success (`attemptSucceeded`: a 2xx, or a broker's acknowledgement), 1 for another status, 2 for no answer. */
export const outcomeIndex = (attempt: Pick<DeliveryAttempt, 'statusCode' | 'error'>): 0 | 1 | 2 =>
  attemptSucceeded(attempt) ? 0 : attempt.statusCode === null ? 2 : 1;

/** The duration bin of a call. */
export function latencyBin(durationMs: number): number {
  for (let i = 0; i < LATENCY_BOUNDS_MS.length; i++) if (durationMs <= LATENCY_BOUNDS_MS[i]!) return i;
  return LATENCY_BOUNDS_MS.length;
}

/** An empty hour. */
export const emptyHour = (hour: string): CallStatsHour => ({
  hour,
  succeeded: 0,
  failed: 0,
  errors: 0,
  latency: new Array<number>(LATENCY_BINS).fill(0),
});

/** The windows a chart asks for, each in buckets of its own size. */
const STATS_WINDOWS = {
  '24h': { hours: 24, bucketHours: 1 },
  '7d': { hours: 168, bucketHours: 6 },
} as const;
export type StatsWindow = keyof typeof STATS_WINDOWS;

/** One bucket of a chart: its calls by outcome and the estimated percentiles of their durations. */
type StatsBucket = v.InferOutput<typeof answers.statsBucket>;

/** A webhook's calls over a window, as `GET /webhooks/{id}/stats` answers. */
export interface WebhookStats extends v.InferOutput<typeof answers.webhookStats> {}

export function statsWindow(value: unknown): StatsWindow {
  if (value === undefined) return '24h';
  if (value === '24h' || value === '7d') return value;
  throw new PortalError('INPUT_INVALID', 'window', 'must be 24h or 7d');
}

/**
 * The duration below which a fraction `q` of the calls fell, estimated from the bins: linearly
 * within the bin it falls in (from 0 for the first); a percentile in the last bin is its lower bound.
 */
export function percentile(latency: readonly number[], q: number): number | null {
  const total = latency.reduce((sum, count) => sum + count, 0);
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < latency.length; i++) {
    const count = latency[i]!;
    if (count > 0 && below + count >= rank) {
      const low = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1]!;
      if (i === LATENCY_BOUNDS_MS.length) return low;
      const high = LATENCY_BOUNDS_MS[i]!;
      return Math.round(low + ((rank - below) / count) * (high - low));
    }
    below += count;
  }
  return LATENCY_BOUNDS_MS.at(-1)!;
}

function bucketOf(start: string, hours: CallStatsHour[]): StatsBucket {
  const latency = new Array<number>(LATENCY_BINS).fill(0);
  let succeeded = 0;
  let failed = 0;
  let errors = 0;
  for (const hour of hours) {
    succeeded += hour.succeeded;
    failed += hour.failed;
    errors += hour.errors;
    for (const [i, count] of hour.latency.entries()) latency[i]! += count;
  }
  return { start, succeeded, failed, errors, p50Ms: percentile(latency, 0.5), p95Ms: percentile(latency, 0.95) };
}

const atomHour = (ms: number) => new Date(ms).toISOString().slice(0, 13) + ':00:00+00:00';

/** The first hour a window ending in the hour of `now` covers. */
export function windowStart(window: StatsWindow, now: Date): string {
  const hourMs = Math.floor(now.getTime() / 3600_000) * 3600_000;
  return atomHour(hourMs - (STATS_WINDOWS[window].hours - 1) * 3600_000);
}

/** The chart of `window` ending with the hour of `now`, from the stored hours (any order, any extra). */
export function summarize(window: StatsWindow, now: Date, stored: readonly CallStatsHour[]): WebhookStats {
  const { hours, bucketHours } = STATS_WINDOWS[window];
  const lastHour = Math.floor(now.getTime() / 3600_000) * 3600_000;
  // Buckets end with the current hour; the first may start mid-day for a 6-hour bucket.
  const firstHour = lastHour - (hours - 1) * 3600_000;
  const byHour = new Map(stored.map((hour) => [Date.parse(hour.hour), hour]));
  const buckets: StatsBucket[] = [];
  const all: CallStatsHour[] = [];
  for (let start = firstHour; start <= lastHour; start += bucketHours * 3600_000) {
    const inside: CallStatsHour[] = [];
    for (let h = start; h < start + bucketHours * 3600_000; h += 3600_000) {
      const hour = byHour.get(h);
      if (hour !== undefined) inside.push(hour);
    }
    all.push(...inside);
    buckets.push(bucketOf(atomHour(start), inside));
  }
  return {
    window,
    from: atomHour(firstHour),
    until: atomHour(lastHour + 3600_000),
    bucketSeconds: bucketHours * 3600,
    buckets,
    totals: bucketOf(atomHour(firstHour), all),
  };
}
