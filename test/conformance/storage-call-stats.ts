import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { LATENCY_BINS, hourOf } from '../../src/rules/call-stats.js';
import type { HealthRule, Storage } from '../../src/ports.js';
import type { CallStatsHour, DeliveryAttempt } from '../../src/records.js';
import type { StorageFactory } from './types.js';
import { at, eventRecord, webhookRecord } from './fixtures.js';
import { reopenable } from './reopen.js';
import { withStorage } from './with-storage.js';
import { notRecorded } from '../helpers/attempts.js';

const RULE: HealthRule = { disableAfterMs: 60_000, disableAfterFailures: 100 };

const call = (seconds: number, statusCode: number | null, durationMs: number): DeliveryAttempt => ({
  at: at(seconds),
  statusCode,
  error: statusCode === null ? 'timed out after 10000 ms' : null,
  durationMs,
});

/** An hour as the store should count it: outcomes, and calls by duration bin. */
function hour(
  seconds: number,
  counts: { succeeded?: number; failed?: number; errors?: number },
  bins: Record<number, number>,
): CallStatsHour {
  const latency = new Array<number>(LATENCY_BINS).fill(0);
  for (const [bin, count] of Object.entries(bins)) latency[Number(bin)] = count;
  return {
    hour: hourOf(at(seconds)),
    succeeded: counts.succeeded ?? 0,
    failed: counts.failed ?? 0,
    errors: counts.errors ?? 0,
    latency,
  };
}

/** Publishes `count` events to `webhook`'s type and leases their deliveries to worker-1. */
async function leased(storage: Storage, count: number, seconds: number) {
  const made = await storage.publishEvents(
    Array.from({ length: count }, () => eventRecord({ createdAt: at(seconds) })),
  );
  await storage.claimDeliveries({ now: at(seconds), leaseUntil: at(seconds + 7200), limit: 100, owner: 'worker-1' });
  return made;
}

