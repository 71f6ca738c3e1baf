import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { isPortalError } from '../../src/errors.js';
import type { OperationalEvent } from '../../src/domain/operational-events.js';
import type { HealthRule, Storage, WebhookTransport } from '../../src/ports.js';
import type { DeliveryRecord, WebhookRecord } from '../../src/records.js';
import { silentLogger } from '../../src/shared/logger.js';
import { createWebhookWorker } from '../../src/webhooks/worker.js';
import type { StorageFactory } from './types.js';
import { T0, at, attempt, eventRecord, webhookRecord } from './fixtures.js';
import { reopenable } from './reopen.js';
import { withStorage } from './with-storage.js';
import { everyDelivery } from '../helpers/every-delivery.js';
import { recorded } from '../helpers/attempts.js';

/** Disabled after a minute of failures in at least three attempts. */
const RULE: HealthRule = { disableAfterMs: 60_000, disableAfterFailures: 3 };
const retry = (seconds: number) => ({ status: 'pending' as const, nextAttemptAt: at(seconds) });
const done = { status: 'succeeded' as const, nextAttemptAt: null };
const failed = { status: 'failed' as const, nextAttemptAt: null };

/** A webhook of account A, and `count` of its events published at `seconds`. */
async function withEvents(
  storage: Storage,
  count: number,
  seconds = 0,
): Promise<{ webhook: WebhookRecord; deliveries: DeliveryRecord[] }> {
  const webhook = webhookRecord();
  await storage.insertWebhook(webhook);
  const deliveries = await storage.publishEvents(
    Array.from({ length: count }, () => eventRecord({ createdAt: at(seconds) })),
  );
  return { webhook, deliveries };
}

/** Claims what is due at `seconds` for `owner`, and records `status` for each, in turn; resolves what each record answered. */
type Outcome = { status: 'pending' | 'succeeded' | 'failed'; nextAttemptAt: string | null };
async function attemptAll(
  storage: Storage,
  seconds: number,
  statusCode: number | null,
  outcome: Outcome = retry(seconds + 10),
  owner = 'worker-1',
) {
  const claimed = await storage.claimDeliveries({ now: at(seconds), leaseUntil: at(seconds + 60), limit: 100, owner });
  const answers = [];
  for (const { delivery } of claimed)
    answers.push(
      await storage.recordAttempt({
        id: delivery.id,
        owner,
        attempt: attempt(statusCode, seconds),
        outcome,
        health: RULE,
      }),
    );
  return answers;
}

