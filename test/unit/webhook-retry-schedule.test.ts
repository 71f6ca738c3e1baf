import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeliveryAttempt } from '../../src/records.js';
import {
  attemptsInRun,
  holdOf,
  MAX_HOLD_SECONDS,
  outcomeOf,
  retryAfterSeconds,
} from '../../src/rules/retry-schedule.js';

const NOW = new Date('2026-05-01T00:00:00.250Z');
const after = (seconds: number) =>
  new Date(Math.ceil((NOW.getTime() + seconds * 1000) / 1000) * 1000).toISOString().slice(0, 19) + '+00:00';
const attempts = (...codes: (number | null)[]): DeliveryAttempt[] =>
  codes.map((statusCode) => ({
    at: '2026-05-01T00:00:00+00:00',
    statusCode,
    error: statusCode === null ? 'timeout' : null,
    durationMs: 1,
  }));

test('jitter stays within ± 10 % of the step, and a retry is never due before the time computed', () => {
  const schedule = [100, 1000];
  assert.equal(
    outcomeOf({ statusCode: 500, headers: {}, error: null }, 0, schedule, NOW, () => 0),
    { status: 'pending', nextAttemptAt: after(90) },
  );
  assert.equal(
    outcomeOf({ statusCode: 500, headers: {}, error: null }, 0, schedule, NOW, () => 0.5),
    { status: 'pending', nextAttemptAt: after(100) },
  );
  assert.equal(
    outcomeOf({ statusCode: null, headers: {}, error: 'timed out' }, 1, schedule, NOW, () => 0.999999),
    { status: 'pending', nextAttemptAt: after(1100) },
  );
  assert.equal(outcomeOf({ statusCode: 500, headers: {}, error: null }, 2, schedule, NOW), {
    status: 'failed',
    nextAttemptAt: null,
  });
});

test('2xx succeeds, 410 fails at once, any other status or none is retried', () => {
  for (const code of [200, 201, 204, 299])
    assert.is(
      outcomeOf({ statusCode: code, headers: {}, error: code === null ? 'refused' : null }, 0, [5], NOW).status,
      'succeeded',
    );
  assert.is(outcomeOf({ statusCode: 410, headers: {}, error: null }, 0, [5], NOW).status, 'failed');
  assert.is(
    outcomeOf({ statusCode: null, headers: {}, error: null }, 0, [5], NOW).status,
    'succeeded',
    "a broker's acknowledgement: no status, no error",
  );
  for (const code of [null, 199, 301, 400, 404, 429, 500, 503])
    assert.is(
      outcomeOf({ statusCode: code, headers: {}, error: code === null ? 'refused' : null }, 0, [5], NOW).status,
      'pending',
    );
  assert.is(
    outcomeOf({ statusCode: 500, headers: {}, error: null }, 0, [], NOW).status,
    'failed',
    'an empty schedule: one attempt',
  );
});

test('Retry-After on 429 and 503 holds: due when the hold ends, at least a second and at most an hour, whatever the run', () => {
  const at = (statusCode: number, value: string, previous = 0) =>
    outcomeOf({ statusCode, headers: { 'retry-after': value }, error: null }, previous, [10], NOW, () => 0.5);
  assert.equal(at(429, '600'), { status: 'pending', nextAttemptAt: after(600) });
  assert.equal(at(503, '3'), { status: 'pending', nextAttemptAt: after(3) }, 'sooner than the schedule');
  assert.equal(at(429, '0'), { status: 'pending', nextAttemptAt: after(1) }, 'never at once');
  assert.equal(at(429, '99999999'), { status: 'pending', nextAttemptAt: after(MAX_HOLD_SECONDS) });
  assert.equal(at(429, '5', 1), { status: 'pending', nextAttemptAt: after(5) }, 'a spent schedule does not end it');
  assert.equal(at(500, '600'), { status: 'pending', nextAttemptAt: after(10) }, 'other statuses: the schedule');
  assert.equal(at(429, 'soon'), { status: 'pending', nextAttemptAt: after(10) }, 'unreadable: the schedule');
  assert.equal(at(503, 'soon', 1), { status: 'failed', nextAttemptAt: null });
  assert.is(holdOf({ statusCode: 429, headers: { 'retry-after': '2' } }, NOW), after(2));
  assert.is(
    holdOf({ statusCode: 429, headers: { 'retry-after': new Date(NOW.getTime() + 90_000).toUTCString() } }, NOW),
    after(90),
  );
  assert.is(holdOf({ statusCode: 429, headers: {} }, NOW), null);
  assert.is(holdOf({ statusCode: 500, headers: { 'retry-after': '2' } }, NOW), null);
  assert.is(MAX_HOLD_SECONDS, 3600);
});

test('retryAfterSeconds reads seconds and HTTP dates', () => {
  assert.is(retryAfterSeconds('120', NOW), 120);
  assert.is(retryAfterSeconds([' 7 '], NOW), 7);
  assert.is(retryAfterSeconds(new Date(NOW.getTime() + 90_000).toUTCString(), NOW), 90);
  assert.is(retryAfterSeconds('Thu, 01 Jan 1970 00:00:00 GMT', NOW), 0);
  assert.is(retryAfterSeconds(undefined, NOW), null);
  assert.is(retryAfterSeconds('', NOW), null);
  assert.is(retryAfterSeconds('-5', NOW), null);
  assert.is(retryAfterSeconds('later', NOW), null);
});

test('attemptsInRun counts from the end of the last run: a success, a 410, or the last failure', () => {
  assert.is(attemptsInRun([], 3), 0);
  assert.is(attemptsInRun(attempts(500, null), 3), 2);
  assert.is(attemptsInRun(attempts(500, 200), 3), 0);
  assert.is(attemptsInRun(attempts(500, 200, 500), 3), 1, 'redelivered after a success');
  assert.is(attemptsInRun(attempts(410, 500), 3), 1, 'redelivered after a 410');
  assert.is(attemptsInRun(attempts(500, 500, 500, 500), 3), 0, 'four failures spend a three-step schedule');
  assert.is(attemptsInRun(attempts(500, 500, 500, 500, 500, 503), 3), 2, 'redelivered after a failed run');
});

test('attemptsInRun passes over answers that held the webhook: a Retry-After spends no retry', () => {
  const held = { at: '2026-01-01T00:00:00+00:00', statusCode: 429, error: null, durationMs: 1, held: true as const };
  assert.is(attemptsInRun([...attempts(500), held, held, held, held], 3), 1);
  assert.is(attemptsInRun([held, ...attempts(500, 503)], 3), 2);
});

test("attemptsInRun passes over calls that never left the portal (local): an egress proxy's outage spends no retry", () => {
  const local = {
    at: '2026-01-01T00:00:00+00:00',
    statusCode: null,
    error: 'the proxy … could not open a tunnel',
    durationMs: 1,
    local: true as const,
  };
  assert.is(attemptsInRun([...attempts(500), local, local, local, local, local], 3), 1);
  assert.is(attemptsInRun([local, ...attempts(500, 500), local], 3), 2);
  assert.is(attemptsInRun([...attempts(500, 500, 500, 500), local], 3), 0, 'a spent run stays spent');
});

test.run();
