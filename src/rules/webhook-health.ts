import type { HealthRule } from '../ports.js';
import type { AutomaticDisableReason, DeliveryAttempt, WebhookHealth, WebhookHealthRecord } from '../records.js';

export type { HealthRule };

/*
 * When a webhook is disabled, written once for every storage adapter: pure functions over
 * `WebhookHealthRecord`, no I/O, an argument never changed. The memory and fs adapters call them
 * inside `Storage.recordAttempt`; the SQL adapter states the same rule in that statement
 * (`adapters/sql/storage-health.ts`), and the conformance suite holds all three to it.
 */

export const DEFAULT_DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;
export const DEFAULT_DISABLE_AFTER_FAILURES = 10;

/** The health of a webhook no attempt has reached: enabled, nothing failed. */
export function freshHealth(webhook: { id: string; accountId: string }): WebhookHealthRecord {
  return {
    id: webhook.id,
    accountId: webhook.accountId,
    consecutiveFailures: 0,
    failingSince: null,
    lastSuccessAt: null,
    lastAttemptAt: null,
    disabledAt: null,
    disabledReason: null,
    heldUntil: null,
    inFlightLimit: null,
  };
}

/**
 * Whether an attempt succeeded: a 2xx answer over HTTP, or a broker's acknowledgement (no status and
 * no error: a destination beyond HTTP answers no status). The one test the retry schedule, health,
 * the call counts and the worker make.
 */
export const attemptSucceeded = (attempt: Pick<DeliveryAttempt, 'statusCode' | 'error'>): boolean =>
  attempt.statusCode === null ? attempt.error === null : attempt.statusCode >= 200 && attempt.statusCode < 300;

/** Milliseconds from one ATOM time to another. */
const between = (from: string, to: string) => Date.parse(to) - Date.parse(from);

export interface HealthChange {
  health: WebhookHealthRecord;
  /** Set when this attempt disabled the webhook: the transition, reported once. */
  disabled: AutomaticDisableReason | null;
  /** Whether `health` differs from the record given: an adapter writes nothing when it does not. */
  changed: boolean;
}

/**
 * The health after an attempt. A success clears the run of failures; a failure extends it (its
 * start kept). An enabled webhook is disabled at once by a `410 Gone` (`gone`), and when its run of
 * failures holds at least `disableAfterFailures` attempts and has lasted `disableAfterMs` from its
 * first to this one (`failing`). A disabled webhook stays so whatever comes back: a call that was
 * in flight when it was disabled does not enable it again.
 */
export function healthAfterAttempt(
  current: WebhookHealthRecord,
  attempt: Pick<DeliveryAttempt, 'at' | 'statusCode' | 'error'>,
  rule: HealthRule,
): HealthChange {
  let health: WebhookHealthRecord;
  let disabled: AutomaticDisableReason | null = null;
  if (attemptSucceeded(attempt)) {
    health = {
      ...current,
      consecutiveFailures: 0,
      failingSince: null,
      lastSuccessAt: attempt.at,
      lastAttemptAt: attempt.at,
    };
  } else {
    const consecutiveFailures = current.consecutiveFailures + 1;
    const failingSince = current.failingSince ?? attempt.at;
    health = { ...current, consecutiveFailures, failingSince, lastAttemptAt: attempt.at };
    if (current.disabledAt === null) {
      if (attempt.statusCode === 410) disabled = 'gone';
      else if (
        consecutiveFailures >= rule.disableAfterFailures &&
        between(failingSince, attempt.at) >= rule.disableAfterMs
      )
        disabled = 'failing';
      if (disabled !== null) health = { ...health, disabledAt: attempt.at, disabledReason: disabled };
    }
  }
  const changed =
    health.consecutiveFailures !== current.consecutiveFailures ||
    health.failingSince !== current.failingSince ||
    health.lastSuccessAt !== current.lastSuccessAt ||
    health.lastAttemptAt !== current.lastAttemptAt ||
    health.disabledAt !== current.disabledAt;
  return { health, disabled, changed };
}

/** The webhook disabled by hand at `at`; `null` when it is disabled already (its reason and time kept). */
export function disableHealth(current: WebhookHealthRecord, at: string): WebhookHealthRecord | null {
  if (current.disabledAt !== null) return null;
  return { ...current, disabledAt: at, disabledReason: 'manual' };
}

/**
 * The webhook enabled again, its run of failures forgotten (so the next failure does not disable it
 * at once); `null` when it is enabled already. The times of its last attempt and success are kept.
 */
export function enableHealth(current: WebhookHealthRecord): WebhookHealthRecord | null {
  if (current.disabledAt === null) return null;
  return { ...current, disabledAt: null, disabledReason: null, consecutiveFailures: 0, failingSince: null };
}

/**
 * The health once its receiver asked to hold the calls until `until` (`holdOf`): the later of that
 * and the hold it has; `null` when that changes nothing. A record written before holds has none.
 */
export function holdHealth(current: WebhookHealthRecord, until: string): WebhookHealthRecord | null {
  const held = current.heldUntil ?? null;
  if (held !== null && held >= until) return null;
  return { ...current, heldUntil: until };
}

/** Whether the webhook's calls wait at `now` (ATOM), and until when: `null` when they do not. */
export function heldAt(record: Pick<WebhookHealthRecord, 'heldUntil'> | undefined, now: string): string | null {
  const held = record?.heldUntil ?? null;
  return held !== null && held > now ? held : null;
}

/** The health as the API shows it at `now` (ATOM), of a webhook limited to `rateLimit` calls a second (`null`: none). */
export function healthShape(record: WebhookHealthRecord, now: string, rateLimit: number | null): WebhookHealth {
  return {
    status: record.disabledAt === null ? 'enabled' : 'disabled',
    disabledReason: record.disabledReason,
    disabledAt: record.disabledAt,
    failingSince: record.failingSince,
    lastSuccessAt: record.lastSuccessAt,
    lastAttemptAt: record.lastAttemptAt,
    consecutiveFailures: record.consecutiveFailures,
    heldUntil: heldAt(record, now),
    rateLimit,
    // A record written before in-flight limits has none.
    inFlightLimit: record.inFlightLimit ?? null,
  };
}
