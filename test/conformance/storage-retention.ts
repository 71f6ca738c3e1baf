import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Storage } from '../../src/ports.js';
import type { DeliveryRecord } from '../../src/records.js';
import { at, attempt, eventRecord, webhookRecord } from './fixtures.js';
import { reopenable } from './reopen.js';
import type { StorageFactory } from './types.js';
import { withStorage } from './with-storage.js';
import { everyDelivery } from '../helpers/every-delivery.js';

/**
 * A store that removes whole generations (`rotateHistory`) starts one at `seconds`, a minute long:
 * what it holds from then on can be removed apart from what came before. A store that removes
 * records one by one has nothing to do.
 */
const nextGeneration = (storage: Storage, seconds: number) => storage.rotateHistory?.(at(seconds), 60_000);

/** A webhook, and one event a minute for `count` minutes, each with its delivery (and generation). */
async function minutely(storage: Storage, count: number) {
  const webhook = webhookRecord();
  await storage.insertWebhook(webhook);
  const deliveries: DeliveryRecord[] = [];
  for (let i = 0; i < count; i++) {
    await nextGeneration(storage, i * 60);
    deliveries.push(...(await storage.publishEvents([eventRecord({ createdAt: at(i * 60) })])));
  }
  return { webhook, deliveries };
}

/** Claims the deliveries and records each as `status` (a success, or a final failure). */
async function finish(storage: Storage, deliveries: DeliveryRecord[], status: 'succeeded' | 'failed', now = 100_000) {
  const claimed = await storage.claimDeliveries({ now: at(now), leaseUntil: at(now + 60), limit: 1000, owner: 'w' });
  const wanted = new Set(deliveries.map((delivery) => delivery.id));
  for (const { delivery } of claimed) {
    if (wanted.has(delivery.id)) {
      await storage.recordAttempt({
        id: delivery.id,
        owner: 'w',
        attempt: attempt(status === 'succeeded' ? 200 : 500, now),
        outcome: {
          status,
          nextAttemptAt: null,
        },
      });
    } else {
      // Not meant to finish: made due again later, still pending.
      await storage.recordAttempt({
        id: delivery.id,
        owner: 'w',
        attempt: attempt(503, now),
        outcome: {
          status: 'pending',
          nextAttemptAt: at(now + 3600),
        },
      });
    }
  }
}

