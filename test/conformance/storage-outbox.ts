import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { isPortalError } from '../../src/errors.js';
import type { Claim, Storage, WebhookTransport } from '../../src/ports.js';
import type { ClaimedDelivery, DeliveryRecord, EventRecord, WebhookRecord } from '../../src/records.js';
import { silentLogger } from '../../src/shared/logger.js';
import { createWebhookWorker } from '../../src/webhooks/worker.js';
import type { StorageFactory } from './types.js';
import { at, attempt, eventRecord, webhookRecord } from './fixtures.js';
import { reopenable } from './reopen.js';
import { withStorage } from './with-storage.js';
import { everyDelivery } from '../helpers/every-delivery.js';
import { notRecorded, recorded } from '../helpers/attempts.js';

/** A webhook of account A for `customer-created`, and `count` events of it published `spacing` seconds apart. */
async function published(storage: Storage, count: number, spacing = 1): Promise<DeliveryRecord[]> {
  const webhook = webhookRecord();
  await storage.insertWebhook(webhook);
  const deliveries: DeliveryRecord[] = [];
  for (let i = 0; i < count; i++)
    deliveries.push(...(await storage.publishEvents([eventRecord({ createdAt: at(i * spacing) })])));
  return deliveries;
}

const claim = (storage: Storage, now: number, limit = 10, owner = 'worker-1', lease = 60) =>
  storage.claimDeliveries({ now: at(now), leaseUntil: at(now + lease), limit, owner });