export function healthStorageTests(test: Test, factory: StorageFactory): void {
  test(
    "health: a webhook no attempt has reached is enabled with nothing failed; another account's or an unknown one is null",
    withStorage(factory, async (storage, { db }) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      assert.equal(await storage.getWebhookHealth('acct_a', webhook.id), {
        id: webhook.id,
        accountId: 'acct_a',
        consecutiveFailures: 0,
        failingSince: null,
        lastSuccessAt: null,
        lastAttemptAt: null,
        disabledAt: null,
        disabledReason: null,
        heldUntil: null,
        inFlightLimit: null,
      });
      assert.is(await db.health(webhook.id), null, 'nothing is written until an attempt or a disable');
      assert.is(await storage.getWebhookHealth('acct_b', webhook.id), null);
      assert.is(await storage.getWebhookHealth('acct_a', 'wbh_unknown'), null);
    }),
  );

  test(
    'health: calls failing past both thresholds disable the webhook once (failing), reported by the write that did it',
    withStorage(factory, async (storage, { db }) => {
      const { webhook } = await withEvents(storage, 2);
      assert.equal(
        await attemptAll(storage, 0, 500),
        [recorded(), recorded()],
        'two failures at once: under three in a row',
      );
      assert.equal(await attemptAll(storage, 10, null), [recorded(), recorded()], 'four in a row, but for 10 s only');
      const [first, second] = await attemptAll(storage, 60, 503);
      assert.equal(
        [first, second],
        [recorded({ disabled: 'failing' }), recorded()],
        'the first write past both thresholds disables it; the next one only adds a failure',
      );
      const health = (await storage.getWebhookHealth('acct_a', webhook.id))!;
      assert.equal(health, {
        id: webhook.id,
        accountId: 'acct_a',
        consecutiveFailures: 6,
        failingSince: at(0),
        lastSuccessAt: null,
        lastAttemptAt: at(60),
        disabledAt: at(60),
        disabledReason: 'failing',
        heldUntil: null,
        inFlightLimit: null,
      });
      assert.equal(await db.health(webhook.id), health);
    }),
  );

  test(
    'health: a 410 disables at once (gone), a success clears the run of failures and no answer enables it again',
    withStorage(factory, async (storage, { db }) => {
      const { webhook, deliveries } = await withEvents(storage, 2);
      assert.equal(await attemptAll(storage, 0, 500, retry(5)), [recorded(), recorded()]);
      await storage.claimDeliveries({ now: at(5), leaseUntil: at(65), limit: 100, owner: 'worker-1' });
      assert.equal(
        await storage.recordAttempt({
          id: deliveries[0]!.id,
          owner: 'worker-1',
          attempt: attempt(204, 5),
          outcome: done,
          health: RULE,
        }),
        recorded(),
      );
      let health = (await storage.getWebhookHealth('acct_a', webhook.id))!;
      assert.equal(
        [health.consecutiveFailures, health.failingSince, health.lastSuccessAt, health.lastAttemptAt],
        [0, null, at(5), at(5)],
      );
      assert.equal(
        await storage.recordAttempt({
          id: deliveries[1]!.id,
          owner: 'worker-1',
          attempt: attempt(410, 6),
          outcome: failed,
          health: RULE,
        }),
        recorded({ disabled: 'gone' }),
        'one 410 is enough',
      );
      health = (await storage.getWebhookHealth('acct_a', webhook.id))!;
      assert.equal(
        [health.disabledReason, health.disabledAt, health.consecutiveFailures, health.failingSince],
        ['gone', at(6), 1, at(6)],
      );
      assert.equal(await db.health(webhook.id), health);
    }),
  );

  test(
    'health: of many attempts recorded at once, exactly one reports the transition',
    withStorage(factory, async (storage) => {
      const { webhook } = await withEvents(storage, 12);
      const claimed = await storage.claimDeliveries({ now: at(0), leaseUntil: at(60), limit: 100, owner: 'worker-1' });
      const answers = await Promise.all(
        claimed.map(({ delivery }) =>
          storage.recordAttempt({
            id: delivery.id,
            owner: 'worker-1',
            attempt: attempt(410, 1),
            outcome: failed,
            health: RULE,
          }),
        ),
      );
      assert.equal(answers.filter((answer) => answer.disabled === 'gone').length, 1, JSON.stringify(answers));
      assert.equal(answers.filter((answer) => answer.recorded && answer.disabled === null).length, 11);
      assert.ok(answers.every((answer) => answer.recorded && !answer.dueAgain));
      assert.is((await storage.getWebhookHealth('acct_a', webhook.id))!.consecutiveFailures, 12);
    }),
  );

  test(
    "health: a disabled webhook's due deliveries are cancelled, not claimed; other webhooks' go out",
    withStorage(factory, async (storage, { db }) => {
      const { webhook, deliveries } = await withEvents(storage, 2);
      const other = webhookRecord({ type: 'agreement-signed' });
      await storage.insertWebhook(other);
      const [ofOther] = await storage.publishEvents([eventRecord({ type: 'agreement-signed' })]);
      assert.is(await storage.disableWebhook('acct_a', webhook.id, at(0)), true);
      const claimed = await storage.claimDeliveries({ now: at(1), leaseUntil: at(61), limit: 10, owner: 'worker-1' });
      assert.equal(
        claimed.map((c) => c.delivery.id),
        [ofOther!.id],
      );
      for (const delivery of deliveries) assert.is((await db.delivery(delivery.id))!.status, 'cancelled');
      const [held] = await storage.publishEvents([eventRecord({ createdAt: at(2) })]);
      assert.ok(held, 'an event published while disabled is stored with its delivery');
      assert.equal(await storage.claimDeliveries({ now: at(3), leaseUntil: at(63), limit: 10, owner: 'worker-1' }), []);
      assert.is((await db.delivery(held!.id))!.status, 'cancelled');
    }),
  );

  test(
    "health: a claim with perAccount cancels a disabled webhook's due deliveries and leases the others'",
    withStorage(factory, async (storage, { db }) => {
      const { webhook, deliveries } = await withEvents(storage, 3);
      const other = webhookRecord({ type: 'agreement-signed' });
      await storage.insertWebhook(other);
      const [ofOther] = await storage.publishEvents([eventRecord({ type: 'agreement-signed' })]);
      assert.is(await storage.disableWebhook('acct_a', webhook.id, at(0)), true);
      const perAccount = { max: 2, inFlight: {} };
      const claimed = await storage.claimDeliveries({
        now: at(1),
        leaseUntil: at(61),
        limit: 10,
        owner: 'worker-1',
        perAccount,
      });
      assert.equal(
        claimed.map((c) => c.delivery.id),
        [ofOther!.id],
      );
      for (const delivery of deliveries) assert.is((await db.delivery(delivery.id))!.status, 'cancelled');
    }),
  );

  test(
    'health: disable and enable by hand: true for the change, false when already so, null when absent',
    withStorage(factory, async (storage, { db }) => {
      const { webhook } = await withEvents(storage, 1);
      assert.equal(await attemptAll(storage, 0, 500), [recorded()]);
      assert.is(await storage.disableWebhook('acct_b', webhook.id, at(1)), null, "another account's");
      assert.is(await storage.enableWebhook('acct_a', 'wbh_unknown'), null);
      assert.is(await storage.enableWebhook('acct_a', webhook.id), false, 'enabled already');
      assert.is(await storage.disableWebhook('acct_a', webhook.id, at(1)), true);
      assert.is(await storage.disableWebhook('acct_a', webhook.id, at(2)), false);
      let health = (await storage.getWebhookHealth('acct_a', webhook.id))!;
      assert.equal([health.disabledAt, health.disabledReason, health.consecutiveFailures], [at(1), 'manual', 1]);
      assert.equal(await db.health(webhook.id), health);
      assert.is(await storage.enableWebhook('acct_a', webhook.id), true);
      assert.is(await storage.enableWebhook('acct_a', webhook.id), false);
      health = (await storage.getWebhookHealth('acct_a', webhook.id))!;
      assert.equal(
        [
          health.disabledAt,
          health.disabledReason,
          health.consecutiveFailures,
          health.failingSince,
          health.lastAttemptAt,
        ],
        [null, null, 0, null, at(0)],
      );
      assert.equal(await db.health(webhook.id), health);
      const fresh = webhookRecord();
      await storage.insertWebhook(fresh);
      const disables = await Promise.all(
        Array.from({ length: 5 }, () => storage.disableWebhook('acct_a', fresh.id, at(3))),
      );
      assert.equal(disables.filter(Boolean).length, 1, 'of five at once, one disables');
    }),
  );

  test(
    'health: deleting the webhook removes its health',
    withStorage(factory, async (storage, { db }) => {
      const { webhook } = await withEvents(storage, 1);
      await storage.disableWebhook('acct_a', webhook.id, at(0));
      assert.ok(await db.health(webhook.id));
      assert.ok(await storage.deleteWebhook('acct_a', webhook.id));
      assert.is(await db.health(webhook.id), null);
      assert.is(await storage.getWebhookHealth('acct_a', webhook.id), null);
    }),
  );

  test(
    'recover: queues once each event since `since` that no delivery succeeded or holds pending',
    withStorage(factory, async (storage, { db }) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const publish = async (seconds: number) =>
        (await storage.publishEvents([eventRecord({ createdAt: at(seconds) })]))[0]!;
      const old = await publish(0);
      const delivered = await publish(10);
      const exhausted = await publish(20);
      const stillPending = await publish(30);
      const held = await publish(40);
      const other = webhookRecord({ type: 'agreement-signed' });
      await storage.insertWebhook(other);
      const [ofOther] = await storage.publishEvents([eventRecord({ type: 'agreement-signed', createdAt: at(25) })]);
      const [testCall] = await storage.publishEvents([eventRecord({ type: 'webhook.test', createdAt: at(26) })], {
        webhookId: webhook.id,
      });
      // Due by 35: all but `held`, which falls due after the webhook is disabled.
      await storage.claimDeliveries({ now: at(35), leaseUntil: at(95), limit: 100, owner: 'w' });
      for (const [delivery, statusCode, outcome] of [
        [old, 500, failed],
        [delivered, 204, done],
        [exhausted, 500, failed],
        [stillPending, 500, retry(1000)],
        [ofOther!, 500, failed],
        [testCall!, 500, failed],
      ] as const) {
        await storage.recordAttempt({ id: delivery.id, owner: 'w', attempt: attempt(statusCode, 36), outcome });
      }
      await storage.disableWebhook('acct_a', webhook.id, at(41));
      await storage.claimDeliveries({ now: at(50), leaseUntil: at(110), limit: 100, owner: 'w' });
      assert.is((await db.delivery(held.id))!.status, 'cancelled', 'held while disabled');

      let refused = false;
      await storage
        .recoverDeliveries('acct_a', webhook.id, at(5), at(60))
        .catch((error) => (refused = isPortalError(error, 'WEBHOOK_DISABLED')));
      assert.ok(refused, 'refused while disabled');
      await storage.enableWebhook('acct_a', webhook.id);
      assert.is(await storage.recoverDeliveries('acct_b', webhook.id, at(5), at(60)), null);
      const made = (await storage.recoverDeliveries('acct_a', webhook.id, at(5), at(60)))!;
      assert.equal(
        made.map((d) => d.eventId),
        [exhausted.eventId, held.eventId],
        'oldest first; not before `since`, not delivered, not pending, not a test call',
      );
      for (const delivery of made) {
        assert.equal(
          { ...delivery, id: '', eventId: '' },
          {
            id: '',
            accountId: 'acct_a',
            webhookId: webhook.id,
            eventId: '',
            eventType: webhook.type,
            status: 'pending',
            attempts: [],
            attemptCount: 0,
            nextAttemptAt: at(60),
            createdAt: at(60),
            leaseOwner: null,
            leaseUntil: null,
            orderingKey: null,
            redeliverQueued: false,
          },
        );
        assert.equal(await db.delivery(delivery.id), delivery);
      }
      assert.equal(
        await storage.recoverDeliveries('acct_a', webhook.id, at(5), at(61)),
        [],
        'a second recovery queues nothing twice',
      );
      assert.equal(
        await storage.recoverDeliveries('acct_a', other.id, at(0), at(61)).then((d) => d!.map((x) => x.eventId)),
        [ofOther!.eventId],
      );
      const claimed = await storage.claimDeliveries({ now: at(60), leaseUntil: at(120), limit: 100, owner: 'w' });
      assert.equal(claimed.map((c) => c.delivery.id).sort(), made.map((d) => d.id).sort(), 'due at once');
      await storage.recordAttempt({ id: made[0]!.id, owner: 'w', attempt: attempt(500, 61), outcome: failed });
      assert.equal(
        await storage.recoverDeliveries('acct_a', webhook.id, at(5), at(62)).then((d) => d!.map((x) => x.eventId)),
        [exhausted.eventId],
        'failed again: recoverable again',
      );
      const all = await storage.recoverDeliveries('acct_a', webhook.id, at(0), at(63));
      assert.equal(
        all!.map((d) => d.eventId),
        [old.eventId],
      );
    }),
  );

  test(
    'recover: two recoveries at once never queue one event twice',
    withStorage(factory, async (storage) => {
      const { webhook } = await withEvents(storage, 5);
      await attemptAll(storage, 0, 500, failed);
      const made = await Promise.all(
        Array.from({ length: 4 }, () => storage.recoverDeliveries('acct_a', webhook.id, at(0), at(10))),
      );
      assert.is(
        made.reduce((sum, list) => sum + list!.length, 0),
        5,
      );
      assert.is((await everyDelivery(storage, 'acct_a', webhook.id)).length, 10);
    }),
  );

  test(
    'health: in a worker, a receiver that fails past the thresholds is disabled and `webhook.disabled` is emitted once',
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      let now = new Date(T0);
      const emitted: OperationalEvent[] = [];
      let calls = 0;
      const transport: WebhookTransport = {
        async send() {
          calls++;
          return { statusCode: 500, headers: {}, error: null };
        },
      };
      const worker = createWebhookWorker({
        storage,
        transport,
        clock: () => now,
        logger: silentLogger,
        tick: '0 0 0 1 1 *',
        timeoutMs: 1000,
        concurrency: 4,
        retrySchedule: [60, 60, 60, 60, 60],
        random: () => 0.5,
        ...RULE,
        emit: (event) => emitted.push(event),
      });
      const [delivery] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      for (let seconds = 0; seconds <= 600; seconds += 60) {
        now = new Date(Date.parse(at(seconds)));
        await worker.tick();
      }
      await worker.stop();
      const disabled = emitted.filter((event) => event.type === 'webhook.disabled');
      assert.equal(disabled, [
        {
          type: 'webhook.disabled',
          accountId: 'acct_a',
          webhookId: webhook.id,
          deliveryId: delivery!.id,
          reason: 'failing',
          at: at(120),
        },
      ]);
      assert.is(calls, 3, 'no call after the third failure disabled it');
      assert.is(
        (await storage.getDelivery('acct_a', delivery!.id))!.status,
        'cancelled',
        'its retry fell due while disabled',
      );
      assert.equal(
        emitted.filter((event) => event.type !== 'webhook.disabled'),
        [],
      );
    }),
  );

  test(
    'hold: an answer that holds the webhook keeps the later hold, costs no health, and the claim defers its due deliveries',
    withStorage(factory, async (storage, { db }) => {
      const { webhook, deliveries } = await withEvents(storage, 3);
      const other = webhookRecord({ id: 'wbh_other' });
      await storage.insertWebhook(other);
      const [mine] = await storage.claimDeliveries({ now: at(0), leaseUntil: at(60), limit: 1, owner: 'worker-1' });
      assert.ok(deliveries.some((one) => one.id === mine!.delivery.id));
      const held = { ...attempt(429, 1), held: true as const };
      assert.equal(
        await storage.recordAttempt({
          id: mine!.delivery.id,
          owner: 'worker-1',
          attempt: held,
          outcome: retry(30),
          hold: at(30),
        }),
        recorded(),
      );
      const health = (await storage.getWebhookHealth('acct_a', webhook.id))!;
      assert.equal(
        [health.heldUntil, health.consecutiveFailures, health.failingSince, health.lastAttemptAt],
        [at(30), 0, null, null],
        'held until then; no failure counted',
      );
      assert.equal(await db.health(webhook.id), health);
      assert.equal((await storage.getDelivery('acct_a', mine!.delivery.id))!.attempts.at(-1), held);

      // Published meanwhile: the other webhook's deliveries go out, the held one's wait.
      await storage.publishEvents([eventRecord({ createdAt: at(2) })]);
      const both = [
        ...(await storage.claimDeliveries({ now: at(5), leaseUntil: at(65), limit: 100, owner: 'worker-1' })),
        ...(await storage.claimDeliveries({
          now: at(5),
          leaseUntil: at(65),
          limit: 100,
          owner: 'worker-2',
          perAccount: { max: 100, inFlight: {} },
        })),
      ];
      assert.equal(
        both.map(({ delivery }) => delivery.webhookId),
        [other.id],
        "only the other webhook's delivery is leased",
      );
      for (const one of await everyDelivery(storage, 'acct_a', webhook.id)) {
        assert.is(one.status, 'pending', one.id);
        assert.is(one.nextAttemptAt, at(30), `${one.id} is due when the hold ends`);
      }

      // An earlier hold changes nothing; a later one extends it.
      const [second] = await storage.claimDeliveries({ now: at(30), leaseUntil: at(90), limit: 1, owner: 'worker-1' });
      assert.is(second!.delivery.webhookId, webhook.id, 'due once the hold ends');
      await storage.recordAttempt({
        id: second!.delivery.id,
        owner: 'worker-1',
        attempt: held,
        outcome: retry(31),
        hold: at(31),
      });
      assert.is((await storage.getWebhookHealth('acct_a', webhook.id))!.heldUntil, at(31));
      const [third] = await storage.claimDeliveries({ now: at(31), leaseUntil: at(91), limit: 1, owner: 'worker-1' });
      await storage.recordAttempt({
        id: third!.delivery.id,
        owner: 'worker-1',
        attempt: held,
        outcome: retry(40),
        hold: at(40),
      });
      const [fourth] = await storage.claimDeliveries({ now: at(31), leaseUntil: at(91), limit: 1, owner: 'worker-1' });
      assert.is(fourth, undefined, 'held again until 40');
      assert.is((await storage.getWebhookHealth('acct_a', webhook.id))!.heldUntil, at(40));
      assert.equal(
        (await storage.claimDeliveries({ now: at(40), leaseUntil: at(100), limit: 100, owner: 'worker-1' })).length,
        4,
        "every one of the webhook's four deliveries is due when the last hold ends",
      );
    }),
  );

  test(
    "rate limit: a limited webhook's due deliveries are paced into seconds, at most rateLimit to one, across claims of both kinds and owners; another webhook is not slowed; a new limit paces what waits again",
    withStorage(factory, async (storage) => {
      const limited = webhookRecord({ rateLimit: 3 });
      const other = webhookRecord({ id: 'wbh_other', createdAt: at(0) });
      for (const webhook of [limited, other]) await storage.insertWebhook(webhook);
      await storage.publishEvents(Array.from({ length: 10 }, () => eventRecord({ createdAt: at(0) })));
      const fair = (now: number, owner = 'worker-1') =>
        storage.claimDeliveries({
          now: at(now),
          leaseUntil: at(now + 60),
          limit: 100,
          owner,
          perAccount: { max: 100, inFlight: {} },
        });
      const plain = (now: number, owner: string) =>
        storage.claimDeliveries({ now: at(now), leaseUntil: at(now + 60), limit: 100, owner });
      const of = (claimed: { delivery: DeliveryRecord }[], webhook: WebhookRecord) =>
        claimed.filter(({ delivery }) => delivery.webhookId === webhook.id).length;
      const waiting = async () =>
        (await everyDelivery(storage, 'acct_a', limited.id))
          .filter((one) => one.status === 'pending' && one.leaseOwner === null)
          .map((one) => one.nextAttemptAt)
          .sort();

      const first = await fair(0);
      assert.equal([of(first, limited), of(first, other)], [3, 10], 'three of the limited webhook, all of the other');
      assert.equal(await waiting(), [at(1), at(1), at(1), at(2), at(2), at(2), at(3)], 'the rest, due a second each');
      assert.equal((await fair(0, 'worker-2')).length, 0, 'the second is spent, for every owner');

      const second = [...(await plain(1, 'worker-2')), ...(await fair(1, 'worker-3'))];
      assert.is(of(second, limited), 3, "second 1's three, once");

      // A higher limit: what waited is paced again, and the three of this second count toward it.
      const raised = await storage.updateWebhook('acct_a', limited.id, { rateLimit: 5 }, at(1));
      assert.is(raised!.rateLimit, 5);
      assert.is(of(await fair(1), limited), 2, 'five in second 1 in all');
      assert.equal(await waiting(), [at(2), at(2)]);
      await storage.updateWebhook('acct_a', limited.id, { rateLimit: null }, at(1));
      assert.is(of(await fair(1), limited), 2, 'no limit: what waited goes now');
      assert.equal(await waiting(), []);
    }),
  );

  test(
    'calls in flight: a claim leases none of a webhook named full, which stays due; the limit a worker sets is kept for the health and survives in it',
    withStorage(factory, async (storage, { db }) => {
      const { webhook } = await withEvents(storage, 2);
      const other = webhookRecord({ id: 'wbh_other', createdAt: at(0) });
      await storage.insertWebhook(other);
      await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      const claims = [
        () =>
          storage.claimDeliveries({
            now: at(1),
            leaseUntil: at(61),
            limit: 10,
            owner: 'w',
            fullWebhooks: [webhook.id],
          }),
        () =>
          storage.claimDeliveries({
            now: at(1),
            leaseUntil: at(61),
            limit: 10,
            owner: 'w',
            perAccount: { max: 10, inFlight: {} },
            fullWebhooks: [webhook.id],
          }),
      ];
      for (const claim of claims) {
        const claimed = await claim();
        assert.ok(
          claimed.every(({ delivery }) => delivery.webhookId === other.id),
          'none of the full webhook',
        );
      }
      const free = await storage.claimDeliveries({
        now: at(2),
        leaseUntil: at(62),
        limit: 10,
        owner: 'w',
        perAccount: { max: 10, inFlight: {} },
      });
      assert.is(
        free.filter(({ delivery }) => delivery.webhookId === webhook.id).length,
        3,
        'its deliveries stayed due: the next claim takes them',
      );

      assert.is((await storage.getWebhookHealth('acct_a', webhook.id))!.inFlightLimit, null, 'none at first');
      await storage.setInFlightLimit(webhook.id, 4);
      await storage.setInFlightLimit(webhook.id, 2);
      await storage.setInFlightLimit('wbh_missing', 3);
      const health = (await storage.getWebhookHealth('acct_a', webhook.id))!;
      assert.is(health.inFlightLimit, 2, 'the last one set');
      assert.equal(await db.health(webhook.id), health);
      assert.is(health.consecutiveFailures, 0, 'nothing else changes');
      await storage.setInFlightLimit(webhook.id, null);
      assert.is((await storage.getWebhookHealth('acct_a', webhook.id))!.inFlightLimit, null);
    }),
  );

  reopenable(test, factory)(
    'health: survives a reopen',
    withStorage(factory, async (storage, { swap, db }) => {
      const { webhook } = await withEvents(storage, 2);
      await attemptAll(storage, 0, 410, failed);
      const other = webhookRecord({ id: 'wbh_other' });
      await storage.insertWebhook(other);
      await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      const [leased] = await storage.claimDeliveries({ now: at(1), leaseUntil: at(61), limit: 1, owner: 'w' });
      const held = { ...attempt(503, 1), held: true as const };
      await storage.recordAttempt({
        id: leased!.delivery.id,
        owner: 'w',
        attempt: held,
        outcome: retry(99),
        hold: at(99),
      });
      const before = await storage.getWebhookHealth('acct_a', webhook.id);
      const heldBefore = await storage.getWebhookHealth('acct_a', other.id);
      const reopened = await swap();
      assert.equal(await reopened.getWebhookHealth('acct_a', webhook.id), before);
      assert.equal(await db.health(webhook.id), before);
      assert.is(before!.disabledReason, 'gone');
      assert.equal(await reopened.getWebhookHealth('acct_a', other.id), heldBefore);
      assert.is(heldBefore!.heldUntil, at(99));
    }),
  );
}
