import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeliveryAttempt } from '../../src/records.js';
import {
  attemptsInRun,
  MAX_RETRY_AFTER_SECONDS,
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
    outcomeOf({ statusCode: 500, headers: {} }, 0, schedule, NOW, () => 0),
    { status: 'pending', nextAttemptAt: after(90) },
  );
  assert.equal(
    outcomeOf({ statusCode: 500, headers: {} }, 0, schedule, NOW, () => 0.5),
    { status: 'pending', nextAttemptAt: after(100) },
  );
  assert.equal(
    outcomeOf({ statusCode: null, headers: {} }, 1, schedule, NOW, () => 0.999999),
    { status: 'pending', nextAttemptAt: after(1100) },
  );
  assert.equal(outcomeOf({ statusCode: 500, headers: {} }, 2, schedule, NOW), {
    status: 'failed',
    nextAttemptAt: null,
  });
});

test('2xx succeeds, 410 fails at once, any other status or none is retried', () => {
  for (const code of [200, 201, 204, 299])
    assert.is(outcomeOf({ statusCode: code, headers: {} }, 0, [5], NOW).status, 'succeeded');
  assert.is(outcomeOf({ statusCode: 410, headers: {} }, 0, [5], NOW).status, 'failed');
  for (const code of [null, 199, 301, 400, 404, 429, 500, 503])
    assert.is(outcomeOf({ statusCode: code, headers: {} }, 0, [5], NOW).status, 'pending');
  assert.is(outcomeOf({ statusCode: 500, headers: {} }, 0, [], NOW).status, 'failed', 'an empty schedule: one attempt');
});

test('Retry-After on 429 and 503 only, when longer, capped at a day (or the longest step)', () => {
  const at = (statusCode: number, value: string, schedule = [10]) =>
    outcomeOf({ statusCode, headers: { 'retry-after': value } }, 0, schedule, NOW, () => 0.5).nextAttemptAt;
  assert.is(at(429, '600'), after(600));
  assert.is(at(503, '600'), after(600));
  assert.is(at(500, '600'), after(10));
  assert.is(at(429, '3'), after(10));
  assert.is(at(429, 'soon'), after(10));
  assert.is(at(429, '99999999'), after(MAX_RETRY_AFTER_SECONDS));
  assert.is(at(429, '99999999', [10, 200_000]), after(200_000));
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
