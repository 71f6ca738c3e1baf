import type { WebhookCallResult } from '../ports.js';
import type { DeliveryAttempt, DeliveryStatus } from '../records.js';
import { atom } from '../shared/time.js';

/** Seconds before each retry: the Standard Webhooks schedule, 5 s to 24 h, about three days in all. */
export const DEFAULT_RETRY_SCHEDULE: readonly number[] = [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400];

/** Each retry waits its step ± this fraction, so receivers that failed together are not retried together. */
const JITTER = 0.1;

/** The longest `Retry-After` honoured (a day, or the schedule's longest step if longer): a receiver cannot park a delivery for a year. */
export const MAX_RETRY_AFTER_SECONDS = 86_400;

const isSuccess = (statusCode: number | null) => statusCode !== null && statusCode >= 200 && statusCode < 300;

/**
 * How many attempts the delivery's current run holds. A run ends with a success, a `410`, or its
 * last failure; `redeliver` then starts a new one, with the schedule from its first step again, while
 * the log keeps every attempt. Counted from the log alone, so it needs no field of its own.
 */
export function attemptsInRun(attempts: readonly DeliveryAttempt[], scheduleLength: number): number {
  let inRun = 0;
  for (const attempt of attempts) {
    // A call that never left the portal (its egress proxy failed) is no try of the receiver.
    if (attempt.local) continue;
    inRun++;
    if (isSuccess(attempt.statusCode) || attempt.statusCode === 410 || inRun > scheduleLength) inRun = 0;
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

export interface Outcome {
  status: DeliveryStatus;
  nextAttemptAt: string | null;
}

/**
 * What comes of an attempt. Any 2xx: succeeded. `410 Gone`: failed at once (the receiver asked to
 * stop). Otherwise a retry after the schedule's next step with jitter, or after a longer
 * `Retry-After` on 429/503 (capped, see `MAX_RETRY_AFTER_SECONDS`); failed once the schedule is
 * spent. `previous` is the attempts of this run
 * before this one.
 */
export function outcomeOf(
  result: Pick<WebhookCallResult, 'statusCode' | 'headers'>,
  previous: number,
  schedule: readonly number[],
  now: Date,
  random: () => number = Math.random,
): Outcome {
  if (isSuccess(result.statusCode)) return { status: 'succeeded', nextAttemptAt: null };
  if (result.statusCode === 410 || previous >= schedule.length) return { status: 'failed', nextAttemptAt: null };
  let delay = schedule[previous]! * (1 + JITTER * (2 * random() - 1));
  if (result.statusCode === 429 || result.statusCode === 503) {
    const asked = retryAfterSeconds(result.headers['retry-after'], now);
    if (asked !== null) delay = Math.max(delay, Math.min(asked, Math.max(MAX_RETRY_AFTER_SECONDS, ...schedule)));
  }
  // Rounded up to the second (ATOM's precision), so a retry never comes before the time asked.
  const due = Math.ceil((now.getTime() + Math.max(0, delay) * 1000) / 1000) * 1000;
  return { status: 'pending', nextAttemptAt: atom(new Date(due)) };
}
