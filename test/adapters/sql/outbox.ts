import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Storage } from '../../../src/ports.js';
import type { DeliveryAttempt } from '../../../src/records.js';
import { webhookRecord } from '../../conformance/fixtures.js';
import { rejects } from '../../helpers/server.js';
import { eventRecord, rowsOf, withSqlStorage, type SqlBackend } from './context.js';
import { everyDelivery } from '../../helpers/every-delivery.js';
import { recorded } from '../../helpers/attempts.js';
import { wrapClient } from '../../../adapters/sql/client.js';
import { sqlStorage } from '../../../adapters/sql/index.js';
import { migrate } from '../../../adapters/sql/migrations.js';
import { resolveNames } from '../../../adapters/sql/schema.js';
import { STORAGE_MIGRATIONS } from '../../../adapters/sql/storage-migrations.js';
import { dropSchema, freshSchema, untilBlockedBy } from '../../helpers/sql.js';

const at = (minute: number) => `2026-01-01T00:${String(minute).padStart(2, '0')}:00+00:00`;
const attempt = (minute: number, statusCode: number | null): DeliveryAttempt => ({
  at: at(minute),
  statusCode,
  error: statusCode === null ? 'connect ECONNREFUSED' : null,
  durationMs: 12,
});

/** The outbox: fan-out, claim, lease, attempts, cancel and redeliver. */
export function outboxTests(test: Test, backend: SqlBackend): void {
  test(
    "outbox: publishEvents makes one pending delivery per webhook of the event's account and type",
    withSqlStorage(backend, async (storage, { db }) => {
      const first = webhookRecord();
      const second = webhookRecord({ createdAt: at(1) });
      const otherType = webhookRecord({ type: 'agreement-signed' });
      const otherAccount = webhookRecord({ accountId: 'acct_b' });
      for (const webhook of [first, second, otherType, otherAccount]) await storage.insertWebhook(webhook);
      const inA = eventRecord({ createdAt: at(5) });
      const inB = eventRecord({ accountId: 'acct_b', createdAt: at(6) });
      const unheard = eventRecord({ type: 'nobody-listens' });
      const created = await storage.publishEvents([inA, inB, unheard]);

      assert.equal(
        created.map((delivery) => [delivery.eventId, delivery.webhookId]).sort(),
        [
          [inA.id, first.id],
          [inA.id, second.id],
          [inB.id, otherAccount.id],
        ].sort(),
      );
      for (const delivery of created) {
        assert.match(delivery.id, /^whd_[0-9A-Za-z]{22}$/);
        const event = delivery.eventId === inA.id ? inA : inB;
        assert.equal(delivery, {
          id: delivery.id,
          accountId: event.accountId,
          webhookId: delivery.webhookId,
          eventId: event.id,
          eventType: event.type,
          status: 'pending',
          attempts: [],
          attemptCount: 0,
          nextAttemptAt: event.createdAt,
          createdAt: event.createdAt,
          leaseOwner: null,
          leaseUntil: null,
          orderingKey: null,
          redeliverQueued: false,
        });
        assert.equal(await storage.getDelivery(delivery.accountId, delivery.id), delivery);
      }
      assert.is(await storage.getDelivery('acct_b', created.find((d) => d.accountId === 'acct_a')!.id), null);
      assert.equal(await db.event(unheard.id), unheard);
    }),
  );

  test(
    'outbox: a batch with an event id already stored changes nothing',
    withSqlStorage(backend, async (storage, { schema, db }) => {
      await storage.insertWebhook(webhookRecord());
      const stored = eventRecord();
      await storage.publishEvents([stored]);
      const fresh = eventRecord();
      await rejects(() => storage.publishEvents([fresh, stored]), /./);
      assert.is(await db.event(fresh.id), null);
      assert.is((await rowsOf(backend.client, schema, 'queue')).length, 1);
    }),
  );

  test(
    'outbox: with table statistics, the fair claim reads a few rows per account, not the due backlog',
    withSqlStorage(backend, async (storage, { schema }) => {
      const webhooks = Array.from({ length: 8 }, (_, i) => webhookRecord({ accountId: `acct_${i}` }));
      for (const webhook of webhooks) await storage.insertWebhook(webhook);
      const backlog = 600;
      for (const webhook of webhooks) {
        await storage.publishEvents(
          Array.from({ length: backlog }, (_, i) =>
            eventRecord({ accountId: webhook.accountId, createdAt: at(i % 50) }),
          ),
        );
      }
      const fair = (owner: string, limit: number) =>
        storage.claimDeliveries({
          now: at(59),
          leaseUntil: at(59),
          limit,
          owner,
          perAccount: { max: 8, inFlight: {} },
        });
      // Some in flight at the front of each account's due order, as while a worker delivers.
      assert.is((await fair('worker-1', 16)).length, 16);
      await backend.client.query(`ANALYZE "${schema}".portal_queue, "${schema}".portal_webhook_health`);

      const statement = await capturedClaim(backend, () => fair('worker-2', 4));
      // Planned by index whatever the statistics say (a table analyzed mid-burst gave a bitmap scan
      // of each account's whole due stretch): the settings travel with the claim's transaction, and
      // so does its commit's, which does not wait for the WAL's flush.
      assert.equal(statement.settings, [
        'SET LOCAL enable_seqscan = off',
        'SET LOCAL enable_bitmapscan = off',
        'SET LOCAL jit = off',
        'SET LOCAL plan_cache_mode = force_generic_plan',
        'SET LOCAL synchronous_commit = off',
      ]);
      const read = await deliveryRowsRead(backend, statement);
      // Each account's walk stops at its share: a few dozen rows, where reading the backlog is thousands.
      assert.ok(read < 400, `the claim read ${read} rows of portal_queue, with ${webhooks.length * backlog} due`);
    }),
  );

  test(
    'outbox: the fair claim runs its generic plan from the first run, never planned with its parameters',
    withSqlStorage(backend, async (storage) => {
      const statement = await aFairClaim(backend, storage);
      // Left to choose, the server plans it with its parameters for its first runs on a connection
      // (five, on PostgreSQL), and again whenever it judges the generic plan dearer: up to 25 ms each.
      const settings = statement.settings.filter((setting) => !setting.includes('plan_cache_mode'));
      assert.ok(
        (await plansOver(backend, statement, settings, 3)).custom > 0,
        'planned with its parameters without it',
      );
      assert.equal(await plansOver(backend, statement, statement.settings, 3), { custom: 0, generic: 3 });
    }),
  );

  test(
    'outbox: the fair claim is never compiled by JIT, whatever the planner estimates it costs',
    withSqlStorage(backend, async (storage) => {
      const statement = await aFairClaim(backend, storage);
      // As if the estimate were past jit_above_cost (100,000 by default): a claim's plan over a large
      // queue is, and compiling it cost 147 ms of each claim.
      const everything = ['SET LOCAL jit_above_cost = 0', 'SET LOCAL jit_inline_above_cost = 0'];
      const [available] = (await backend.client.query('SELECT pg_jit_available() AS on')).rows as { on: boolean }[];
      if (available!.on) {
        // Without the claim's settings, the server compiles it: the check below can fail.
        assert.ok((await explained(backend, statement, everything)).JIT !== undefined, 'compiled without them');
      } else {
        console.log(`  ${backend.name}: no JIT in this server; the claim's setting is checked, its effect cannot be`);
      }
      assert.is((await explained(backend, statement, [...everything, ...statement.settings])).JIT, undefined);
    }),
  );

  test(
    'outbox: claim leases due, unleased deliveries, oldest due first, up to the limit',
    withSqlStorage(backend, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const events = [3, 1, 2, 9].map((minute) => eventRecord({ createdAt: at(minute) }));
      await storage.publishEvents(events);

      const claimed = await storage.claimDeliveries({ now: at(5), leaseUntil: at(6), limit: 2, owner: 'worker-1' });
      assert.equal(
        claimed.map((c) => c.delivery.nextAttemptAt),
        [at(1), at(2)],
      );
      for (const { delivery, event, webhook: target } of claimed) {
        assert.is(delivery.leaseOwner, 'worker-1');
        assert.is(delivery.leaseUntil, at(6));
        assert.equal(
          event,
          events.find((e) => e.id === delivery.eventId),
        );
        assert.equal(target, webhook);
      }
      // The third due one; the leased ones and the one due at minute 9 are not offered.
      const next = await storage.claimDeliveries({ now: at(5), leaseUntil: at(6), limit: 10, owner: 'worker-2' });
      assert.equal(
        next.map((c) => c.delivery.nextAttemptAt),
        [at(3)],
      );
      assert.equal(await storage.claimDeliveries({ now: at(6), leaseUntil: at(7), limit: 10, owner: 'worker-3' }), []);
      // Once a lease has ended, its delivery is claimable again.
      const again = await storage.claimDeliveries({ now: at(7), leaseUntil: at(8), limit: 10, owner: 'worker-3' });
      assert.equal(
        again.map((c) => c.delivery.nextAttemptAt),
        [at(1), at(2), at(3)],
      );
      assert.ok(again.every((c) => c.delivery.leaseOwner === 'worker-3'));
      assert.equal(await storage.claimDeliveries({ now: at(7), leaseUntil: at(8), limit: 0, owner: 'worker-4' }), []);
    }),
  );

  test(
    'outbox: recordAttempt appends under the lease only, and releases it',
    withSqlStorage(backend, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [delivery] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      await storage.claimDeliveries({ now: at(1), leaseUntil: at(2), limit: 1, owner: 'worker-1' });

      assert.not.ok(
        (
          await storage.recordAttempt({
            id: delivery!.id,
            owner: 'worker-2',
            attempt: attempt(1, 500),
            outcome: {
              status: 'pending',
              nextAttemptAt: at(5),
            },
          })
        ).recorded,
      );
      assert.ok(
        (
          await storage.recordAttempt({
            id: delivery!.id,
            owner: 'worker-1',
            attempt: attempt(1, null),
            outcome: {
              status: 'pending',
              nextAttemptAt: at(5),
            },
          })
        ).recorded,
      );
      // Released: the same owner cannot record again without claiming again.
      assert.not.ok(
        (
          await storage.recordAttempt({
            id: delivery!.id,
            owner: 'worker-1',
            attempt: attempt(1, 500),
            outcome: {
              status: 'failed',
              nextAttemptAt: null,
            },
          })
        ).recorded,
      );
      let stored = (await storage.getDelivery('acct_a', delivery!.id))!;
      assert.equal(stored.attempts, [attempt(1, null)]);
      assert.equal(
        [stored.status, stored.nextAttemptAt, stored.leaseOwner, stored.leaseUntil],
        ['pending', at(5), null, null],
      );
      // Attempt keys come back in their documented order.
      assert.equal(Object.keys(stored.attempts[0]!), ['at', 'statusCode', 'error', 'durationMs']);

      assert.equal(await storage.claimDeliveries({ now: at(4), leaseUntil: at(9), limit: 5, owner: 'worker-2' }), []);
      await storage.claimDeliveries({ now: at(5), leaseUntil: at(9), limit: 5, owner: 'worker-2' });
      assert.ok(
        (
          await storage.recordAttempt({
            id: delivery!.id,
            owner: 'worker-2',
            attempt: attempt(5, 204),
            outcome: {
              status: 'succeeded',
              nextAttemptAt: null,
            },
          })
        ).recorded,
      );
      stored = (await storage.getDelivery('acct_a', delivery!.id))!;
      assert.equal(stored.attempts, [attempt(1, null), attempt(5, 204)]);
      assert.equal([stored.status, stored.nextAttemptAt, stored.leaseOwner], ['succeeded', null, null]);
      assert.equal(await storage.claimDeliveries({ now: at(59), leaseUntil: at(59), limit: 5, owner: 'worker-3' }), []);
    }),
  );

  test(
    "outbox: deleteWebhook cancels its pending deliveries (leased ones too), not finished ones nor others'",
    withSqlStorage(backend, async (storage) => {
      const doomed = webhookRecord();
      const kept = webhookRecord();
      await storage.insertWebhook(doomed);
      await storage.insertWebhook(kept);
      const [first] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      const doomedFirst =
        first!.webhookId === doomed.id ? first! : (await everyDelivery(storage, 'acct_a', doomed.id))[0]!;
      await storage.claimDeliveries({ now: at(0), leaseUntil: at(1), limit: 10, owner: 'worker-1' });
      await storage.recordAttempt({
        id: doomedFirst.id,
        owner: 'worker-1',
        attempt: attempt(0, 200),
        outcome: {
          status: 'succeeded',
          nextAttemptAt: null,
        },
      });
      await storage.publishEvents([eventRecord({ createdAt: at(2) })]);
      await storage.claimDeliveries({ now: at(3), leaseUntil: at(4), limit: 10, owner: 'worker-2' });

      assert.ok(await storage.deleteWebhook('acct_a', doomed.id));
      const log = await everyDelivery(storage, 'acct_a', doomed.id);
      assert.equal(
        log.map((d) => d.status),
        ['cancelled', 'succeeded'],
      );
      assert.equal([log[0]!.nextAttemptAt, log[0]!.leaseOwner, log[0]!.leaseUntil], [null, null, null]);
      // The worker that held the lease learns the delivery was cancelled.
      assert.not.ok(
        (
          await storage.recordAttempt({
            id: log[0]!.id,
            owner: 'worker-2',
            attempt: attempt(3, 200),
            outcome: {
              status: 'succeeded',
              nextAttemptAt: null,
            },
          })
        ).recorded,
      );
      assert.equal(
        (await everyDelivery(storage, 'acct_a', kept.id)).map((d) => d.status),
        ['pending', 'pending'],
      );
    }),
  );

  test(
    'outbox: redeliver makes a delivery pending again with its attempts kept; listing is newest first',
    withSqlStorage(backend, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const created = await storage.publishEvents([0, 2, 1].map((minute) => eventRecord({ createdAt: at(minute) })));
      assert.equal(
        (await everyDelivery(storage, 'acct_a', webhook.id)).map((d) => d.createdAt),
        [at(2), at(1), at(0)],
      );
      const same = await storage.publishEvents([eventRecord({ createdAt: at(2) })]);
      const newest = (await everyDelivery(storage, 'acct_a', webhook.id)).slice(0, 2).map((d) => d.id);
      assert.equal(newest, [same[0]!.id, created[1]!.id], 'within one second, the one made last comes first');

      const target = created[0]!;
      await storage.claimDeliveries({ now: at(0), leaseUntil: at(1), limit: 1, owner: 'worker-1' });
      await storage.recordAttempt({
        id: target.id,
        owner: 'worker-1',
        attempt: attempt(0, 410),
        outcome: { status: 'failed', nextAttemptAt: null },
      });
      assert.is(await storage.redeliver('acct_b', target.id, at(30)), null);
      const again = (await storage.redeliver('acct_a', target.id, at(30)))!;
      assert.equal(
        [again.status, again.nextAttemptAt, again.leaseOwner, again.attempts.length],
        ['pending', at(30), null, 1],
      );
      assert.equal(await storage.getDelivery('acct_a', target.id), again);
      const claimed = await storage.claimDeliveries({ now: at(30), leaseUntil: at(31), limit: 10, owner: 'worker-2' });
      assert.ok(claimed.some((c) => c.delivery.id === target.id));
    }),
  );

  test(
    'outbox: a pending delivery is in the queue, a finished one in the log only, and a redeliver takes it back',
    withSqlStorage(backend, async (storage, { schema }) => {
      await storage.insertWebhook(webhookRecord());
      const [delivery] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      const where = async () => ({
        queue: (await rowsOf(backend.client, schema, 'queue')).map((row) => row.id),
        log: (await rowsOf(backend.client, schema, 'deliveries')).map((row) => [row.id, row.status]),
      });
      assert.equal(await where(), { queue: [delivery!.id], log: [] });
      await storage.claimDeliveries({ now: at(0), leaseUntil: at(1), limit: 1, owner: 'worker-1' });
      await storage.recordAttempt({
        id: delivery!.id,
        owner: 'worker-1',
        attempt: attempt(0, 500),
        outcome: {
          status: 'pending',
          nextAttemptAt: at(5),
        },
      });
      assert.equal(await where(), { queue: [delivery!.id], log: [] }, 'a retry stays queued');
      await storage.claimDeliveries({ now: at(5), leaseUntil: at(6), limit: 1, owner: 'worker-1' });
      await storage.recordAttempt({
        id: delivery!.id,
        owner: 'worker-1',
        attempt: attempt(5, 204),
        outcome: {
          status: 'succeeded',
          nextAttemptAt: null,
        },
      });
      assert.equal(await where(), { queue: [], log: [[delivery!.id, 'succeeded']] });
      const [kept] = await rowsOf(backend.client, schema, 'deliveries');
      assert.equal([kept!.attempt_count, kept!.lease_owner, kept!.next_attempt_at], [2, null, null]);
      await storage.redeliver('acct_a', delivery!.id, at(9));
      assert.equal(await where(), { queue: [delivery!.id], log: [] });
    }),
  );

  test("migrations: version 22 moves pending deliveries to the queue, keeps the log's order, and adopts strays", async () => {
    const schema = freshSchema();
    const db = wrapClient(backend.client, 'test');
    try {
      await migrate(db, resolveNames({ schema }, 'test'), 'storage', STORAGE_MIGRATIONS.slice(0, 21));
      const webhook = webhookRecord();
      const events = [0, 1, 2].map(() => eventRecord({ createdAt: at(0) }));
      await backend.client.query(
        `INSERT INTO "${schema}".portal_webhooks (id, account_id, type, url, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
        [webhook.id, webhook.accountId, webhook.type, webhook.url, webhook.secret, webhook.createdAt],
      );
      const store = async (event: (typeof events)[number], id: string, status: string) => {
        await backend.client.query(
          `INSERT INTO "${schema}".portal_events (id, account_id, type, created_at, data) VALUES ($1, $2, $3, $4, '{}')
            ON CONFLICT DO NOTHING`,
          [event.id, event.accountId, event.type, event.createdAt],
        );
        await backend.client.query(
          `INSERT INTO "${schema}".portal_deliveries (id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, attempts, attempt_count)
            VALUES ($1, 'acct_a', $2, $3, $4, CASE WHEN $4 = 'pending' THEN $5::timestamptz END, $5, $6, $7::jsonb, 1)`,
          [id, webhook.id, event.id, status, event.createdAt, event.type, JSON.stringify([attempt(0, 500)])],
        );
      };
      // Stored within one second, in this order: the log lists them newest first by their sequence.
      await store(events[0]!, 'whd_c', 'succeeded');
      await store(events[1]!, 'whd_b', 'pending');
      await store(events[2]!, 'whd_a', 'failed');
      const storage = sqlStorage({ client: backend.client, schema });
      await storage.open!();
      try {
        assert.equal(
          (await rowsOf(backend.client, schema, 'queue')).map((row) => row.id),
          ['whd_b'],
        );
        assert.equal((await rowsOf(backend.client, schema, 'deliveries')).map((row) => row.id).sort(), [
          'whd_a',
          'whd_c',
        ]);
        const [pending] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
        assert.equal(
          (await everyDelivery(storage, 'acct_a', webhook.id)).map((d) => [d.id, d.status]),
          [
            [pending!.id, 'pending'],
            ['whd_a', 'failed'],
            ['whd_b', 'pending'],
            ['whd_c', 'succeeded'],
          ],
          "the queue draws from the log's sequence: made last, listed first",
        );
        // An instance of the version before, still running, stores a pending delivery in the log:
        // the next full claim moves it to the queue and leases it.
        const stray = eventRecord({ createdAt: at(0) });
        await store(stray, 'whd_stray', 'pending');
        const claimed = await storage.claimDeliveries({
          now: at(1),
          leaseUntil: at(2),
          limit: 10,
          owner: 'worker-1',
          perAccount: { max: 10, inFlight: {} },
        });
        assert.equal(claimed.map((c) => c.delivery.id).sort(), [pending!.id, 'whd_b', 'whd_stray'].sort());
        assert.equal((await rowsOf(backend.client, schema, 'deliveries', "status = 'pending'")).length, 0);
        assert.equal(
          (await storage.getDelivery('acct_a', 'whd_stray'))!.attempts,
          [attempt(0, 500)],
          'with its attempts',
        );
      } finally {
        await storage.close!();
      }
    } finally {
      await dropSchema(backend.client, schema);
    }
  });

  if (backend.pool !== undefined) {
    const pool = backend.pool;
    test(
      'outbox: a redeliver that waited while the call was recorded finds the delivery in the log and takes it back',
      withSqlStorage(backend, async (storage, { schema }) => {
        await storage.insertWebhook(webhookRecord());
        const [delivery] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
        const holder = await pool.connect();
        try {
          // A record's move, held open: the delivery leaves the queue for the log.
          await holder.query('BEGIN');
          await holder.query(
            `WITH finished AS (DELETE FROM "${schema}".portal_queue WHERE id = $1 RETURNING *)
            INSERT INTO "${schema}".portal_deliveries (id, account_id, webhook_id, event_id, status, created_at, event_type, seq)
              SELECT id, account_id, webhook_id, event_id, 'succeeded', created_at, event_type, seq FROM finished`,
            [delivery!.id],
          );
          const redelivered = storage.redeliver('acct_a', delivery!.id, at(9));
          await untilBlockedBy(holder);
          await holder.query('COMMIT');
          const again = await redelivered;
          assert.equal([again?.status, again?.nextAttemptAt], ['pending', at(9)]);
          assert.equal(
            (await rowsOf(backend.client, schema, 'queue')).map((row) => row.id),
            [delivery!.id],
          );
          assert.equal(await rowsOf(backend.client, schema, 'deliveries'), []);
        } finally {
          holder.release();
        }
      }),
    );
  }

  test(
    'outbox: successes recorded together finish their deliveries; one with a redeliver queued stays pending, one whose lease moved on is not recorded',
    withSqlStorage(backend, async (storage, { db }) => {
      await storage.insertWebhook(webhookRecord());
      await storage.publishEvents([1, 2, 3, 4].map((minute) => eventRecord({ createdAt: at(minute) })));
      const leased = await storage.claimDeliveries({ now: at(5), leaseUntil: at(20), limit: 3, owner: 'w1' });
      const [first, queued, third] = leased.map(({ delivery }) => delivery);
      await storage.redeliver('acct_a', queued!.id, at(5));
      // The fourth, leased by w1 until minute 7, then by w2 once that lease ran out.
      const [late] = await storage.claimDeliveries({ now: at(5), leaseUntil: at(7), limit: 1, owner: 'w1' });
      await storage.claimDeliveries({ now: at(8), leaseUntil: at(9), limit: 10, owner: 'w2' });

      const made = (minute: number) => ({ ...attempt(minute, 200), durationMs: 2_000 });
      const record = (id: string, minute: number) =>
        storage.recordAttempt({
          id,
          owner: 'w1',
          attempt: made(minute),
          outcome: { status: 'succeeded', nextAttemptAt: null },
          health: { disableAfterFailures: 100, disableAfterMs: 1e9 },
        });
      const results = await Promise.all([
        record(first!.id, 10),
        record(queued!.id, 10),
        record(third!.id, 10),
        record(late!.delivery.id, 10),
      ]);
      assert.equal(
        results.map((one) => [one.recorded, one.dueAgain]),
        [
          [true, false],
          [true, true],
          [true, false],
          [false, false],
        ],
      );
      for (const done of [first!, third!]) {
        const after = (await db.delivery(done.id))!;
        assert.equal(
          [after.status, after.attempts, after.attemptCount, after.leaseOwner],
          ['succeeded', [made(10)], 1, null],
        );
      }
      const again = (await db.delivery(queued!.id))!;
      assert.equal(
        [again.status, again.nextAttemptAt, again.redeliverQueued, again.attempts, again.leaseOwner],
        ['pending', '2026-01-01T00:10:02+00:00', false, [made(10)], null],
        'pending, due as the call ended',
      );
      const untouched = (await db.delivery(late!.delivery.id))!;
      assert.equal([untouched.status, untouched.leaseOwner, untouched.attempts], ['pending', 'w2', []]);
    }),
  );

  test(
    'outbox: a success whose delivery another statement changes while it is recorded is recorded on the new version',
    withSqlStorage(backend, async (storage, { schema, db }) => {
      if (backend.pool === undefined) {
        console.log('  skipped on PGlite: one connection, so no statement runs beside the record');
        return;
      }
      await storage.insertWebhook(webhookRecord());
      await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      const [claimed] = await storage.claimDeliveries({ now: at(5), leaseUntil: at(6), limit: 1, owner: 'w1' });
      const delivery = claimed!.delivery;
      const holder = await backend.pool.connect();
      try {
        // A redeliver of the delivery in flight, committed once the record has read the row and
        // waits for it: the record must not finish the version it read.
        await holder.query('BEGIN');
        await holder.query(`UPDATE "${schema}".portal_queue SET redeliver_queued = true WHERE id = $1`, [delivery.id]);
        const made = { ...attempt(10, 200), durationMs: 2_000 };
        const recording = storage.recordAttempt({
          id: delivery.id,
          owner: 'w1',
          attempt: made,
          outcome: { status: 'succeeded', nextAttemptAt: null },
          health: { disableAfterFailures: 100, disableAfterMs: 1e9 },
        });
        await untilBlockedBy(holder);
        await holder.query('COMMIT');
        assert.equal(await recording, recorded({ dueAgain: true }));
        const after = (await db.delivery(delivery.id))!;
        assert.equal(
          [after.status, after.redeliverQueued, after.attempts, after.attemptCount],
          ['pending', false, [made], 1],
        );
        assert.equal(await rowsOf(backend.client, schema, 'deliveries'), []);
      } finally {
        holder.release();
      }
    }),
  );
}

/** A statement as the driver was handed it. */
interface Sent {
  text: string;
  values: unknown[];
}

type Querying = { query(config: unknown, values?: unknown[]): Promise<unknown> };

/** Records what `target.query` is handed, until the returned function puts it back. */
function recordQueries(target: Querying, sent: Sent[]): () => void {
  const original = Object.getOwnPropertyDescriptor(target, 'query');
  const send = target.query;
  target.query = function (this: unknown, config: unknown, values?: unknown[]) {
    const named = config as { text?: string; values?: unknown[] };
    sent.push(
      typeof config === 'string'
        ? { text: config, values: values ?? [] }
        : { text: named.text!, values: named.values ?? [] },
    );
    return send.call(this, config, values);
  };
  return () => {
    if (original === undefined) delete (target as { query?: unknown }).query;
    else Object.defineProperty(target, 'query', original);
  };
}

/** A fair claim's statement, as a worker sends it over a queue of 20 due deliveries of one webhook. */
async function aFairClaim(backend: SqlBackend, storage: Storage): Promise<Sent & { settings: string[] }> {
  await storage.insertWebhook(webhookRecord());
  await storage.publishEvents(Array.from({ length: 20 }, () => eventRecord({ createdAt: at(0) })));
  const claim = (limit: number) =>
    storage.claimDeliveries({
      now: at(1),
      leaseUntil: at(59),
      limit,
      owner: 'worker-1',
      perAccount: { max: 8, inFlight: {} },
    });
  // The first claim of a store is a full one, with statements of its own beside it.
  assert.is((await claim(1)).length, 1);
  return capturedClaim(backend, () => claim(4));
}

/**
 * The one statement `claim` sends with `WITH RECURSIVE` (the fair claim), with the `SET LOCAL`s of
 * its transaction: whatever went through the client, a connection checked out of the pool, or a
 * PGlite transaction.
 */
async function capturedClaim(
  backend: SqlBackend,
  claim: () => Promise<unknown>,
): Promise<Sent & { settings: string[] }> {
  const sent: Sent[] = [];
  const restores = [recordQueries(backend.client as unknown as Querying, sent)];
  const pool = backend.pool as unknown as { connect(): Promise<Querying> } | undefined;
  const withTransaction = backend.client as unknown as {
    transaction?: (work: (tx: Querying) => Promise<unknown>) => Promise<unknown>;
  };
  if (pool !== undefined) {
    const connect = pool.connect;
    pool.connect = async function (this: unknown) {
      const connection = await connect.call(this);
      restores.push(recordQueries(connection, sent));
      return connection;
    };
    restores.push(() => delete (pool as { connect?: unknown }).connect);
  } else if (typeof withTransaction.transaction === 'function') {
    const transaction = withTransaction.transaction;
    withTransaction.transaction = function (this: unknown, work) {
      return transaction.call(this, (tx) => {
        restores.push(recordQueries(tx, sent));
        return work(tx);
      });
    };
    restores.push(() => delete withTransaction.transaction);
  }
  try {
    await claim();
  } finally {
    for (const restore of restores.reverse()) restore();
  }
  const claims = sent.filter((one) => one.text.includes('WITH RECURSIVE'));
  assert.is(claims.length, 1, 'one fair claim statement');
  const settings = sent.flatMap((one) => one.text.split('; ')).filter((statement) => statement.startsWith('SET LOCAL'));
  return { ...claims[0]!, settings };
}

/**
 * A parameter as an SQL literal of unknown type, which EXECUTE casts to the parameter's type: the
 * statements cast every parameter, so PREPARE learns each one's type from the text.
 */
function literal(value: unknown): string {
  const quote = (text: string) => `'${text.replace(/'/g, "''")}'`;
  if (value === null || value === undefined) return 'NULL';
  if (Array.isArray(value)) {
    const items = value.map((item) =>
      item === null ? 'NULL' : `"${String(item).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`,
    );
    return quote(`{${items.join(',')}}`);
  }
  return quote(String(value));
}

/** The name `withPrepared` prepares a statement under. */
const PROBE = 'customer_portal_probe';

/**
 * On one connection, in a transaction with `settings`, rolled back: `statement` prepared (as the
 * adapter's statements are, so the plan cache and its settings apply), then `run` with a function
 * that executes it, under `EXPLAIN` options when given; deallocated at the end.
 */
async function withPrepared<T>(
  backend: SqlBackend,
  { text, values }: Sent,
  settings: string[],
  run: (execute: (explain?: string) => Promise<Record<string, unknown>[]>, query: Query) => Promise<T>,
): Promise<T> {
  const onConnection = async (query: Query) => {
    let prepared = false;
    await query('BEGIN');
    try {
      for (const setting of settings) await query(setting);
      await query(`PREPARE ${PROBE} AS ${text}`);
      prepared = true;
      const execute = async (explain?: string) =>
        (
          await query(
            `${explain === undefined ? '' : `EXPLAIN (${explain}) `}EXECUTE ${PROBE} (${values.map(literal).join(', ')})`,
          )
        ).rows as Record<string, unknown>[];
      return await run(execute, query);
    } finally {
      await query('ROLLBACK');
      // Prepared statements outlive the transaction; one that failed to prepare has nothing to free.
      if (prepared) await query(`DEALLOCATE ${PROBE}`);
    }
  };
  if (backend.pool === undefined) return onConnection((query, params) => backend.client.query(query, params));
  const connection = await backend.pool.connect();
  try {
    return await onConnection((query, params) => connection.query(query, params));
  } finally {
    connection.release();
  }
}

type Query = (text: string, values?: unknown[]) => Promise<{ rows: unknown[] }>;

/** `statement` run under EXPLAIN ANALYZE with `settings` in its transaction, rolled back: the plan it ran. */
async function explained(
  backend: SqlBackend,
  statement: Sent,
  settings: string[],
): Promise<{ Plan: PlanNode; JIT?: unknown }> {
  const [row] = await withPrepared(backend, statement, settings, (execute) => execute('ANALYZE, FORMAT JSON'));
  const plan = row!['QUERY PLAN'];
  return ((typeof plan === 'string' ? JSON.parse(plan) : plan) as { Plan: PlanNode; JIT?: unknown }[])[0]!;
}

/** How many times `statement` was planned with its parameters, and generically, over `runs` runs with `settings`. */
async function plansOver(
  backend: SqlBackend,
  statement: Sent,
  settings: string[],
  runs: number,
): Promise<{ custom: number; generic: number }> {
  return withPrepared(backend, statement, settings, async (execute, query) => {
    for (let i = 0; i < runs; i++) {
      await query('SAVEPOINT run');
      await execute();
      await query('ROLLBACK TO SAVEPOINT run');
    }
    const { rows } = await query(`SELECT custom_plans, generic_plans FROM pg_prepared_statements WHERE name = $1`, [
      PROBE,
    ]);
    const [row] = rows as { custom_plans: number | string; generic_plans: number | string }[];
    return { custom: Number(row!.custom_plans), generic: Number(row!.generic_plans) };
  });
}

/** Rows of portal_queue's partitions the scans of `statement` read (returned or filtered out), planned as the adapter has it planned. */
async function deliveryRowsRead(backend: SqlBackend, statement: Sent & { settings: string[] }): Promise<number> {
  const root = [await explained(backend, statement, statement.settings)];
  let read = 0;
  const walk = (node: PlanNode) => {
    if (/^portal_queue_(\d+|kept)$/.test(node['Relation Name'] ?? '') && / Scan$/.test(node['Node Type'])) {
      read += (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'];
    }
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(root[0]!.Plan);
  return read;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}
