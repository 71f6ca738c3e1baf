import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  disableHealth,
  enableHealth,
  freshHealth,
  healthAfterAttempt,
  healthShape,
  heldAt,
  holdHealth,
} from '../../src/rules/webhook-health.js';
import { recoveredDelivery, undeliveredEvents } from '../../src/rules/deliveries.js';
import type { DeliveryRecord, DeliveryStatus } from '../../src/records.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString().slice(0, 19) + '+00:00';
const RULE = { disableAfterMs: 3600_000, disableAfterFailures: 3 };
const fresh = freshHealth({ id: 'wbh_1', accountId: 'acct_a' });
const attempt = (
  statusCode: number | null,
  seconds: number,
  error: string | null = statusCode === null ? 'refused' : null,
) => ({
  at: at(seconds),
  statusCode,
  error,
});

test('healthAfterAttempt: failures disable only once both thresholds hold, the time counted from the first of the run', () => {
  let health = fresh;
  const steps: [number | null, number, string | null][] = [
    [500, 0, null],
    [null, 10, null],
    [503, 20, null], // three in a row, but 20 s
    [500, 3599, null], // four, 3599 s
    [500, 3600, 'failing'],
    [500, 7200, null], // disabled already: no second transition
  ];
  for (const [statusCode, seconds, disabled] of steps) {
    const change = healthAfterAttempt(health, attempt(statusCode, seconds), RULE);
    assert.is(change.disabled, disabled, `at ${seconds} s`);
    assert.ok(change.changed);
    health = change.health;
  }
  assert.equal(health, {
    ...fresh,
    consecutiveFailures: 6,
    failingSince: at(0),
    lastAttemptAt: at(7200),
    disabledAt: at(3600),
    disabledReason: 'failing',
  });
});

test('healthAfterAttempt: a 410 disables at once; a success clears the run and never enables; an unchanged success reports no change', () => {
  const gone = healthAfterAttempt(fresh, attempt(410, 5), RULE);
  assert.equal(
    [gone.disabled, gone.health.disabledReason, gone.health.disabledAt, gone.health.consecutiveFailures],
    ['gone', 'gone', at(5), 1],
  );
  const after = healthAfterAttempt(gone.health, attempt(204, 6), RULE);
  assert.equal(after.health, {
    ...gone.health,
    consecutiveFailures: 0,
    failingSince: null,
    lastSuccessAt: at(6),
    lastAttemptAt: at(6),
  });
  assert.is(after.disabled, null);
  assert.is(healthAfterAttempt(after.health, attempt(200, 6), RULE).changed, false, 'the same second, the same state');
  assert.is(healthAfterAttempt(after.health, attempt(200, 7), RULE).changed, true);
  assert.is(
    healthAfterAttempt(gone.health, attempt(410, 9), RULE).disabled,
    null,
    'a disabled webhook is not disabled twice',
  );
});

test('disableHealth and enableHealth: null when nothing changes; enabling forgets the run of failures', () => {
  const failing = healthAfterAttempt(fresh, attempt(500, 0), RULE).health;
  const disabled = disableHealth(failing, at(1))!;
  assert.equal([disabled.disabledAt, disabled.disabledReason, disabled.consecutiveFailures], [at(1), 'manual', 1]);
  assert.is(disableHealth(disabled, at(2)), null);
  const enabled = enableHealth(disabled)!;
  assert.equal(enabled, { ...fresh, lastAttemptAt: at(0) });
  assert.is(enableHealth(enabled), null);
  assert.equal(healthShape(disabled, at(1), null), {
    status: 'disabled',
    disabledReason: 'manual',
    disabledAt: at(1),
    failingSince: at(0),
    lastSuccessAt: null,
    lastAttemptAt: at(0),
    consecutiveFailures: 1,
    heldUntil: null,
    rateLimit: null,
    inFlightLimit: null,
  });
  assert.is(healthShape(disabled, at(1), 20).rateLimit, 20);
});

test('holdHealth keeps the later hold; heldAt and the API show it only while it lasts', () => {
  const held = holdHealth(fresh, at(30))!;
  assert.is(held.heldUntil, at(30));
  assert.is(holdHealth(held, at(20)), null, 'an earlier hold changes nothing');
  assert.is(holdHealth(held, at(30)), null, 'the same hold changes nothing');
  assert.is(holdHealth(held, at(40))!.heldUntil, at(40));
  assert.is(heldAt(held, at(29)), at(30));
  assert.is(heldAt(held, at(30)), null, 'a hold ends at its time');
  assert.is(heldAt(undefined, at(0)), null);
  assert.is(healthShape(held, at(10), 5).heldUntil, at(30));
  assert.is(healthShape(held, at(31), null).heldUntil, null);
  // A record written before holds has no field: read as never held.
  const { heldUntil: _, ...older } = fresh;
  assert.is(heldAt(older as typeof fresh, at(0)), null);
  assert.is(holdHealth(older as typeof fresh, at(5))!.heldUntil, at(5));
});

test("undeliveredEvents: events whose deliveries all failed or were cancelled, with the latest delivery's time", () => {
  const delivery = (eventId: string, status: DeliveryStatus, seconds: number): DeliveryRecord => ({
    ...recoveredDelivery({ id: eventId, accountId: 'acct_a', type: 'agreement-signed' }, 'wbh_1', at(seconds)),
    status,
  });
  const missed = undeliveredEvents([
    delivery('evt_a', 'failed', 0),
    delivery('evt_a', 'cancelled', 50),
    delivery('evt_b', 'failed', 10),
    delivery('evt_b', 'succeeded', 60),
    delivery('evt_c', 'pending', 20),
    delivery('evt_d', 'cancelled', 30),
  ]);
  assert.equal(
    [...missed],
    [
      ['evt_a', at(50)],
      ['evt_d', at(30)],
    ],
  );
});

test.run();
