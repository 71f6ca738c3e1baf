import type { WebhookCallResult } from '../ports.js';
import type { DeliveryAttempt, DeliveryStatus } from '../records.js';
import { atomAtLeast } from '../shared/time.js';
import { attemptSucceeded } from './webhook-health.js';

/** Seconds before each retry: the Standard Webhooks schedule, 5 s to 24 h, about three days in all. */
export const DEFAULT_RETRY_SCHEDULE: readonly number[] = [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400];

/** Each retry waits its step ± this fraction, so receivers that failed together are not retried together. */
const JITTER = 0.1;

/** The longest a `Retry-After` holds a webhook's calls: a receiver cannot park them for a year. */
export const MAX_HOLD_SECONDS = 3600;
/** The shortest hold: a `Retry-After: 0` still waits a second, so that no receiver makes the engine spin. */
const MIN_HOLD_SECONDS = 1;

/**
 * How many attempts the delivery's current run holds. A run ends with a success, a `410`, or its
 * last failure; `redeliver` then starts a new one, with the schedule from its first step again, while
 * the log keeps every attempt. Counted from the log alone, so it needs no field of its own.
 */
export function attemptsInRun(attempts: readonly DeliveryAttempt[], scheduleLength: number): number {
  let inRun = 0;
  for (const attempt of attempts) {
    // A call that never left the portal (its egress proxy failed) is no try of the receiver, and
    // one the receiver answered by holding its calls (`holdOf`) is no failure of it.
    if (attempt.local || attempt.held) continue;
    inRun++;
    if (attemptSucceeded(attempt) || attempt.statusCode === 410 || inRun > scheduleLength) inRun = 0;
  }
  return inRun;
}

/** `Retry-After` as seconds from `now`: a delay in seconds or an HTTP date; `null` when absent or unreadable. */
export function retryAfterSeconds(value: string | string[] | undefined, now: Date): number | null {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (text === undefined || text === '') return null;
  if (/^\d+$/.test(text)) return Number(text);
  // An HTTP date names its weekday and month; this keeps Date.parse's leniency ("-5" is a year) out.
  if (!/^[A-Za-z]{3,9},? /.test(text)) return null;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return null;
  return Math.max(0, Math.ceil((date - now.getTime()) / 1000));
}

/**
 * Until when an answer holds its webhook's calls: a `429` or `503` with a `Retry-After` the portal
 * can read (seconds or an HTTP date), from `now`, at least a second and at most an hour, rounded up
 * to the second (ATOM's precision, so no call comes before the time asked); `null` for any other
 * answer. The attempt that got it is retried then, is no failure toward the webhook's auto-disable
 * and spends none of the delivery's retries; the webhook's other deliveries wait too.
 */
export function holdOf(result: Pick<WebhookCallResult, 'statusCode' | 'headers'>, now: Date): string | null {
  if (result.statusCode !== 429 && result.statusCode !== 503) return null;
  const asked = retryAfterSeconds(result.headers['retry-after'], now);
  if (asked === null) return null;
  const seconds = Math.min(Math.max(asked, MIN_HOLD_SECONDS), MAX_HOLD_SECONDS);
  return atomAtLeast(now, seconds * 1000);
}

export interface Outcome {
  status: DeliveryStatus;
  nextAttemptAt: string | null;
}

/**
 * What comes of an attempt. Any 2xx, or a broker's acknowledgement: succeeded. `410 Gone`: failed at once (the receiver asked to
 * stop). A `429` or `503` with a `Retry-After`: pending until the hold it asks for ends (`holdOf`),
 * whatever the run holds. Otherwise a retry after the schedule's next step with jitter; failed once
 * the schedule is spent. `previous` is the attempts of this run before this one.
 */
export function outcomeOf(
  result: Pick<WebhookCallResult, 'statusCode' | 'headers' | 'error'>,
  previous: number,
  schedule: readonly number[],
  now: Date,
  random: () => number = Math.random,
): Outcome {
  if (attemptSucceeded(result)) return { status: 'succeeded', nextAttemptAt: null };
  const hold = holdOf(result, now);
  if (hold !== null) return { status: 'pending', nextAttemptAt: hold };
  if (result.statusCode === 410 || previous >= schedule.length) return { status: 'failed', nextAttemptAt: null };
  const delay = schedule[previous]! * (1 + JITTER * (2 * random() - 1));
  return { status: 'pending', nextAttemptAt: atomAtLeast(now, Math.max(0, delay) * 1000) };
}