/** Polls `check` until it holds: for work a worker does on its own after `poke()`. */
async function until(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export function outboxStorageTests(test: Test, factory: StorageFactory): void {
  test(
    'outbox: with a target, an event makes one delivery to that webhook alone, whatever its type',
    withStorage(factory, async (storage, { db }) => {
      const target = webhookRecord({ type: 'agreement-signed' });
      const sameType = webhookRecord({ type: 'webhook.test' });
      const otherAccount = webhookRecord({ accountId: 'acct_b' });
      for (const webhook of [target, sameType, otherAccount]) await storage.insertWebhook(webhook);
      const event = eventRecord({ type: 'webhook.test', createdAt: at(5) });
      const [delivery, ...rest] = await storage.publishEvents([event], { webhookId: target.id });
      assert.equal(rest, []);
      assert.equal(
        [delivery!.webhookId, delivery!.eventId, delivery!.status, delivery!.nextAttemptAt],
        [target.id, event.id, 'pending', at(5)],
      );
      assert.equal(await db.delivery(delivery!.id), delivery);
      assert.equal(await everyDelivery(storage, 'acct_a', sameType.id), [], 'no other webhook gets it');
      assert.equal(
        await storage.publishEvents([eventRecord({ type: 'webhook.test' })], { webhookId: otherAccount.id }),
        [],
        'not to another account',
      );
    }),
  );

  test(
    'outbox: a webhook with a filter gets deliveries of the events whose data it matches; a targeted publish ignores it',
    withStorage(factory, async (storage, { db }) => {
      const gold = webhookRecord({ filter: { 'customer.tier': 'gold', 'customer.tags': { $in: ['vip'] } } });
      const every = webhookRecord({ url: 'https://every.example/hook' });
      for (const webhook of [gold, every]) await storage.insertWebhook(webhook);
      assert.equal(await db.webhook(gold.id), gold, 'the filter is stored as given');
      assert.equal((await storage.getWebhook('acct_a', gold.id))!.filter, gold.filter);
      const tiers = ['gold', 'silver', undefined, 'gold'];
      const events = tiers.map((tier, i) =>
        eventRecord({ createdAt: at(i), data: { customer: { tier, tags: i === 3 ? [] : ['vip'] } } }),
      );
      const made = await storage.publishEvents(events);
      assert.equal(
        made.filter((delivery) => delivery.webhookId === gold.id).map((delivery) => delivery.eventId),
        [events[0]!.id],
        'gold and vip only: a missing tier, another tier, or no vip tag make no delivery',
      );
      assert.is(
        made.filter((delivery) => delivery.webhookId === every.id).length,
        4,
        'a webhook without a filter gets every one',
      );
      const [test] = await storage.publishEvents(
        [eventRecord({ type: 'webhook.test', data: { webhookId: gold.id } })],
        { webhookId: gold.id },
      );
      assert.is(test?.webhookId, gold.id, 'a test call goes whatever the filter');
    }),
  );

  test(
    'outbox: updateWebhook changes who gets the next publishes and the rate limit, keeps the rest of the webhook, and is of one account',
    withStorage(factory, async (storage, { db }) => {
      const first = webhookRecord({ createdAt: at(0) });
      const second = webhookRecord({ createdAt: at(0), url: 'https://second.example/hook' });
      for (const webhook of [first, second]) await storage.insertWebhook(webhook);
      const filter = { amount: { $gte: 100 }, $not: { currency: 'USD' } };
      const changed = await storage.updateWebhook('acct_a', first.id, { filter }, at(1));
      assert.equal(changed, { ...first, filter });
      assert.equal(await db.webhook(first.id), { ...first, filter });
      const publish = async (data: unknown) =>
        (await storage.publishEvents([eventRecord({ data })])).filter((d) => d.webhookId === first.id).length;
      assert.equal(
        [
          await publish({ amount: 150, currency: 'EUR' }),
          await publish({ amount: 150, currency: 'USD' }),
          await publish({ amount: 99 }),
        ],
        [1, 0, 0],
      );
      assert.is(
        await storage.updateWebhook('acct_b', first.id, { filter: null }, at(1)),
        null,
        "another account's webhook is absent",
      );
      assert.is(await storage.updateWebhook('acct_a', 'wbh_missing', { filter: null }, at(1)), null);
      assert.equal(
        await storage.updateWebhook('acct_a', first.id, { rateLimit: 7 }, at(1)),
        { ...first, filter, rateLimit: 7 },
        'the rate limit alone: the filter is kept',
      );
      assert.equal(await db.webhook(first.id), { ...first, filter, rateLimit: 7 });
      assert.equal(
        await storage.updateWebhook('acct_a', first.id, { filter: null, rateLimit: null }, at(1)),
        first,
        'both removed: no filter or rateLimit key at all',
      );
      assert.equal(await db.webhook(first.id), first);
      assert.is(await publish({ amount: 1 }), 1, 'every event again');
      assert.equal(
        (await storage.listWebhooks('acct_a')).map((webhook) => webhook.id),
        [first.id, second.id],
        'it keeps its place',
      );
    }),
  );

  test(
    "events: recentEvents answers the account's latest events of one type, newest first, up to the limit",
    withStorage(factory, async (storage) => {
      const ofType = [0, 1, 2, 3, 4].map((i) => eventRecord({ createdAt: at(i * 10), data: { n: i } }));
      const others = [
        eventRecord({ type: 'agreement-signed', createdAt: at(100) }),
        eventRecord({ accountId: 'acct_b', createdAt: at(100) }),
      ];
      await storage.publishEvents([...ofType, ...others]);
      assert.equal(
        (await storage.recentEvents('acct_a', 'customer-created', 3)).map((event) => event.data),
        [{ n: 4 }, { n: 3 }, { n: 2 }],
      );
      const all = await storage.recentEvents('acct_a', 'customer-created', 10);
      assert.equal(all, [...ofType].reverse(), 'whole records, newest first');
      assert.equal(
        (await storage.recentEvents('acct_b', 'customer-created', 10)).map((event) => event.id),
        [others[1]!.id],
      );
      assert.equal(await storage.recentEvents('acct_c', 'customer-created', 10), []);
    }),
  );

  test(
    "outbox: giveBackDeliveries drops the owner's leases of deliveries never called: claimable at once, due as they were; another's lease and a recorded one stay",
    withStorage(factory, async (storage) => {
      assert.ok(storage.giveBackDeliveries, 'every store the project ships gives deliveries back');
      const made = await published(storage, 3);
      const mine = await claim(storage, 10, 2, 'worker-1');
      const theirs = await claim(storage, 10, 10, 'worker-2');
      assert.equal(
        [...mine, ...theirs].map(({ delivery }) => delivery.id),
        made.map((delivery) => delivery.id),
      );
      const [kept, called] = mine;
      await storage.recordAttempt({
        id: called!.delivery.id,
        owner: 'worker-1',
        attempt: attempt(200, 10),
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      await storage.giveBackDeliveries!(
        'worker-1',
        [kept!, called!, theirs[0]!].map(({ delivery }) => delivery.id).concat('whd_none'),
      );
      const again = await claim(storage, 11, 10, 'worker-3');
      assert.equal(
        again.map(({ delivery }) => [delivery.id, delivery.nextAttemptAt, delivery.attempts.length]),
        [[kept!.delivery.id, at(0), 0]],
        "only the owner's delivery never called is claimable again, as it was",
      );
      const every = await everyDelivery(storage, 'acct_a', made[0]!.webhookId);
      const byId = new Map(every.map((delivery) => [delivery.id, delivery]));
      assert.is(byId.get(theirs[0]!.delivery.id)!.leaseOwner, 'worker-2', "another owner's lease stays");
      assert.is(byId.get(called!.delivery.id)!.status, 'succeeded', 'a recorded one stays as recorded');
      await storage.giveBackDeliveries!('worker-1', []);
    }),
  );

  test(
    'outbox: six deliveries made in the same second list newest first, in exact creation order',
    withStorage(factory, async (storage) => {
      const made = await published(storage, 6, 0);
      const listed = await everyDelivery(storage, 'acct_a', made[0]!.webhookId);
      assert.equal(
        listed.map((delivery) => delivery.id),
        made.map((delivery) => delivery.id).reverse(),
      );
    }),
  );

  test(
    'outbox: publishEvents makes one pending delivery per webhook of the same account and type',
    withStorage(factory, async (storage, { db }) => {
      const first = webhookRecord();
      const second = webhookRecord({ url: 'https://second.example/hook' });
      const otherType = webhookRecord({ type: 'agreement-signed' });
      const otherAccount = webhookRecord({ accountId: 'acct_b' });
      for (const webhook of [first, second, otherType, otherAccount]) await storage.insertWebhook(webhook);
      const event = eventRecord({ createdAt: at(30) });
      const deliveries = await storage.publishEvents([event]);
      assert.equal(deliveries.map((d) => d.webhookId).sort(), [first.id, second.id].sort());
      for (const delivery of deliveries) {
        assert.match(delivery.id, /^whd_[0-9A-Za-z]{16,}$/);
        assert.equal(
          { ...delivery, id: '', webhookId: '' },
          {
            id: '',
            accountId: 'acct_a',
            webhookId: '',
            eventId: event.id,
            eventType: event.type,
            status: 'pending',
            attempts: [],
            attemptCount: 0,
            nextAttemptAt: at(30),
            createdAt: at(30),
            leaseOwner: null,
            leaseUntil: null,
            orderingKey: null,
            redeliverQueued: false,
          },
        );
        assert.equal(await storage.getDelivery('acct_a', delivery.id), delivery);
        assert.equal(await db.delivery(delivery.id), delivery, 'stored as returned');
      }
      assert.equal(await db.event(event.id), event);
      assert.is.not(deliveries[0]!.id, deliveries[1]!.id);
      assert.equal(await everyDelivery(storage, 'acct_a', otherType.id), []);
      assert.equal(await everyDelivery(storage, 'acct_b', otherAccount.id), []);
    }),
  );

  test(
    'outbox: an event with no subscriber is stored all the same, under its own account',
    withStorage(factory, async (storage, { db }) => {
      const event = eventRecord({ data: { nested: { list: [1, 'two', { three: 3 }], unicode: 'Grüße ✓' } } });
      assert.equal(await storage.publishEvents([event]), []);
      assert.equal(await db.event(event.id), event);
      assert.is((await db.event(event.id))!.accountId, 'acct_a', 'stored under its own account');
      assert.is(await db.event('evt_unknown'), null);
    }),
  );

  test(
    'outbox: several events in one call each fan out; a batch with a known event id stores nothing',
    withStorage(factory, async (storage, { db }) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const one = eventRecord();
      const two = eventRecord({ createdAt: at(1) });
      assert.is((await storage.publishEvents([one, two])).length, 2);
      const fresh = eventRecord({ createdAt: at(2) });
      let rejected = false;
      await storage
        .publishEvents([fresh, { ...one, data: { changed: true } }])
        .catch((error) => (rejected = isPortalError(error, 'RECORD_EXISTS')));
      assert.ok(rejected, 'a duplicate event id rejects');
      assert.is(await db.event(fresh.id), null, 'the rest of the batch is not stored');
      assert.equal((await db.event(one.id))!.data, one.data);
      assert.is((await everyDelivery(storage, 'acct_a', webhook.id)).length, 2);
    }),
  );

  test(
    'outbox: calls at once each resolve their own deliveries; one with a known event id fails alone',
    withStorage(factory, async (storage, { db }) => {
      const webhook = webhookRecord();
      const other = webhookRecord({ accountId: 'acct_b' });
      await storage.insertWebhook(webhook);
      await storage.insertWebhook(other);
      const known = eventRecord();
      await storage.publishEvents([known]);
      const events = Array.from({ length: 24 }, (_, i) =>
        eventRecord({ accountId: i % 2 === 0 ? 'acct_a' : 'acct_b', createdAt: at(i + 1) }),
      );
      const pairs = [events.slice(0, 3), ...events.slice(3).map((event) => [event])];
      const bad = [eventRecord({ createdAt: at(40) }), { ...known, data: { changed: true } }];
      const results = await Promise.allSettled([...pairs, bad].map((batch) => storage.publishEvents(batch)));
      const failed = results.pop()!;
      assert.ok(
        failed.status === 'rejected' && isPortalError(failed.reason, 'RECORD_EXISTS'),
        'the call with a known id rejects',
      );
      assert.is(await db.event(bad[0]!.id), null, 'and stores none of its events');
      results.forEach((result, i) => {
        assert.is(result.status, 'fulfilled', `call ${i} is stored`);
        const deliveries = (result as PromiseFulfilledResult<DeliveryRecord[]>).value;
        assert.equal(
          deliveries.map((delivery) => delivery.eventId),
          pairs[i]!.map((event) => event.id),
          `call ${i} resolves the deliveries of its own events`,
        );
        for (const delivery of deliveries) {
          const event = pairs[i]!.find((one) => one.id === delivery.eventId)!;
          assert.is(delivery.webhookId, event.accountId === 'acct_a' ? webhook.id : other.id);
        }
      });
      for (const event of events) assert.equal(await db.event(event.id), event);
      assert.is((await everyDelivery(storage, 'acct_a', webhook.id)).length, 13);
      assert.is((await everyDelivery(storage, 'acct_b', other.id)).length, 12);
    }),
  );

  test(
    'outbox: a batch holding the same new event id twice stores nothing',
    withStorage(factory, async (storage, { db }) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const twice = eventRecord();
      let rejected = false;
      await storage.publishEvents([twice, { ...twice, data: { second: true } }]).catch(() => (rejected = true));
      assert.ok(rejected, 'a duplicate id within the batch rejects');
      assert.is(await db.event(twice.id), null);
      assert.equal(await everyDelivery(storage, 'acct_a', webhook.id), []);
    }),
  );

  test(
    'outbox: a due delivery whose webhook is gone is cancelled, not claimed',
    withStorage(factory, async (storage, { db }) => {
      const [delivery] = await published(storage, 1);
      await storage.deleteWebhook('acct_a', delivery!.webhookId);
      // Made pending again after its webhook went: the one way a webhook-less delivery can be due.
      await storage.redeliver('acct_a', delivery!.id, at(5));
      assert.equal(await claim(storage, 10), []);
      const after = (await storage.getDelivery('acct_a', delivery!.id))!;
      assert.is(after.status, 'cancelled');
      assert.equal(await db.delivery(delivery!.id), after);
      assert.equal(await claim(storage, 20), []);
    }),
  );

  test(
    'outbox: a claim with perAccount cancels the webhook-less deliveries it passes, and leases the others',
    withStorage(factory, async (storage, { db }) => {
      const kept = webhookRecord();
      const doomed = webhookRecord({ type: 'agreement-signed' });
      await storage.insertWebhook(kept);
      await storage.insertWebhook(doomed);
      const [gone] = await storage.publishEvents([eventRecord({ type: doomed.type, createdAt: at(0) })]);
      const [live] = await storage.publishEvents([eventRecord({ type: kept.type, createdAt: at(1) })]);
      await storage.deleteWebhook('acct_a', doomed.id);
      await storage.redeliver('acct_a', gone!.id, at(0));
      const perAccount = { max: 4, inFlight: {} };
      const first = await storage.claimDeliveries({
        now: at(5),
        leaseUntil: at(65),
        limit: 10,
        owner: 'worker-1',
        perAccount,
      });
      assert.equal(
        first.map((c) => c.delivery.id),
        [live!.id],
      );
      assert.is((await db.delivery(gone!.id))!.status, 'cancelled');
      assert.equal(
        await storage.claimDeliveries({ now: at(6), leaseUntil: at(66), limit: 10, owner: 'worker-1', perAccount }),
        [],
      );
    }),
  );

  test(
    'outbox: a delivery made in the second before a claim, and stored after it, is taken by the next claim',
    withStorage(factory, async (storage) => {
      await storage.insertWebhook(webhookRecord());
      const perAccount = { max: 4, inFlight: {} };
      const fairClaim = (second: number) =>
        storage.claimDeliveries({
          now: at(second),
          leaseUntil: at(second + 60),
          limit: 10,
          owner: 'worker-1',
          perAccount,
        });
      const [first] = await storage.publishEvents([eventRecord({ createdAt: at(10) })]);
      assert.equal(
        (await fairClaim(10)).map((c) => c.delivery.id),
        [first!.id],
      );
      // A claim as the next second begins, while a publish that read the clock in second 10 is
      // still storing: due times are whole seconds, so what it stores is due a second before this claim.
      assert.equal(await fairClaim(11), []);
      const [late] = await storage.publishEvents([eventRecord({ createdAt: at(10) })]);
      assert.equal(
        (await fairClaim(11)).map((c) => c.delivery.id),
        [late!.id],
        'found by the claim right after, not only by a wider look back later',
      );
    }),
  );

  test(
    'outbox: a claim cancels the webhook-less deliveries it passes on its way to the limit, and leaves later ones',
    withStorage(factory, async (storage, { db }) => {
      const kept = webhookRecord();
      const doomed = webhookRecord({ type: 'agreement-signed' });
      await storage.insertWebhook(kept);
      await storage.insertWebhook(doomed);
      const made: DeliveryRecord[] = [];
      for (const [second, type] of [
        [0, kept.type],
        [10, doomed.type],
        [20, kept.type],
        [30, doomed.type],
      ] as const) {
        made.push(...(await storage.publishEvents([eventRecord({ type, createdAt: at(second) })])));
      }
      const [k0, d10, k20, d30] = made;
      await storage.deleteWebhook('acct_a', doomed.id);
      await storage.redeliver('acct_a', d10!.id, at(10));
      await storage.redeliver('acct_a', d30!.id, at(30));
      const statusOf = async (delivery: DeliveryRecord) => (await db.delivery(delivery.id))!.status;

      assert.equal(
        (await claim(storage, 100, 2)).map((c) => c.delivery.id),
        [k0!.id, k20!.id],
      );
      assert.is(await statusOf(d10!), 'cancelled', 'passed before the limit was reached');
      assert.is(await statusOf(d30!), 'pending', 'due after the last one leased: left for a later claim');
      assert.equal(await claim(storage, 100, 2), []);
      assert.is(await statusOf(d30!), 'cancelled');
    }),
  );

  test(
    "outbox: with perAccount, a claim skips an account at its share and takes the others' in due order",
    withStorage(factory, async (storage) => {
      const a = webhookRecord();
      const b = webhookRecord({ accountId: 'acct_b' });
      const c = webhookRecord({ accountId: 'acct_c' });
      for (const webhook of [a, b, c]) await storage.insertWebhook(webhook);
      const ofA = await storage.publishEvents(Array.from({ length: 6 }, (_, i) => eventRecord({ createdAt: at(i) })));
      const [ofB] = await storage.publishEvents([eventRecord({ accountId: 'acct_b', createdAt: at(10) })]);
      const [ofC] = await storage.publishEvents([eventRecord({ accountId: 'acct_c', createdAt: at(11) })]);
      const perAccount = { max: 2, inFlight: { acct_a: 1, acct_c: 2 } };
      const first = await storage.claimDeliveries({
        now: at(20),
        leaseUntil: at(80),
        limit: 4,
        owner: 'worker-1',
        perAccount,
      });
      assert.equal(
        first.map((c) => c.delivery.id),
        [ofA[0]!.id, ofB!.id],
        "A has one slot left, B two, C none; the walk goes past A's backlog",
      );
      const second = await storage.claimDeliveries({
        now: at(20),
        leaseUntil: at(80),
        limit: 4,
        owner: 'worker-1',
        perAccount: { max: 2, inFlight: {} },
      });
      assert.equal(
        second.map((c) => c.delivery.id),
        [ofA[1]!.id, ofA[2]!.id, ofC!.id],
      );
      const unfair = await storage.claimDeliveries({ now: at(20), leaseUntil: at(80), limit: 10, owner: 'worker-2' });
      assert.equal(
        unfair.map((c) => c.delivery.id),
        ofA.slice(3).map((d) => d.id),
        'without perAccount, no cap',
      );
    }),
  );

  test(
    "outbox: fair share in a worker: an account whose receivers hang cannot delay another account's call beyond one claim round",
    withStorage(factory, async (storage) => {
      const hanging = webhookRecord({ url: 'https://a.example/hang' });
      const prompt = webhookRecord({ accountId: 'acct_b', url: 'https://b.example/ok' });
      await storage.insertWebhook(hanging);
      await storage.insertWebhook(prompt);
      // Account A's 16 deliveries fall due first: first come first served would hand A every slot.
      await storage.publishEvents(Array.from({ length: 16 }, (_, i) => eventRecord({ createdAt: at(i % 4) })));
      const [ofB] = await storage.publishEvents([eventRecord({ accountId: 'acct_b', createdAt: at(5) })]);
      const release = { resolve: () => {} };
      const hung = new Promise<void>((resolve) => (release.resolve = resolve));
      const sent: string[] = [];
      const transport: WebhookTransport = {
        async send(call) {
          sent.push(call.url);
          if (call.url.includes('hang')) await hung;
          return { statusCode: 204, headers: {}, error: null };
        },
      };
      const rounds: ClaimedDelivery[][] = [];
      const watched: Storage = Object.create(storage, {
        claimDeliveries: {
          value: async (request: Claim) => {
            const claimed = await storage.claimDeliveries(request);
            rounds.push(claimed);
            return claimed;
          },
        },
      });
      const worker = createWebhookWorker({
        storage: watched,
        transport,
        clock: () => new Date(Date.parse(at(10))),
        logger: silentLogger,
        tick: '0 0 0 1 1 *',
        timeoutMs: 600_000,
        concurrency: 8,
        retrySchedule: [5],
      });
      try {
        worker.poke();
        await until(async () => (await storage.getDelivery('acct_b', ofB!.id))?.status === 'succeeded');
        assert.ok(
          rounds[0]!.some((c) => c.delivery.id === ofB!.id),
          "B's delivery is in the first claim",
        );
        assert.is(
          rounds[0]!.filter((c) => c.delivery.accountId === 'acct_a').length,
          2,
          'A holds its share, a quarter of 8',
        );
        assert.is(
          sent.filter((url) => url.includes('hang')).length,
          2,
          "no more of A's calls start while its two hang",
        );
      } finally {
        release.resolve();
        await worker.stop();
      }
    }),
  );

  test(
    'outbox: a lease that ends at exactly now still holds',
    withStorage(factory, async (storage) => {
      const [delivery] = await published(storage, 1);
      await claim(storage, 0, 10, 'worker-1', 60);
      assert.equal(await claim(storage, 60, 10, 'worker-2'), []);
      assert.equal(
        (await claim(storage, 61, 10, 'worker-2')).map((c) => c.delivery.id),
        [delivery!.id],
      );
    }),
  );

  test(
    'outbox: deliveries due at the same time are claimed in id order (code units: upper case first)',
    withStorage(factory, async (storage) => {
      await storage.insertWebhook(webhookRecord());
      const made = await storage.publishEvents(Array.from({ length: 12 }, () => eventRecord({ createdAt: at(5) })));
      const claimed: string[] = [];
      for (let round = 0; round < 12; round++)
        claimed.push(...(await claim(storage, 5, 1, `worker-${round}`)).map((c) => c.delivery.id));
      assert.equal(
        claimed,
        made.map((d) => d.id).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
      );
    }),
  );

  test(
    'outbox: getDelivery is scoped to the account',
    withStorage(factory, async (storage) => {
      const [delivery] = await published(storage, 1);
      assert.ok(await storage.getDelivery('acct_a', delivery!.id));
      assert.is(await storage.getDelivery('acct_b', delivery!.id), null);
      assert.is(await storage.getDelivery('acct_a', 'whd_unknown'), null);
    }),
  );

  test(
    'outbox: deliveryQueue counts the claimable deliveries up to its limit, and the earliest due time',
    withStorage(factory, async (storage) => {
      assert.ok(storage.deliveryQueue, 'every adapter of this package has it');
      assert.equal(await storage.deliveryQueue!(at(100), 10), { waiting: 0, oldestDueAt: null });
      await published(storage, 5, 10); // due at 0, 10, 20, 30, 40
      await storage.insertWebhook(webhookRecord({ accountId: 'acct_b', url: 'https://b.example/hook' }));
      await storage.publishEvents([eventRecord({ accountId: 'acct_b', createdAt: at(5) })]);
      assert.equal(
        await storage.deliveryQueue!(at(25), 10),
        { waiting: 4, oldestDueAt: at(0) },
        'due at 0, 5, 10, 20; not 30 and 40',
      );
      assert.equal(
        await storage.deliveryQueue!(at(100), 3),
        { waiting: 3, oldestDueAt: at(0) },
        'counted up to the limit',
      );
      // Leased ones are a worker's, not waiting: the two earliest go out, the third earliest waits.
      const [first, second] = await claim(storage, 25, 2);
      assert.equal([first!.delivery.nextAttemptAt, second!.delivery.nextAttemptAt], [at(0), at(5)]);
      assert.equal(await storage.deliveryQueue!(at(26), 10), { waiting: 2, oldestDueAt: at(10) });
      // Delivered: gone from the queue; retried later: waits again only once due.
      await storage.recordAttempt({
        id: first!.delivery.id,
        owner: 'worker-1',
        attempt: attempt(200, 26),
        outcome: {
          status: 'succeeded',
          nextAttemptAt: null,
        },
      });
      await storage.recordAttempt({
        id: second!.delivery.id,
        owner: 'worker-1',
        attempt: attempt(500, 26),
        outcome: {
          status: 'pending',
          nextAttemptAt: at(90),
        },
      });
      assert.equal(await storage.deliveryQueue!(at(27), 10), { waiting: 2, oldestDueAt: at(10) });
      assert.equal(await storage.deliveryQueue!(at(95), 10), { waiting: 5, oldestDueAt: at(10) });
      // A lease that ran out is waiting again.
      await claim(storage, 95, 10, 'worker-2', 10);
      assert.equal(await storage.deliveryQueue!(at(100), 10), { waiting: 0, oldestDueAt: null });
      assert.equal(await storage.deliveryQueue!(at(106), 10), { waiting: 5, oldestDueAt: at(10) });
    }),
  );

  test(
    'outbox: claim takes only due deliveries, oldest due first, up to the limit, with event and webhook',
    withStorage(factory, async (storage, { db }) => {
      const deliveries = await published(storage, 5, 10); // due at 0, 10, 20, 30, 40
      const claimed = await claim(storage, 25, 2);
      assert.equal(
        claimed.map((c) => c.delivery.id),
        [deliveries[0]!.id, deliveries[1]!.id],
      );
      const [first] = claimed;
      assert.is(first!.delivery.leaseOwner, 'worker-1');
      assert.is(first!.delivery.leaseUntil, at(85));
      assert.equal(first!.event, await db.event(deliveries[0]!.eventId));
      assert.is(first!.webhook.id, deliveries[0]!.webhookId);
      assert.is(first!.webhook.secret, webhookRecord().secret);
      const stored = (await storage.getDelivery('acct_a', deliveries[0]!.id))!;
      assert.equal([stored.leaseOwner, stored.leaseUntil, stored.status], ['worker-1', at(85), 'pending']);
      assert.equal(await db.delivery(deliveries[0]!.id), stored, 'the lease is stored');
      const rest = await claim(storage, 25, 10);
      assert.equal(
        rest.map((c) => c.delivery.id),
        [deliveries[2]!.id],
        'leased ones and ones not yet due stay out',
      );
      assert.equal(await claim(storage, 25, 10), []);
    }),
  );

  test(
    'outbox: a delivery due at exactly now is claimed',
    withStorage(factory, async (storage) => {
      const [delivery] = await published(storage, 1);
      assert.equal(
        (await claim(storage, 0)).map((c) => c.delivery.id),
        [delivery!.id],
      );
    }),
  );

  test(
    'outbox: concurrent claims never hand out the same delivery',
    withStorage(factory, async (storage, { db }) => {
      const deliveries = await published(storage, 20);
      const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => claim(storage, 100, 4, `worker-${i}`)));
      const ids = claims.flat().map((c) => c.delivery.id);
      assert.is(new Set(ids).size, ids.length, 'no delivery claimed twice');
      assert.is(ids.length, 20, 'every due delivery claimed once');
      for (const [i, batch] of claims.entries()) {
        for (const { delivery } of batch) {
          assert.is((await storage.getDelivery('acct_a', delivery.id))!.leaseOwner, `worker-${i}`);
          assert.is((await db.delivery(delivery.id))!.leaseOwner, `worker-${i}`);
        }
      }
      assert.equal(ids.sort(), deliveries.map((d) => d.id).sort());
    }),
  );

  test(
    'outbox: a lease that ran out makes the delivery claimable again, and the old owner cannot record',
    withStorage(factory, async (storage) => {
      const [delivery] = await published(storage, 1);
      await claim(storage, 0, 10, 'dead-worker', 60);
      assert.equal(await claim(storage, 59, 10, 'worker-2'), [], 'still leased');
      const again = await claim(storage, 61, 10, 'worker-2');
      assert.equal(
        again.map((c) => c.delivery.id),
        [delivery!.id],
      );
      assert.equal(
        await storage.recordAttempt({
          id: delivery!.id,
          owner: 'dead-worker',
          attempt: attempt(200, 70),
          outcome: {
            status: 'succeeded',
            nextAttemptAt: null,
          },
        }),
        notRecorded,
      );
      assert.equal((await storage.getDelivery('acct_a', delivery!.id))!.attempts, []);
      assert.equal(
        await storage.recordAttempt({
          id: delivery!.id,
          owner: 'worker-2',
          attempt: attempt(200, 71),
          outcome: {
            status: 'succeeded',
            nextAttemptAt: null,
          },
        }),
        recorded(),
      );
    }),
  );

  test(
    'outbox: recordAttempt appends the attempt, sets the outcome and releases the lease',
    withStorage(factory, async (storage, { db }) => {
      const [delivery] = await published(storage, 1);
      await claim(storage, 0);
      const failed = attempt(null, 1);
      assert.equal(
        await storage.recordAttempt({
          id: delivery!.id,
          owner: 'worker-1',
          attempt: failed,
          outcome: { status: 'pending', nextAttemptAt: at(6) },
        }),
        recorded(),
      );
      let stored = (await storage.getDelivery('acct_a', delivery!.id))!;
      assert.equal(
        [stored.status, stored.nextAttemptAt, stored.leaseOwner, stored.leaseUntil, stored.attempts],
        ['pending', at(6), null, null, [failed]],
      );
      assert.equal(await db.delivery(delivery!.id), stored);
      assert.equal(await claim(storage, 5), [], 'not due before its next attempt');
      await claim(storage, 6);
      const succeeded = attempt(204, 7);
      assert.equal(
        await storage.recordAttempt({
          id: delivery!.id,
          owner: 'worker-1',
          attempt: succeeded,
          outcome: { status: 'succeeded', nextAttemptAt: null },
        }),
        recorded(),
      );
      stored = (await storage.getDelivery('acct_a', delivery!.id))!;
      assert.equal([stored.status, stored.nextAttemptAt, stored.attempts], ['succeeded', null, [failed, succeeded]]);
      assert.equal(await db.delivery(delivery!.id), stored);
      assert.equal(await claim(storage, 1000), [], 'a finished delivery is never claimed');
    }),
  );

  test(
    'outbox: recordAttempt is refused for another owner, an unclaimed delivery, or an unknown id',
    withStorage(factory, async (storage, { db }) => {
      const [delivery] = await published(storage, 1);
      const outcome = { status: 'succeeded' as const, nextAttemptAt: null };
      assert.equal(
        await storage.recordAttempt({ id: delivery!.id, owner: 'worker-1', attempt: attempt(200), outcome }),
        notRecorded,
        'not claimed',
      );
      await claim(storage, 0, 10, 'worker-1');
      assert.equal(
        await storage.recordAttempt({ id: delivery!.id, owner: 'worker-2', attempt: attempt(200), outcome }),
        notRecorded,
        'someone else',
      );
      assert.equal(
        await storage.recordAttempt({ id: 'whd_unknown', owner: 'worker-1', attempt: attempt(200), outcome }),
        notRecorded,
      );
      const stored = (await storage.getDelivery('acct_a', delivery!.id))!;
      assert.equal([stored.status, stored.leaseOwner, stored.attempts], ['pending', 'worker-1', []]);
      assert.equal(await db.delivery(delivery!.id), stored);
      assert.is(await db.delivery('whd_unknown'), null);
    }),
  );

  test(
    'outbox: deleting a webhook cancels its pending deliveries only; a call in flight cannot record after',
    withStorage(factory, async (storage, { db }) => {
      const webhook = webhookRecord();
      const kept = webhookRecord();
      await storage.insertWebhook(webhook);
      await storage.insertWebhook(kept);
      const mineOf = (batch: DeliveryRecord[], id: string) => batch.find((d) => d.webhookId === id)!;
      const first = await storage.publishEvents([eventRecord()]);
      await claim(storage, 0);
      const done = mineOf(first, webhook.id);
      await storage.recordAttempt({
        id: done.id,
        owner: 'worker-1',
        attempt: attempt(200),
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      const second = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      await claim(storage, 1);
      const inFlight = mineOf(second, webhook.id);
      const waiting = mineOf(await storage.publishEvents([eventRecord({ createdAt: at(2) })]), webhook.id);

      assert.is(await storage.deleteWebhook('acct_a', webhook.id), true);
      assert.is(
        (await storage.getDelivery('acct_a', done.id))!.status,
        'succeeded',
        'a finished delivery stays as it was',
      );
      for (const id of [inFlight.id, waiting.id]) {
        const cancelled = (await storage.getDelivery('acct_a', id))!;
        assert.equal([cancelled.status, cancelled.nextAttemptAt], ['cancelled', null]);
        assert.equal(await db.delivery(id), cancelled);
      }
      assert.is((await db.delivery(done.id))!.status, 'succeeded');
      assert.equal(
        await storage.recordAttempt({
          id: inFlight.id,
          owner: 'worker-1',
          attempt: attempt(500),
          outcome: { status: 'pending', nextAttemptAt: at(5) },
        }),
        notRecorded,
      );
      const refused = (await storage.getDelivery('acct_a', inFlight.id))!;
      assert.equal([refused.status, refused.attempts], ['cancelled', []]);
      assert.equal(await db.delivery(inFlight.id), refused);
      const other = await everyDelivery(storage, 'acct_a', kept.id);
      assert.equal(
        other.map((d) => [d.status, d.leaseOwner]),
        [
          ['pending', null],
          ['pending', 'worker-1'],
          ['pending', 'worker-1'],
        ],
        'the other webhook is untouched',
      );
      const later = await claim(storage, 1000, 10, 'worker-3');
      assert.equal(
        later.map((c) => c.webhook.id),
        [kept.id, kept.id, kept.id],
        "cancelled ones are never claimed; the other webhook's are",
      );
    }),
  );

  test(
    'outbox: deleting a webhook cancels a pending delivery that has no next attempt too',
    withStorage(factory, async (storage, { db }) => {
      const [delivery] = await published(storage, 1);
      await claim(storage, 0);
      await storage.recordAttempt({
        id: delivery!.id,
        owner: 'worker-1',
        attempt: attempt(500, 1),
        outcome: {
          status: 'pending',
          nextAttemptAt: null,
        },
      });
      assert.is(await storage.deleteWebhook('acct_a', delivery!.webhookId), true);
      const stored = (await storage.getDelivery('acct_a', delivery!.id))!;
      assert.equal([stored.status, stored.nextAttemptAt, stored.attempts.length], ['cancelled', null, 1]);
      assert.equal(await db.delivery(delivery!.id), stored);
    }),
  );

  test(
    'outbox: redeliver makes a finished delivery pending again, attempts kept, lease dropped',
    withStorage(factory, async (storage, { db }) => {
      const [delivery] = await published(storage, 1);
      await claim(storage, 0);
      const gone = attempt(410, 1);
      await storage.recordAttempt({
        id: delivery!.id,
        owner: 'worker-1',
        attempt: gone,
        outcome: { status: 'failed', nextAttemptAt: null },
      });
      const again = await storage.redeliver('acct_a', delivery!.id, at(500));
      assert.ok(again);
      assert.equal(
        [again!.status, again!.nextAttemptAt, again!.attempts, again!.leaseOwner, again!.leaseUntil],
        ['pending', at(500), [gone], null, null],
      );
      assert.equal(await storage.getDelivery('acct_a', delivery!.id), again);
      assert.equal(await db.delivery(delivery!.id), again);
      assert.equal(await claim(storage, 499), []);
      assert.equal(
        (await claim(storage, 500)).map((c) => c.delivery.id),
        [delivery!.id],
      );
      assert.is(await storage.redeliver('acct_b', delivery!.id, at(500)), null);
      assert.is(await storage.redeliver('acct_a', 'whd_unknown', at(500)), null);
    }),
  );

  test(
    'outbox: redeliver of a delivery whose lease ran out drops the lease, so the old owner cannot record',
    withStorage(factory, async (storage) => {
      const [delivery] = await published(storage, 1);
      await claim(storage, 0, 10, 'worker-1');
      await storage.redeliver('acct_a', delivery!.id, at(61));
      assert.equal(
        await storage.recordAttempt({
          id: delivery!.id,
          owner: 'worker-1',
          attempt: attempt(200),
          outcome: {
            status: 'succeeded',
            nextAttemptAt: null,
          },
        }),
        notRecorded,
      );
      assert.equal(
        (await claim(storage, 61, 10, 'worker-2')).map((c) => c.delivery.id),
        [delivery!.id],
      );
    }),
  );

  test(
    'outbox: redeliver while a lease holds the delivery (its call in flight) queues one more call, due as that call ends once recorded',
    withStorage(factory, async (storage, { db }) => {
      const [delivery] = await published(storage, 1);
      await claim(storage, 0, 10, 'worker-1', 60);
      const leased = await db.delivery(delivery!.id);
      for (const second of [1, 30, 60]) {
        const queued = (await storage.redeliver('acct_a', delivery!.id, at(second)))!;
        assert.equal(
          queued,
          { ...leased!, redeliverQueued: true },
          `at ${second} s: queued, the lease and the rest as they were`,
        );
      }
      assert.equal(await db.delivery(delivery!.id), { ...leased!, redeliverQueued: true });
      assert.equal(await claim(storage, 30, 10, 'worker-2'), [], 'no second call at once: nobody else may claim it');
      const made = { ...attempt(200, 2), durationMs: 4_000 };
      assert.equal(
        await storage.recordAttempt({
          id: delivery!.id,
          owner: 'worker-1',
          attempt: made,
          outcome: { status: 'succeeded', nextAttemptAt: null },
        }),
        recorded({ dueAgain: true }),
        'the call in flight records, and says it is due again',
      );
      const after = (await db.delivery(delivery!.id))!;
      assert.equal(
        [
          after.status,
          after.nextAttemptAt,
          after.redeliverQueued,
          after.attempts,
          after.attemptCount,
          after.leaseOwner,
        ],
        ['pending', at(6), false, [made], 1, null],
        'pending, due as the call ended (2 s + 4 s), the attempt kept',
      );
      assert.equal(
        (await claim(storage, 6, 10, 'worker-2')).map((c) => c.delivery.id),
        [delivery!.id],
        'the one more call',
      );
      assert.equal(
        await storage.recordAttempt({
          id: delivery!.id,
          owner: 'worker-2',
          attempt: attempt(200, 6),
          outcome: {
            status: 'succeeded',
            nextAttemptAt: null,
          },
        }),
        recorded(),
      );
      assert.equal((await db.delivery(delivery!.id))!.status, 'succeeded', 'and no third');
      assert.is(await storage.redeliver('acct_b', delivery!.id, at(7)), null, 'another account still sees nothing');
    }),
  );

  test(
    'outbox: a redeliver queued behind a call whose lease ran out is served by the next lease, not by two calls',
    withStorage(factory, async (storage, { db }) => {
      const [delivery] = await published(storage, 1);
      await claim(storage, 0, 10, 'worker-1', 10);
      assert.ok((await storage.redeliver('acct_a', delivery!.id, at(5)))!.redeliverQueued);
      const [taken] = await claim(storage, 11, 10, 'worker-2', 10);
      assert.equal([taken!.delivery.id, taken!.delivery.redeliverQueued], [delivery!.id, false]);
      assert.equal(
        await storage.recordAttempt({
          id: delivery!.id,
          owner: 'worker-1',
          attempt: attempt(200, 1),
          outcome: {
            status: 'succeeded',
            nextAttemptAt: null,
          },
        }),
        notRecorded,
        'the lost lease cannot record',
      );
      assert.equal(
        await storage.recordAttempt({
          id: delivery!.id,
          owner: 'worker-2',
          attempt: attempt(200, 12),
          outcome: {
            status: 'succeeded',
            nextAttemptAt: null,
          },
        }),
        recorded(),
      );
      assert.equal((await db.delivery(delivery!.id))!.status, 'succeeded');
    }),
  );

  test(
    'outbox: a redeliver queued during a call whose outcome was failed or a retry still makes it due as the call ends',
    withStorage(factory, async (storage, { db }) => {
      const [first, second] = await published(storage, 2, 0);
      await claim(storage, 0, 10, 'worker-1', 60);
      for (const one of [first, second]) await storage.redeliver('acct_a', one!.id, at(1));
      const health = { disableAfterFailures: 100, disableAfterMs: 1e9 };
      assert.equal(
        await storage.recordAttempt({
          id: first!.id,
          owner: 'worker-1',
          attempt: attempt(500, 3),
          outcome: { status: 'failed', nextAttemptAt: null },
          health,
        }),
        recorded({ dueAgain: true }),
      );
      assert.equal(
        await storage.recordAttempt({
          id: second!.id,
          owner: 'worker-1',
          attempt: attempt(500, 3),
          outcome: {
            status: 'pending',
            nextAttemptAt: at(600),
          },
        }),
        recorded({ dueAgain: true }),
      );
      for (const one of [first, second]) {
        const after = (await db.delivery(one!.id))!;
        assert.equal([after.status, after.nextAttemptAt, after.redeliverQueued], ['pending', at(3), false]);
      }
    }),
  );

  test(
    'outbox: ten redelivers during a call in a worker make one more call after it: one call of the delivery at a time, and no slot taken from others',
    withStorage(factory, async (storage, { db }) => {
      const slow = webhookRecord({ url: 'https://a.example/slow' });
      const other = webhookRecord({ accountId: 'acct_b', url: 'https://b.example/ok' });
      await storage.insertWebhook(slow);
      await storage.insertWebhook(other);
      const [delivery] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      const release = { resolve: () => {} };
      const held = new Promise<void>((resolve) => (release.resolve = resolve));
      const calls: Record<string, number> = {};
      let slowInFlight = 0;
      let mostAtOnce = 0;
      const transport: WebhookTransport = {
        async send(call) {
          calls[call.url] = (calls[call.url] ?? 0) + 1;
          if (call.url === slow.url) {
            mostAtOnce = Math.max(mostAtOnce, ++slowInFlight);
            await held;
            slowInFlight--;
          }
          return { statusCode: 204, headers: {}, error: null };
        },
      };
      // Eight slots, all of them one account's: before the fix, eight redelivers took every one.
      const worker = createWebhookWorker({
        storage,
        transport,
        clock: () => new Date(Date.parse(at(10))),
        logger: silentLogger,
        tick: '0 0 0 1 1 *',
        timeoutMs: 600_000,
        concurrency: 8,
        concurrencyPerAccount: 8,
        retrySchedule: [5],
      });
      try {
        worker.poke();
        await until(async () => calls[slow.url] === 1);
        for (let n = 0; n < 10; n++) {
          assert.ok(
            (await storage.redeliver('acct_a', delivery!.id, at(10)))!.redeliverQueued,
            `redeliver ${n + 1} is queued`,
          );
          worker.poke(); // as portal.webhooks.redeliver does
        }
        const [ofB] = await storage.publishEvents([eventRecord({ accountId: 'acct_b', createdAt: at(10) })]);
        worker.poke();
        await until(async () => (await db.delivery(ofB!.id))?.status === 'succeeded');
        assert.equal([calls[slow.url], mostAtOnce], [1, 1], 'one call of the delivery, never two at once');
        release.resolve();
        await until(async () => (await db.delivery(delivery!.id))?.status === 'succeeded' && calls[slow.url] === 2);
        const done = (await db.delivery(delivery!.id))!;
        assert.equal(
          [done.attempts.length, done.attemptCount, done.leaseOwner, calls[slow.url], mostAtOnce],
          [2, 2, null, 2, 1],
          'ten redelivers made one more call, after the first',
        );
      } finally {
        release.resolve();
        await worker.stop();
      }
    }),
  );

  test(
    'outbox: recordAttempt calls at once each answer for their own delivery',
    withStorage(factory, async (storage, { db }) => {
      const deliveries = await published(storage, 12, 0);
      const full = deliveries[11]!;
      // One delivery already holds 50 attempts: its next one drops the oldest, whatever else is recorded with it.
      for (let n = 1; n <= 50; n++) {
        await claim(storage, n * 2, 12, 'worker-1', 1);
        await Promise.all(
          deliveries.map((one, i) =>
            storage.recordAttempt({
              id: one.id,
              owner: 'worker-1',
              attempt: { ...attempt(500, n * 2), durationMs: i === 11 ? n : 0 },
              outcome: { status: 'pending', nextAttemptAt: at(n * 2 + 2) },
            }),
          ),
        );
      }
      assert.is((await claim(storage, 200, 12)).length, 12);
      const outcome = (i: number) =>
        i % 2 === 0
          ? { status: 'succeeded' as const, nextAttemptAt: null }
          : { status: 'pending' as const, nextAttemptAt: at(300 + i) };
      const calls = [
        storage.recordAttempt({
          id: 'whd_unknown',
          owner: 'worker-1',
          attempt: attempt(200, 201),
          outcome: outcome(0),
        }),
        storage.recordAttempt({
          id: deliveries[0]!.id,
          owner: 'worker-2',
          attempt: attempt(200, 201),
          outcome: outcome(0),
        }),
        ...deliveries.map((one, i) =>
          storage.recordAttempt({
            id: one.id,
            owner: 'worker-1',
            attempt: { ...attempt(200, 201), durationMs: 100 + i },
            outcome: outcome(i),
          }),
        ),
        storage.recordAttempt({
          id: deliveries[3]!.id,
          owner: 'worker-1',
          attempt: { ...attempt(200, 202), durationMs: 999 },
          outcome: outcome(3),
        }),
      ];
      const answers = await Promise.all(calls);
      assert.equal(answers.slice(0, 2), [notRecorded, notRecorded], 'an unknown id, another owner');
      // Two attempts of deliveries[3] at once: whichever the store takes first records, the other
      // finds the lease released (the calls run at once, so either may be first).
      const twice = [answers[5], answers[14]];
      assert.equal(
        twice.filter((answer) => answer!.recorded).length,
        1,
        'of two attempts of one delivery, one records',
      );
      assert.equal(
        answers.slice(2, 14).map((answer, i) => (i === 3 ? recorded() : answer)),
        deliveries.map(() => recorded()),
        'each leased delivery records',
      );
      for (const [i, one] of deliveries.entries()) {
        const stored = (await db.delivery(one.id))!;
        assert.equal(
          [stored.status, stored.nextAttemptAt, stored.leaseOwner],
          [outcome(i).status, outcome(i).nextAttemptAt, null],
        );
        assert.is(stored.attemptCount, 51);
        assert.is(stored.attempts.length, 50);
        assert.is(
          stored.attempts.at(-1)!.durationMs,
          i === 3 && answers[14]!.recorded ? 999 : 100 + i,
          'its own attempt, last',
        );
      }
      const kept = (await db.delivery(full.id))!.attempts.map((one) => one.durationMs);
      assert.equal(kept, [...Array.from({ length: 49 }, (_, i) => i + 2), 111], 'the oldest dropped, in order');
    }),
  );

  test(
    'outbox: a delivery keeps its last 50 attempts and counts them all',
    withStorage(factory, async (storage, { db }) => {
      const [delivery] = await published(storage, 1);
      const total = 53;
      for (let n = 1; n <= total; n++) {
        assert.is((await claim(storage, n * 2, 10, 'worker-1', 1)).length, 1);
        const made = { ...attempt(500, n * 2), durationMs: n };
        assert.ok(
          (
            await storage.recordAttempt({
              id: delivery!.id,
              owner: 'worker-1',
              attempt: made,
              outcome: {
                status: 'pending',
                nextAttemptAt: at(n * 2 + 2),
              },
            })
          ).recorded,
        );
      }
      const stored = (await db.delivery(delivery!.id))!;
      assert.is(stored.attemptCount, total);
      assert.is(stored.attempts.length, 50);
      assert.equal(
        stored.attempts.map((kept) => kept.durationMs),
        Array.from({ length: 50 }, (_, i) => total - 49 + i),
        'the oldest dropped, in order',
      );
      assert.equal(await storage.getDelivery('acct_a', delivery!.id), stored);
    }),
  );

  test(
    "outbox: listDeliveries is the webhook's own, newest first",
    withStorage(factory, async (storage) => {
      const deliveries = await published(storage, 4, 60);
      const other = webhookRecord({ accountId: 'acct_b' });
      await storage.insertWebhook(other);
      await storage.publishEvents([eventRecord({ accountId: 'acct_b', createdAt: at(30) })]);
      const listed = await everyDelivery(storage, 'acct_a', deliveries[0]!.webhookId);
      assert.equal(
        listed.map((d) => d.id),
        deliveries.map((d) => d.id).reverse(),
      );
      assert.equal(await everyDelivery(storage, 'acct_b', deliveries[0]!.webhookId), []);
      assert.is((await everyDelivery(storage, 'acct_b', other.id)).length, 1);
    }),
  );

  test(
    'outbox: the log pages newest first: each page starts past the last one, the last page has no next',
    withStorage(factory, async (storage) => {
      // Three per second over four seconds: pages cut inside a second too.
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const made: DeliveryRecord[] = [];
      for (let i = 0; i < 12; i++)
        made.push(...(await storage.publishEvents([eventRecord({ createdAt: at(Math.floor(i / 3)) })])));
      const expected = made.map((delivery) => delivery.id).reverse();
      const pages: string[][] = [];
      let page = await storage.listDeliveries('acct_a', webhook.id, { limit: 5 });
      pages.push(page.deliveries.map((delivery) => delivery.id));
      while (page.next !== null) {
        page = await storage.listDeliveries('acct_a', webhook.id, { limit: 5, after: page.next });
        pages.push(page.deliveries.map((delivery) => delivery.id));
      }
      assert.equal(
        pages.map((ids) => ids.length),
        [5, 5, 2],
      );
      assert.equal(pages.flat(), expected);
      // A page of exactly the rest has no next.
      const exact = await storage.listDeliveries('acct_a', webhook.id, { limit: 12 });
      assert.is(exact.next, null);
      assert.is(exact.deliveries.length, 12);
      // Newer deliveries do not shift a page already cut.
      const first = await storage.listDeliveries('acct_a', webhook.id, { limit: 4 });
      await storage.publishEvents([eventRecord({ createdAt: at(9) })]);
      const second = await storage.listDeliveries('acct_a', webhook.id, { limit: 4, after: first.next! });
      assert.equal(
        second.deliveries.map((delivery) => delivery.id),
        expected.slice(4, 8),
      );
    }),
  );

  test(
    'outbox: the log filters on status, event type and time, together, and pages through what matches',
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const made: DeliveryRecord[] = [];
      for (let i = 0; i < 10; i++)
        made.push(...(await storage.publishEvents([eventRecord({ createdAt: at(i * 10) })])));
      const test = await storage.publishEvents([eventRecord({ type: 'webhook.test', createdAt: at(45) })], {
        webhookId: webhook.id,
      });
      // Every other one succeeds.
      const claimed = await claim(storage, 1000, 20);
      for (const [index, { delivery }] of claimed.entries()) {
        await storage.recordAttempt({
          id: delivery.id,
          owner: 'worker-1',
          attempt: attempt(index % 2 === 0 ? 200 : 500),
          outcome: {
            status: index % 2 === 0 ? 'succeeded' : 'failed',
            nextAttemptAt: null,
          },
        });
      }
      const ids = async (query: Omit<Parameters<Storage['listDeliveries']>[2], 'limit'>, limit = 50) =>
        (await storage.listDeliveries('acct_a', webhook.id, { limit, ...query })).deliveries.map(
          (delivery) => delivery.id,
        );
      const statusOf = new Map(
        claimed.map(({ delivery }, index) => [delivery.id, index % 2 === 0 ? 'succeeded' : 'failed']),
      );
      const all = [...made, ...test]
        .sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1))
        .map((delivery) => delivery.id);
      assert.equal(
        await ids({ status: 'succeeded' }),
        all.filter((id) => statusOf.get(id) === 'succeeded'),
      );
      assert.equal(await ids({ eventType: 'webhook.test' }), [test[0]!.id]);
      assert.equal(await ids({ eventType: 'customer-created', since: at(30), until: at(60) }), [
        made[5]!.id,
        made[4]!.id,
        made[3]!.id,
      ]);
      assert.equal(await ids({ since: at(90) }), [made[9]!.id], 'since: at or after');
      assert.equal(await ids({ until: at(10) }), [made[0]!.id], 'until: before');
      assert.equal(await ids({ status: 'pending' }), []);
      // Paging through a filter: the cursor carries on past deliveries that do not match.
      const failed = all.filter((id) => statusOf.get(id) === 'failed');
      const firstPage = await storage.listDeliveries('acct_a', webhook.id, { limit: 2, status: 'failed' });
      assert.equal(
        firstPage.deliveries.map((delivery) => delivery.id),
        failed.slice(0, 2),
      );
      const rest = await storage.listDeliveries('acct_a', webhook.id, {
        limit: 50,
        status: 'failed',
        after: firstPage.next!,
      });
      assert.equal(
        rest.deliveries.map((delivery) => delivery.id),
        failed.slice(2),
      );
      assert.equal((await storage.getDelivery('acct_a', test[0]!.id))!.eventType, 'webhook.test');
      // Another account never reads the log, whatever it asks.
      assert.equal((await storage.listDeliveries('acct_b', webhook.id, { limit: 50 })).deliveries, []);
    }),
  );

  test(
    'outbox: the log finds the deliveries of one event, of this webhook only, with the other filters',
    withStorage(factory, async (storage) => {
      const first = webhookRecord();
      const second = webhookRecord({ url: 'https://second.example/hook' });
      for (const webhook of [first, second]) await storage.insertWebhook(webhook);
      const events = Array.from({ length: 5 }, (_, i) => eventRecord({ createdAt: at(i) }));
      const made = await storage.publishEvents(events);
      const of = (webhook: WebhookRecord, event: EventRecord) =>
        made.find((d) => d.webhookId === webhook.id && d.eventId === event.id)!.id;
      const ids = async (
        webhook: WebhookRecord,
        query: Omit<Parameters<Storage['listDeliveries']>[2], 'limit'>,
        accountId = 'acct_a',
      ) =>
        (await storage.listDeliveries(accountId, webhook.id, { limit: 50, ...query })).deliveries.map(
          (delivery) => delivery.id,
        );
      assert.equal(await ids(first, { eventId: events[2]!.id }), [of(first, events[2]!)]);
      assert.equal(await ids(second, { eventId: events[2]!.id }), [of(second, events[2]!)]);
      assert.equal(await ids(first, { eventId: events[2]!.id, status: 'pending', since: at(2), until: at(3) }), [
        of(first, events[2]!),
      ]);
      assert.equal(await ids(first, { eventId: events[2]!.id, status: 'succeeded' }), []);
      assert.equal(await ids(first, { eventId: events[2]!.id, since: at(3) }), []);
      assert.equal(await ids(first, { eventId: 'evt_none' }), []);
      assert.equal(await ids(first, { eventId: events[2]!.id }, 'acct_b'), [], "not another account's");
    }),
  );

  test(
    'outbox: returned deliveries and events are copies',
    withStorage(factory, async (storage, { db }) => {
      const [delivery] = await published(storage, 1);
      const read = (await storage.getDelivery('acct_a', delivery!.id))!;
      read.attempts.push(attempt(200));
      read.status = 'succeeded';
      const [claimed] = await claim(storage, 0);
      (claimed!.event.data as { customer: { name: string } }).customer.name = 'changed';
      claimed!.delivery.attempts.push(attempt(500));
      const stored = (await storage.getDelivery('acct_a', delivery!.id))!;
      assert.equal([stored.status, stored.attempts], ['pending', []]);
      assert.is(
        ((await db.event(delivery!.eventId))!.data as { customer: { name: string } }).customer.name,
        'Ada Lovelace',
      );
    }),
  );

  test(
    'outbox: a large outbox drains through many claims, each delivery once, in due order; retries come back in order',
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const batch = Array.from({ length: 1100 }, (_, i) => eventRecord({ createdAt: at(i % 50) }));
      await storage.publishEvents(batch);
      const seen = new Set<string>();
      let last = '';
      for (let round = 0; round < 100; round++) {
        const claimed = await storage.claimDeliveries({
          now: at(100),
          leaseUntil: at(160),
          limit: 64,
          owner: 'worker-1',
        });
        if (claimed.length === 0) break;
        for (const { delivery } of claimed) {
          assert.ok(!seen.has(delivery.id), 'claimed once');
          assert.ok(delivery.nextAttemptAt! >= last, 'in due order across claims');
          last = delivery.nextAttemptAt!;
          seen.add(delivery.id);
          // Every tenth fails and is due again later, at a time that depends on its place.
          const retry = seen.size % 10 === 0;
          const outcome = retry
            ? { status: 'pending' as const, nextAttemptAt: at(1000 + (seen.size % 7)) }
            : { status: 'succeeded' as const, nextAttemptAt: null };
          assert.ok(
            (
              await storage.recordAttempt({
                id: delivery.id,
                owner: 'worker-1',
                attempt: attempt(retry ? 500 : 200, 100),
                outcome,
              })
            ).recorded,
          );
        }
      }
      assert.is(seen.size, 1100);
      assert.equal(
        await storage
          .claimDeliveries({ now: at(999), leaseUntil: at(1060), limit: 1000, owner: 'worker-2' })
          .then((c) => c.length),
        0,
      );
      const retried = await storage.claimDeliveries({
        now: at(1006),
        leaseUntil: at(1066),
        limit: 1000,
        owner: 'worker-2',
      });
      assert.is(retried.length, 110);
      const dues = retried.map((c) => c.delivery.nextAttemptAt!);
      assert.equal(dues, [...dues].sort(), 'retries are claimed earliest due first');
      assert.ok(retried.every((c) => c.delivery.attempts.length === 1));
    }),
  );

  reopenable(test, factory)(
    'outbox: events, deliveries, attempts, leases and cancellations survive a reopen',
    withStorage(factory, async (storage, { swap, db }) => {
      const webhook = webhookRecord();
      const doomed = webhookRecord();
      await storage.insertWebhook(webhook);
      await storage.insertWebhook(doomed);
      const event: EventRecord = eventRecord();
      const deliveries = await storage.publishEvents([event]);
      const mine = deliveries.find((d) => d.webhookId === webhook.id)!;
      const cancelled = deliveries.find((d) => d.webhookId === doomed.id)!;
      await storage.claimDeliveries({ now: at(0), leaseUntil: at(60), limit: 10, owner: 'worker-1' });
      const failed = attempt(503, 1);
      await storage.recordAttempt({
        id: mine.id,
        owner: 'worker-1',
        attempt: failed,
        outcome: { status: 'pending', nextAttemptAt: at(300) },
      });
      await storage.deleteWebhook('acct_a', doomed.id);
      const [late] = await storage.publishEvents([eventRecord({ createdAt: at(2) })]);
      await storage.claimDeliveries({ now: at(2), leaseUntil: at(62), limit: 10, owner: 'worker-2' });

      const reopened = await swap();
      assert.equal(await db.event(event.id), event);
      const stored = (await reopened.getDelivery('acct_a', mine.id))!;
      assert.equal(
        [stored.status, stored.nextAttemptAt, stored.attempts, stored.leaseOwner],
        ['pending', at(300), [failed], null],
      );
      assert.equal(await db.delivery(mine.id), stored);
      assert.is((await db.delivery(cancelled.id))!.status, 'cancelled');
      assert.is((await reopened.getDelivery('acct_a', cancelled.id))!.status, 'cancelled');
      assert.equal([(await reopened.getDelivery('acct_a', late!.id))!.leaseOwner], ['worker-2'], 'a lease is kept');
      assert.equal(
        await reopened.claimDeliveries({ now: at(10), leaseUntil: at(70), limit: 10, owner: 'worker-3' }),
        [],
      );
      const expired = await reopened.claimDeliveries({
        now: at(63),
        leaseUntil: at(123),
        limit: 10,
        owner: 'worker-3',
      });
      assert.equal(
        expired.map((c) => c.delivery.id),
        [late!.id],
        'and runs out after a restart like before',
      );
    }),
  );
}