export function callStatsStorageTests(test: Test, factory: StorageFactory): void {
  test(
    "call stats: each recorded attempt counted in its webhook's hour, by outcome and duration, whichever way it was recorded",
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [plain, withHealth, batched, refused, lost] = await leased(storage, 5, 0);
      // Plain, with the health rule, and as a success of the batched path (a delivery the store claimed, with health).
      await storage.recordAttempt({
        id: plain!.id,
        owner: 'worker-1',
        attempt: call(10, 200, 30),
        outcome: {
          status: 'succeeded',
          nextAttemptAt: null,
        },
      });
      await storage.recordAttempt({
        id: withHealth!.id,
        owner: 'worker-1',
        attempt: call(20, 500, 300),
        outcome: { status: 'pending', nextAttemptAt: at(3000) },
        health: RULE,
      });
      await storage.recordAttempt({
        id: batched!.id,
        owner: 'worker-1',
        attempt: call(30, 204, 50),
        outcome: { status: 'succeeded', nextAttemptAt: null },
        health: RULE,
      });
      await storage.recordAttempt({
        id: refused!.id,
        owner: 'worker-1',
        attempt: call(3700, null, 6000),
        outcome: { status: 'pending', nextAttemptAt: at(9000) },
        health: RULE,
      });
      // An attempt whose lease was lost records nothing, and counts nothing.
      assert.equal(
        await storage.recordAttempt({
          id: lost!.id,
          owner: 'worker-2',
          attempt: call(40, 200, 10),
          outcome: {
            status: 'succeeded',
            nextAttemptAt: null,
          },
        }),
        notRecorded,
      );

      assert.equal(await storage.callStats('acct_a', webhook.id, hourOf(at(0))), [
        hour(0, { succeeded: 2, failed: 1 }, { 0: 2, 3: 1 }),
        hour(3600, { errors: 1 }, { 7: 1 }),
      ]);
      assert.equal(
        await storage.callStats('acct_a', webhook.id, hourOf(at(3600))),
        [hour(3600, { errors: 1 }, { 7: 1 })],
        'from the hour asked',
      );
      assert.equal(await storage.callStats('acct_b', webhook.id, hourOf(at(0))), [], "not another account's");

      // The retry of the delivery that failed adds to the hour it is made in.
      await storage.claimDeliveries({ now: at(3000), leaseUntil: at(3100), limit: 10, owner: 'worker-1' });
      await storage.recordAttempt({
        id: withHealth!.id,
        owner: 'worker-1',
        attempt: call(3010, 200, 120),
        outcome: { status: 'succeeded', nextAttemptAt: null },
        health: RULE,
      });
      assert.equal(await storage.callStats('acct_a', webhook.id, hourOf(at(0))), [
        hour(0, { succeeded: 3, failed: 1 }, { 0: 2, 2: 1, 3: 1 }),
        hour(3600, { errors: 1 }, { 7: 1 }),
      ]);
    }),
  );

  test(
    "call stats and health: a broker's acknowledgement (no status, no error) is a success, a broker's refusal an error",
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [acknowledged, refused] = await leased(storage, 2, 0);
      await storage.recordAttempt({
        id: refused!.id,
        owner: 'worker-1',
        attempt: { at: at(10), statusCode: null, error: 'the broker refused the message', durationMs: 3 },
        outcome: { status: 'pending', nextAttemptAt: at(3000) },
        health: RULE,
      });
      await storage.recordAttempt({
        id: acknowledged!.id,
        owner: 'worker-1',
        attempt: { at: at(20), statusCode: null, error: null, durationMs: 2 },
        outcome: { status: 'succeeded', nextAttemptAt: null },
        health: RULE,
      });
      assert.equal(await storage.callStats('acct_a', webhook.id, hourOf(at(0))), [
        hour(0, { succeeded: 1, errors: 1 }, { 0: 2 }),
      ]);
      const health = await storage.getWebhookHealth('acct_a', webhook.id);
      assert.is(health?.lastSuccessAt, at(20), 'the acknowledgement is the last success');
      assert.is(health?.consecutiveFailures, 0, 'and ends the run of failures');
    }),
  );

  test(
    'call stats: a delivery past the 50 attempts it keeps still counts every one',
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [delivery] = await leased(storage, 1, 0);
      for (let i = 0; i < 55; i++) {
        if (i > 0)
          await storage.claimDeliveries({ now: at(i * 10), leaseUntil: at(i * 10 + 5), limit: 10, owner: 'worker-1' });
        await storage.recordAttempt({
          id: delivery!.id,
          owner: 'worker-1',
          attempt: call(i * 10 + 1, 503, 30),
          outcome: {
            status: 'pending',
            nextAttemptAt: at(i * 10 + 10),
          },
        });
      }
      assert.is((await storage.getDelivery('acct_a', delivery!.id))!.attemptCount, 55);
      assert.equal(await storage.callStats('acct_a', webhook.id, hourOf(at(0))), [hour(0, { failed: 55 }, { 0: 55 })]);
    }),
  );

  test(
    'call stats: many successes of one hour recorded at once count each',
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const made = await leased(storage, 12, 100);
      await Promise.all(
        made.map((delivery, i) =>
          storage.recordAttempt({
            id: delivery.id,
            owner: 'worker-1',
            attempt: call(100 + i, 200, 20 * i),
            outcome: { status: 'succeeded', nextAttemptAt: null },
            health: RULE,
          }),
        ),
      );
      const [counted] = await storage.callStats('acct_a', webhook.id, hourOf(at(0)));
      assert.is(counted!.succeeded, 12);
      assert.equal(
        counted!.latency.reduce((sum, n) => sum + n, 0),
        12,
      );
      assert.equal(counted!.latency.slice(0, 4), [3, 3, 6, 0], '0–220 ms: up to 50, 100, 250, 500 ms');
    }),
  );

  test(
    'call stats: hours more than eight days behind the latest are dropped, by the retention tick at the latest, whatever the retention',
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [old] = await leased(storage, 1, 0);
      await storage.recordAttempt({
        id: old!.id,
        owner: 'worker-1',
        attempt: call(10, 200, 30),
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      const later = 9 * 24 * 3600;
      const [recent] = await leased(storage, 1, later);
      await storage.recordAttempt({
        id: recent!.id,
        owner: 'worker-1',
        attempt: call(later + 10, 200, 30),
        outcome: {
          status: 'succeeded',
          nextAttemptAt: null,
        },
      });
      // Retention of Infinity for both: the tick still calls removeExpired with two nulls.
      assert.equal(await storage.removeExpired({ deliveries: null, events: null }, 500), { deliveries: 0, events: 0 });
      assert.equal(
        (await storage.callStats('acct_a', webhook.id, hourOf(at(0)))).map((hour) => hour.hour),
        [hourOf(at(later))],
      );
    }),
  );

  reopenable(test, factory)(
    'call stats: the counts survive a reopen',
    withStorage(factory, async (storage, { swap }) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [first, second] = await leased(storage, 2, 0);
      await storage.recordAttempt({
        id: first!.id,
        owner: 'worker-1',
        attempt: call(5, 200, 40),
        outcome: { status: 'succeeded', nextAttemptAt: null },
        health: RULE,
      });
      await storage.recordAttempt({
        id: second!.id,
        owner: 'worker-1',
        attempt: call(6, 503, 700),
        outcome: { status: 'pending', nextAttemptAt: at(600) },
        health: RULE,
      });
      const before = await storage.callStats('acct_a', webhook.id, hourOf(at(0)));
      const reopened = await swap();
      assert.equal(await reopened.callStats('acct_a', webhook.id, hourOf(at(0))), before);
      assert.equal(before, [hour(0, { succeeded: 1, failed: 1 }, { 0: 1, 4: 1 })]);
    }),
  );
}
