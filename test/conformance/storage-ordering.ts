import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Storage } from '../../src/ports.js';
import type { DeliveryRecord } from '../../src/records.js';
import type { StorageFactory } from './types.js';
import { at, attempt, eventRecord, webhookRecord } from './fixtures.js';
import { reopenable } from './reopen.js';
import { withStorage } from './with-storage.js';
import { recorded } from '../helpers/attempts.js';

const claim = async (storage: Storage, now: number, owner = 'worker-1') =>
  (await storage.claimDeliveries({ now: at(now), leaseUntil: at(now + 60), limit: 50, owner })).map(
    ({ delivery }) => delivery,
  );

/** Publishes one event with `orderingKey` (none: `undefined`) at `second`; resolves its deliveries by webhook id. */
async function publish(
  storage: Storage,
  second: number,
  orderingKey?: string,
  accountId = 'acct_a',
): Promise<Map<string, DeliveryRecord>> {
  const event = eventRecord({ accountId, createdAt: at(second), data: { second } });
  if (orderingKey !== undefined) event.orderingKey = orderingKey;
  return new Map((await storage.publishEvents([event])).map((delivery) => [delivery.webhookId, delivery]));
}

const ok = (second: number) => attempt(200, second);
const succeeded = { status: 'succeeded' as const, nextAttemptAt: null };
const retryAt = (second: number) => ({ status: 'pending' as const, nextAttemptAt: at(second) });
const ids = (deliveries: DeliveryRecord[]) => deliveries.map((delivery) => delivery.id).sort();
const keyed = (claimed: DeliveryRecord[], key: string) => claimed.filter((delivery) => delivery.orderingKey === key);