export function retentionStorageTests(test: Test, factory: StorageFactory): void {
  test(
    'retention: finished deliveries before the time go, oldest first, a batch at a time; a pending one stays however old',
    withStorage(factory, async (storage, { db }) => {
      const { webhook, deliveries } = await minutely(storage, 10);
      // The oldest stays pending (retried), the others finish.
      await finish(storage, deliveries.slice(1), 'succeeded');
      const first = await storage.removeExpired({ deliveries: at(8 * 60), events: null }, 4);
      assert.equal(first, { deliveries: 4, events: 0 });
      const listed = (await everyDelivery(storage, 'acct_a', webhook.id)).map((delivery) => delivery.id);
      assert.equal(
        listed,
        [9, 8, 7, 6, 5, 0].map((index) => deliveries[index]!.id),
      );
      assert.is(await db.delivery(deliveries[1]!.id), null, 'gone from the store itself');
      assert.is(await storage.getDelivery('acct_a', deliveries[4]!.id), null);
      assert.equal(
        await storage.removeExpired({ deliveries: at(8 * 60), events: null }, 4),
        { deliveries: 3, events: 0 },
        'the rest before the time',
      );
      assert.equal(await storage.removeExpired({ deliveries: at(8 * 60), events: null }, 4), {
        deliveries: 0,
        events: 0,
      });
      assert.is((await storage.getDelivery('acct_a', deliveries[0]!.id))!.status, 'pending', 'pending: kept');
      assert.ok(await db.event(deliveries[0]!.eventId), 'and so is its event');
    }),
  );

  test(
    'retention: an event goes once no delivery names it; one without a webhook goes at its time',
    withStorage(factory, async (storage, { db }) => {
      const { deliveries } = await minutely(storage, 4);
      await nextGeneration(storage, 4 * 60);
      const lonely = eventRecord({ type: 'agreement-signed', createdAt: at(4 * 60 + 30) });
      assert.equal(await storage.publishEvents([lonely]), [], 'no webhook of its type');
      await nextGeneration(storage, 5 * 60);
      await finish(storage, deliveries.slice(0, 3), 'failed');
      // Events past their time, deliveries kept longer: only the lonely event goes.
      assert.equal(await storage.removeExpired({ deliveries: null, events: at(10_000) }, 100), {
        deliveries: 0,
        events: 1,
      });
      assert.is(await db.event(lonely.id), null);
      for (const delivery of deliveries) assert.ok(await db.event(delivery.eventId), 'a delivery names it');
      // Both past their time: the finished deliveries, then their events; the pending one and its event stay.
      assert.equal(await storage.removeExpired({ deliveries: at(10_000), events: at(10_000) }, 100), {
        deliveries: 3,
        events: 3,
      });
      assert.ok(await db.event(deliveries[3]!.eventId));
      assert.ok(await storage.getDelivery('acct_a', deliveries[3]!.id));
      // A delivery made pending again by a redeliver is not finished any more.
      await finish(storage, [deliveries[3]!], 'succeeded', 200_000);
      await storage.redeliver('acct_a', deliveries[3]!.id, at(200_100));
      assert.equal(await storage.removeExpired({ deliveries: at(10_000), events: at(10_000) }, 100), {
        deliveries: 0,
        events: 0,
      });
    }),
  );

  test(
    'retention: two passes at once remove each record once',
    withStorage(factory, async (storage) => {
      const { deliveries } = await minutely(storage, 30);
      await nextGeneration(storage, 30 * 60);
      await finish(storage, deliveries, 'succeeded');
      const passes = await Promise.all(
        [0, 1, 2].map(() => storage.removeExpired({ deliveries: at(100_000), events: at(100_000) }, 7)),
      );
      const more = await storage.removeExpired({ deliveries: at(100_000), events: at(100_000) }, 100);
      const total = [...passes, more].reduce(
        (sum, pass) => ({ deliveries: sum.deliveries + pass.deliveries, events: sum.events + pass.events }),
        {
          deliveries: 0,
          events: 0,
        },
      );
      assert.equal(total, { deliveries: 30, events: 30 });
    }),
  );

  test(
    'retention: a page whose cursor names a removed delivery goes on from the one before it',
    withStorage(factory, async (storage) => {
      const { webhook, deliveries } = await minutely(storage, 6);
      await finish(storage, deliveries, 'succeeded');
      const page = await storage.listDeliveries('acct_a', webhook.id, { limit: 3 });
      assert.equal(
        page.deliveries.map((delivery) => delivery.id),
        [deliveries[5]!.id, deliveries[4]!.id, deliveries[3]!.id],
      );
      await storage.removeExpired({ deliveries: at(4 * 60), events: null }, 100);
      const next = await storage.listDeliveries('acct_a', webhook.id, { limit: 3, after: page.next! });
      assert.equal(
        next.deliveries.map((delivery) => delivery.id),
        [],
        'the three before it were removed too',
      );
    }),
  );

  reopenable(test, factory)(
    'retention: what a pass removed stays removed in a reopened store',
    withStorage(factory, async (storage, { swap }) => {
      const { webhook, deliveries } = await minutely(storage, 5);
      await finish(storage, deliveries.slice(0, 3), 'succeeded');
      await storage.removeExpired({ deliveries: at(100_000), events: at(100_000) }, 100);
      const reopened = await swap();
      assert.equal(
        (await everyDelivery(reopened, 'acct_a', webhook.id)).map((delivery) => delivery.id),
        [deliveries[4]!.id, deliveries[3]!.id],
      );
      assert.equal(await reopened.removeExpired({ deliveries: at(100_000), events: at(100_000) }, 100), {
        deliveries: 0,
        events: 0,
      });
    }),
  );
}