export function orderingStorageTests(test: Test, factory: StorageFactory): void {
  test(
    "ordering: of one webhook's deliveries that share a key, one at a time in publish order; other keys, unkeyed ones and other webhooks go on",
    withStorage(factory, async (storage, { db }) => {
      const one = webhookRecord();
      const two = webhookRecord({ url: 'https://two.example/hook' });
      for (const webhook of [one, two]) await storage.insertWebhook(webhook);
      const a1 = await publish(storage, 0, 'cus_a');
      const a2 = await publish(storage, 0, 'cus_a');
      const b1 = await publish(storage, 1, 'cus_b');
      const free = await publish(storage, 1);
      const a3 = await publish(storage, 2, 'cus_a');
      const waiting = (await db.delivery(a2.get(one.id)!.id))!;
      assert.equal(
        [waiting.status, waiting.nextAttemptAt, waiting.orderingKey],
        ['pending', null, 'cus_a'],
        'held: pending, no next attempt',
      );
      assert.equal(
        [a1.get(one.id)!.nextAttemptAt, a2.get(one.id)!.nextAttemptAt],
        [at(0), null],
        'publishEvents answers as stored',
      );

      const first = await claim(storage, 5);
      const expected = [a1, b1, free].flatMap((made) => [made.get(one.id)!, made.get(two.id)!]);
      assert.equal(ids(first), ids(expected), 'the first of cus_a, cus_b and the unkeyed one, for each webhook');

      // cus_a of webhook one fails and waits for its retry: only that key of that webhook waits.
      const a1one = a1.get(one.id)!.id;
      assert.equal(
        await storage.recordAttempt({ id: a1one, owner: 'worker-1', attempt: attempt(500, 6), outcome: retryAt(30) }),
        recorded(),
      );
      assert.equal(
        await storage.recordAttempt({ id: a1.get(two.id)!.id, owner: 'worker-1', attempt: ok(6), outcome: succeeded }),
        recorded(),
      );
      const b2 = await publish(storage, 7, 'cus_b');
      assert.is(b2.get(one.id)!.nextAttemptAt, null, 'cus_b of webhook one: its first is still in flight');
      const second = await claim(storage, 8);
      assert.equal(
        ids(second),
        ids([a2.get(two.id)!]),
        "webhook two goes on with cus_a; nothing of webhook one's cus_a",
      );
      assert.equal(keyed(await claim(storage, 20), 'cus_a'), [], 'a retry not yet due holds its key back');

      // The retry succeeds: the next of the key is due as the call ended, the one after still held.
      const [retried] = await claim(storage, 30);
      assert.is(retried!.id, a1one);
      assert.equal(
        await storage.recordAttempt({
          id: a1one,
          owner: 'worker-1',
          attempt: { ...ok(31), durationMs: 1500 },
          outcome: succeeded,
        }),
        recorded(),
      );
      const released = (await db.delivery(a2.get(one.id)!.id))!;
      assert.equal([released.status, released.nextAttemptAt], ['pending', at(32)], 'released: due as the call ended');
      assert.is((await db.delivery(a3.get(one.id)!.id))!.nextAttemptAt, null);
      assert.equal(ids(keyed(await claim(storage, 33), 'cus_a')), ids([a2.get(one.id)!]));
      // A delivery that fails for good ends its turn too.
      assert.equal(
        await storage.recordAttempt({
          id: a2.get(one.id)!.id,
          owner: 'worker-1',
          attempt: attempt(410, 34),
          outcome: {
            status: 'failed',
            nextAttemptAt: null,
          },
        }),
        recorded(),
      );
      assert.equal(ids(keyed(await claim(storage, 35), 'cus_a')), ids([a3.get(one.id)!]));
    }),
  );

  test(
    "ordering: a key is one webhook's and one account's: the same key elsewhere does not wait",
    withStorage(factory, async (storage) => {
      const ofA = webhookRecord();
      const ofB = webhookRecord({ accountId: 'acct_b' });
      for (const webhook of [ofA, ofB]) await storage.insertWebhook(webhook);
      await publish(storage, 0, 'shared');
      const [made] = (await publish(storage, 0, 'shared', 'acct_b')).values();
      assert.is(made!.nextAttemptAt, at(0));
      assert.is((await claim(storage, 1)).length, 2);
    }),
  );

  test(
    'ordering: one publish of several events of a key holds all but the first',
    withStorage(factory, async (storage) => {
      await storage.insertWebhook(webhookRecord());
      const events = [0, 1, 2].map((n) => ({ ...eventRecord({ createdAt: at(0), data: { n } }), orderingKey: 'k' }));
      const made = await storage.publishEvents(events);
      assert.equal(
        made.map((delivery) => delivery.nextAttemptAt),
        [at(0), null, null],
      );
      assert.equal(ids(await claim(storage, 1)), ids([made[0]!]));
      await storage.recordAttempt({ id: made[0]!.id, owner: 'worker-1', attempt: ok(1), outcome: succeeded });
      assert.equal(ids(await claim(storage, 2)), ids([made[1]!]), 'in the order given');
    }),
  );

  test(
    "ordering: a redeliver while another has the key's turn waits, then goes before the later held ones",
    withStorage(factory, async (storage, { db }) => {
      await storage.insertWebhook(webhookRecord());
      const [first] = (await publish(storage, 0, 'k')).values();
      await claim(storage, 1);
      await storage.recordAttempt({ id: first!.id, owner: 'worker-1', attempt: ok(1), outcome: succeeded });
      const [second] = (await publish(storage, 2, 'k')).values();
      const [third] = (await publish(storage, 3, 'k')).values();
      await claim(storage, 4);
      await storage.recordAttempt({
        id: second!.id,
        owner: 'worker-1',
        attempt: attempt(503, 4),
        outcome: retryAt(100),
      });
      const again = (await storage.redeliver('acct_a', first!.id, at(5)))!;
      assert.equal(
        [again.status, again.nextAttemptAt],
        ['pending', null],
        "held behind the key's turn (the second, retrying)",
      );
      assert.equal(await claim(storage, 6), []);
      const held = (await storage.redeliver('acct_a', third!.id, at(7)))!;
      assert.equal([held.status, held.nextAttemptAt], ['pending', null], 'a held one redelivered stays held');
      const brought = (await storage.redeliver('acct_a', second!.id, at(8)))!;
      assert.is(brought.nextAttemptAt, at(8), "the key's turn, redelivered, is brought forward");
      assert.equal(ids(await claim(storage, 8)), ids([second!]));
      await storage.recordAttempt({ id: second!.id, owner: 'worker-1', attempt: ok(9), outcome: succeeded });
      assert.equal(ids(await claim(storage, 10)), ids([first!]), 'the redelivered one, made first, goes next');
      await storage.recordAttempt({ id: first!.id, owner: 'worker-1', attempt: ok(11), outcome: succeeded });
      assert.equal(ids(await claim(storage, 12)), ids([third!]));
      assert.equal((await db.delivery(first!.id))!.attemptCount, 2);
    }),
  );

  test(
    "ordering: a redeliver queued behind the key's call in flight keeps the turn: the next held one waits for it",
    withStorage(factory, async (storage) => {
      await storage.insertWebhook(webhookRecord());
      const [first] = (await publish(storage, 0, 'k')).values();
      const [second] = (await publish(storage, 0, 'k')).values();
      await claim(storage, 1);
      assert.ok((await storage.redeliver('acct_a', first!.id, at(2)))!.redeliverQueued);
      assert.equal(
        await storage.recordAttempt({ id: first!.id, owner: 'worker-1', attempt: ok(2), outcome: succeeded }),
        recorded({ dueAgain: true }),
      );
      assert.equal(ids(await claim(storage, 3)), ids([first!]), 'the first again, not the second');
      await storage.recordAttempt({ id: first!.id, owner: 'worker-1', attempt: ok(3), outcome: succeeded });
      assert.equal(ids(await claim(storage, 4)), ids([second!]));
    }),
  );

  test(
    "ordering: a disabled webhook's key is cancelled whole at its turn; a deleted one's with the rest",
    withStorage(factory, async (storage, { db }) => {
      const disabled = webhookRecord();
      const deleted = webhookRecord({ url: 'https://deleted.example/hook' });
      for (const webhook of [disabled, deleted]) await storage.insertWebhook(webhook);
      const made = [await publish(storage, 0, 'k'), await publish(storage, 1, 'k'), await publish(storage, 2, 'k')];
      await storage.disableWebhook('acct_a', disabled.id, at(3));
      await storage.deleteWebhook('acct_a', deleted.id);
      assert.equal(await claim(storage, 4), []);
      for (const deliveries of made) {
        assert.is((await db.delivery(deliveries.get(disabled.id)!.id))!.status, 'cancelled');
        assert.is((await db.delivery(deliveries.get(deleted.id)!.id))!.status, 'cancelled');
      }
    }),
  );

  test(
    "ordering: a webhook disabled while its key's turn waits for a retry keeps the held ones; enabled again, the key goes on",
    withStorage(factory, async (storage, { db }) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [first] = (await publish(storage, 0, 'k')).values();
      const [second] = (await publish(storage, 0, 'k')).values();
      await claim(storage, 1);
      await storage.recordAttempt({
        id: first!.id,
        owner: 'worker-1',
        attempt: attempt(503, 1),
        outcome: retryAt(100),
      });
      await storage.disableWebhook('acct_a', webhook.id, at(2));
      assert.equal(await claim(storage, 50), [], 'nothing due: nothing cancelled');
      assert.equal(
        [(await db.delivery(second!.id))!.status, (await db.delivery(second!.id))!.nextAttemptAt],
        ['pending', null],
        'still held',
      );
      await storage.enableWebhook('acct_a', webhook.id);
      assert.equal(ids(await claim(storage, 100)), ids([first!]));
      await storage.recordAttempt({ id: first!.id, owner: 'worker-1', attempt: ok(100), outcome: succeeded });
      assert.equal(ids(await claim(storage, 101)), ids([second!]));
    }),
  );

  test(
    "ordering: recovered deliveries take their place behind the key's pending ones, oldest event first",
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [lost1] = (await publish(storage, 0, 'k')).values();
      const [lost2] = (await publish(storage, 1, 'k')).values();
      await claim(storage, 1);
      await storage.recordAttempt({
        id: lost1!.id,
        owner: 'worker-1',
        attempt: attempt(410, 1),
        outcome: { status: 'failed', nextAttemptAt: null },
      });
      await claim(storage, 2);
      await storage.recordAttempt({
        id: lost2!.id,
        owner: 'worker-1',
        attempt: attempt(410, 2),
        outcome: { status: 'failed', nextAttemptAt: null },
      });
      const [pendingNow] = (await publish(storage, 3, 'k')).values();
      const recovered = (await storage.recoverDeliveries('acct_a', webhook.id, at(0), at(4)))!;
      assert.equal(
        recovered.map((delivery) => [delivery.eventId, delivery.nextAttemptAt]),
        [
          [lost1!.eventId, null],
          [lost2!.eventId, null],
        ],
      );
      assert.equal(ids(await claim(storage, 5)), ids([pendingNow!]));
      await storage.recordAttempt({ id: pendingNow!.id, owner: 'worker-1', attempt: ok(5), outcome: succeeded });
      assert.equal(
        (await claim(storage, 6)).map((delivery) => delivery.eventId),
        [lost1!.eventId],
      );
    }),
  );

  reopenable(test, factory)(
    "ordering: held deliveries and the key's order survive a reopen",
    withStorage(factory, async (storage, { swap }) => {
      await storage.insertWebhook(webhookRecord());
      const made = [];
      for (let n = 0; n < 4; n++) made.push(...(await publish(storage, 0, 'k')).values());
      await claim(storage, 1);
      const reopened = await swap();
      assert.equal(await claim(reopened, 2, 'worker-2'), [], 'the turn is leased, the rest held');
      await reopened.recordAttempt({ id: made[0]!.id, owner: 'worker-1', attempt: ok(2), outcome: succeeded });
      for (const next of made.slice(1)) {
        const [taken] = await claim(reopened, 3, 'worker-2');
        assert.is(taken?.id, next.id);
        await reopened.recordAttempt({ id: next.id, owner: 'worker-2', attempt: ok(3), outcome: succeeded });
      }
    }),
  );
}
