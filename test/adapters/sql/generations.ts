import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqlStorage } from '../../../adapters/sql/index.js';
import type { SqlClient } from '../../../adapters/sql/index.js';
import type { DeliveryAttempt } from '../../../src/records.js';
import { at, webhookRecord } from '../../conformance/fixtures.js';
import { wrapClient } from '../../../adapters/sql/client.js';
import { migrate } from '../../../adapters/sql/migrations.js';
import { resolveNames } from '../../../adapters/sql/schema.js';
import { STORAGE_MIGRATIONS } from '../../../adapters/sql/storage-migrations.js';
import { dropSchema, freshSchema, giveBackSchema, takeSchema } from '../../helpers/sql.js';
import { eventRecord, rowsOf, withSqlStorage, type SqlBackend } from './context.js';

const MINUTE = 60_000;
type Work = (tx: SqlClient) => Promise<unknown>;
type TransactionOf = (work: Work) => Promise<unknown>;
const attempt = (seconds: number, statusCode: number): DeliveryAttempt => ({
  at: at(seconds),
  statusCode,
  error: null,
  durationMs: 5,
});

/** The partitions of a history table, by name, from the catalog. */
async function partitionsOf(client: SqlClient, schema: string, table: 'events' | 'deliveries'): Promise<string[]> {
  const { rows } = await client.query(
    `SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
      WHERE i.inhparent = $1::regclass ORDER BY c.relname`,
    [`"${schema}"."portal_${table}"`],
  );
  return (rows as { relname: string }[]).map((row) => row.relname.replace(`portal_${table}_`, ''));
}

/** Events and deliveries in generations (SQL partitions), and retention by dropping them. */
export function generationTests(test: Test, backend: SqlBackend): void {
  test(
    'generations: each starts in partitions made ahead; a tick within the span changes nothing; events go to the current one',
    withSqlStorage(backend, async (storage, { schema }) => {
      const { client } = backend;
      assert.equal(await partitionsOf(client, schema, 'events'), ['default', 'g0', 'g1', 'g2']);
      assert.equal(await partitionsOf(client, schema, 'deliveries'), ['default', 'g0', 'g1', 'g2']);
      // The host's clock, far behind the database's that began generation 1: a new one at once.
      await storage.rotateHistory!(at(0), MINUTE);
      assert.equal(await partitionsOf(client, schema, 'events'), ['default', 'g0', 'g1', 'g2', 'g3']);
      await storage.rotateHistory!(at(59), MINUTE);
      assert.equal(await partitionsOf(client, schema, 'deliveries'), ['default', 'g0', 'g1', 'g2', 'g3']);
      const first = eventRecord({ createdAt: at(30) });
      await storage.publishEvents([first]);
      await storage.rotateHistory!(at(60), MINUTE);
      assert.equal(await partitionsOf(client, schema, 'events'), ['default', 'g0', 'g1', 'g2', 'g3', 'g4']);
      const second = eventRecord({ createdAt: at(61) });
      await storage.publishEvents([second]);
      const rows = await rowsOf(client, schema, 'events', 'true ORDER BY created_at');
      assert.equal(
        rows.map((row) => [row.id, row.gen]),
        [
          [first.id, 2],
          [second.id, 3],
        ],
      );
      const generations = await rowsOf(client, schema, 'generations', 'true ORDER BY gen');
      assert.equal(
        generations.map((row) => row.gen),
        [0, 1, 2, 3],
      );
    }),
  );

  test(
    'generations: two instances rotating at once start one generation, and neither fails',
    withSqlStorage(backend, async (storage, { schema }) => {
      const other = sqlStorage({ client: backend.client, schema });
      await other.open!();
      try {
        await Promise.all([storage.rotateHistory!(at(0), MINUTE), other.rotateHistory!(at(0), MINUTE)]);
        await Promise.all([storage.rotateHistory!(at(60), MINUTE), other.rotateHistory!(at(61), MINUTE)]);
        const generations = await rowsOf(backend.client, schema, 'generations', 'true ORDER BY gen');
        assert.equal(
          generations.map((row) => row.gen),
          [0, 1, 2, 3],
        );
        assert.equal(await partitionsOf(backend.client, schema, 'events'), ['default', 'g0', 'g1', 'g2', 'g3', 'g4']);
      } finally {
        await other.close!();
      }
    }),
  );

  test(
    'generations: a pending delivery keeps its event when the generation goes; finished later, it is kept in the default partition, then removed at its time',
    withSqlStorage(backend, async (storage, { schema, db }) => {
      const { client } = backend;
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      await storage.rotateHistory!(at(0), MINUTE);
      const event = eventRecord({ createdAt: at(0), data: { n: 1 } });
      const [delivery] = await storage.publishEvents([event]);
      await storage.rotateHistory!(at(60), MINUTE);
      await storage.rotateHistory!(at(120), MINUTE);
      // Generation 2 is past its time; its one delivery is pending (in the queue).
      assert.equal(await storage.removeExpired({ deliveries: at(600), events: at(600) }, 100), {
        deliveries: 0,
        events: 0,
      });
      assert.not.ok((await partitionsOf(client, schema, 'events')).includes('g2'), 'the generation went');
      assert.equal(
        (await rowsOf(client, schema, 'events_default')).map((row) => row.id),
        [event.id],
        'the event a pending delivery names was kept',
      );
      const [claimed] = await storage.claimDeliveries({ now: at(700), leaseUntil: at(760), limit: 10, owner: 'w' });
      assert.equal(claimed!.event.data, { n: 1 }, 'claimed with its event');
      await storage.recordAttempt({
        id: delivery!.id,
        owner: 'w',
        attempt: attempt(700, 200),
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      assert.equal(
        (await rowsOf(client, schema, 'deliveries_default')).map((row) => row.id),
        [delivery!.id],
        'logged where its generation was',
      );
      assert.is((await storage.getDelivery('acct_a', delivery!.id))!.status, 'succeeded');
      assert.equal(await storage.removeExpired({ deliveries: at(-1), events: at(-1) }, 100), {
        deliveries: 0,
        events: 0,
      });
      assert.equal(await storage.removeExpired({ deliveries: at(600), events: at(600) }, 100), {
        deliveries: 1,
        events: 1,
      });
      assert.is(await db.delivery(delivery!.id), null);
      assert.is(await db.event(event.id), null);
    }),
  );

  test(
    "generations: an event a delivery in the log's default partition names is kept when its generation goes",
    withSqlStorage(backend, async (storage, { schema }) => {
      const { client } = backend;
      await storage.insertWebhook(webhookRecord());
      await storage.rotateHistory!(at(0), MINUTE);
      const event = eventRecord({ createdAt: at(0), data: { n: 2 } });
      const other = eventRecord({ createdAt: at(1) });
      const [delivery] = await storage.publishEvents([event]);
      const [finished] = await storage.publishEvents([other]);
      // An event no webhook is for: nothing names it.
      await storage.publishEvents([eventRecord({ createdAt: at(2), type: 'customer-deleted' })]);
      await storage.rotateHistory!(at(60), MINUTE);
      await storage.rotateHistory!(at(120), MINUTE);
      // The log's partition of generation 2 goes (the events are kept longer); the pending delivery
      // is then logged in the default partition.
      assert.equal(await storage.removeExpired({ deliveries: at(600), events: at(-1) }, 100), {
        deliveries: 0,
        events: 0,
      });
      assert.not.ok((await partitionsOf(client, schema, 'deliveries')).includes('g2'));
      await storage.claimDeliveries({ now: at(700), leaseUntil: at(760), limit: 10, owner: 'w' });
      for (const { id } of [delivery!, finished!])
        await storage.recordAttempt({
          id,
          owner: 'w',
          attempt: attempt(700, 200),
          outcome: { status: 'succeeded', nextAttemptAt: null },
        });
      // Now the events' partition goes, the logged delivery kept (its time is not past).
      assert.equal(await storage.removeExpired({ deliveries: at(-1), events: at(600) }, 100), {
        deliveries: 0,
        events: 1,
      });
      assert.not.ok((await partitionsOf(client, schema, 'events')).includes('g2'), 'the generation went');
      assert.equal(
        (await rowsOf(client, schema, 'events_default')).map((row) => row.id).sort(),
        [event.id, other.id].sort(),
        'the events the logged deliveries name were kept, and only they',
      );
      const page = await storage.listDeliveries('acct_a', delivery!.webhookId, { limit: 10 });
      assert.is(page.deliveries.length, 2);
    }),
  );

  test(
    "generations: a recovered delivery keeps its event's generation in the log until it is past its time too",
    withSqlStorage(backend, async (storage, { schema }) => {
      const { client } = backend;
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      await storage.rotateHistory!(at(0), MINUTE);
      const [failed] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      await storage.claimDeliveries({ now: at(0), leaseUntil: at(60), limit: 10, owner: 'w' });
      await storage.recordAttempt({
        id: failed!.id,
        owner: 'w',
        attempt: attempt(0, 500),
        outcome: { status: 'failed', nextAttemptAt: null },
      });
      await storage.rotateHistory!(at(60), MINUTE);
      // Recovered an hour later: made then, in its event's generation.
      const [recovered] = (await storage.recoverDeliveries('acct_a', webhook.id, at(0), at(3600)))!;
      await storage.claimDeliveries({ now: at(3600), leaseUntil: at(3660), limit: 10, owner: 'w' });
      await storage.recordAttempt({
        id: recovered!.id,
        owner: 'w',
        attempt: attempt(3600, 200),
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      assert.equal(await storage.removeExpired({ deliveries: at(1800), events: at(1800) }, 100), {
        deliveries: 0,
        events: 0,
      });
      assert.ok((await partitionsOf(client, schema, 'deliveries')).includes('g2'), 'kept for the recovered one');
      const [generation] = await rowsOf(client, schema, 'generations', 'gen = 2');
      assert.ok(generation!.log_until !== null, 'and the time it is kept to, learnt');
      assert.equal(await storage.removeExpired({ deliveries: at(3601), events: at(3601) }, 100), {
        deliveries: 2,
        events: 1,
      });
    }),
  );

  test('migrations: version 23 adopts the tables as generation 0: read, claimed, written by the release before, and dropped whole', async () => {
    const schema = freshSchema();
    const { client } = backend;
    try {
      const names = resolveNames({ schema }, 'test');
      const { table } = names;
      const before = STORAGE_MIGRATIONS.filter((migration) => migration.version <= 22);
      await migrate(wrapClient(client, 'test'), names, 'storage', before);
      const webhook = webhookRecord();
      await client.query(
        `INSERT INTO ${table('webhooks')} (id, account_id, type, url, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
        [webhook.id, webhook.accountId, webhook.type, webhook.url, webhook.secret, webhook.createdAt],
      );
      // As the release before stores them: an event with a finished delivery, one with a pending one.
      const stored = async (n: number, status: 'succeeded' | 'pending') => {
        const event = eventRecord({ createdAt: at(n), data: { n } });
        await client.query(
          `INSERT INTO ${table('events')} (id, account_id, type, created_at, data) VALUES ($1, $2, $3, $4, $5)`,
          [event.id, event.accountId, event.type, event.createdAt, JSON.stringify(event.data)],
        );
        const into = status === 'pending' ? table('delivery_queue') : table('deliveries');
        await client.query(
          `INSERT INTO ${into} (id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type${status === 'pending' ? ', seq' : ''})
            VALUES ($1, 'acct_a', $2, $3, $4, $5, $5, $6${status === 'pending' ? `, nextval('${table('delivery_seq')}')` : ''})`,
          [`whd_old${n}`, webhook.id, event.id, status, event.createdAt, event.type],
        );
        return event;
      };
      await stored(0, 'succeeded');
      await stored(1, 'pending');
      const storage = sqlStorage({ client, schema });
      await storage.open!();
      try {
        assert.equal(await partitionsOf(client, schema, 'events'), ['default', 'g0', 'g1', 'g2']);
        assert.is((await rowsOf(client, schema, 'events_g0')).length, 2, 'the events, where they were');
        assert.equal(
          (await rowsOf(client, schema, 'deliveries_g0')).map((row) => row.id),
          ['whd_old0'],
        );
        // Still running during the upgrade, the release before stores as it did: generation 0.
        await stored(2, 'pending');
        const claimed = await storage.claimDeliveries({ now: at(10), leaseUntil: at(70), limit: 10, owner: 'w' });
        assert.equal(
          claimed.map(({ delivery, event }) => [delivery.id, event.data]),
          [
            ['whd_old1', { n: 1 }],
            ['whd_old2', { n: 2 }],
          ],
          'claimed with their events',
        );
        await storage.recordAttempt({
          id: 'whd_old1',
          owner: 'w',
          attempt: attempt(10, 200),
          outcome: { status: 'succeeded', nextAttemptAt: null },
        });
        assert.equal((await storage.getDelivery('acct_a', 'whd_old1'))!.status, 'succeeded');
        // Generation 0 ends when the migration ran: dropped whole once all of it is past its time,
        // the event of the delivery still leased kept.
        await storage.rotateHistory!(at(0), MINUTE);
        assert.equal(await storage.removeExpired({ deliveries: at(60), events: at(60) }, 100), {
          deliveries: 2,
          events: 2,
        });
        assert.not.ok((await partitionsOf(client, schema, 'events')).includes('g0'));
        assert.equal(
          (await rowsOf(client, schema, 'events_default')).map((row) => row.data),
          [{ n: 2 }],
        );
      } finally {
        await storage.close!();
      }
    } finally {
      await dropSchema(client, schema);
    }
  });

  test(
    'generations: a transaction reading the tables holds off a rotation and a drop for as long as it runs, and nothing fails',
    withSqlStorage(backend, async (storage, { schema }) => {
      if (backend.pool === undefined) {
        console.log('  skipped on PGlite: one connection, so no transaction runs beside the store');
        return;
      }
      const { client } = backend;
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      await storage.rotateHistory!(at(0), MINUTE);
      await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      await storage.claimDeliveries({ now: at(0), leaseUntil: at(30), limit: 10, owner: 'w' });
      const reader = await backend.pool.connect();
      try {
        // A long read of every partition: what an analytics query or a forgotten BEGIN holds.
        await reader.query('BEGIN');
        await reader.query(`SELECT count(*) FROM "${schema}".portal_events`);
        const started = performance.now();
        await storage.rotateHistory!(at(60), MINUTE);
        assert.equal(
          await partitionsOf(client, schema, 'events'),
          ['default', 'g0', 'g1', 'g2', 'g3'],
          'no new one yet',
        );
        assert.equal(await storage.removeExpired({ deliveries: at(600), events: at(600) }, 100), {
          deliveries: 0,
          events: 0,
        });
        assert.ok(performance.now() - started < 2000, 'each gave up after its lock timeout');
        await reader.query('COMMIT');
        await storage.rotateHistory!(at(61), MINUTE);
        assert.ok((await partitionsOf(client, schema, 'events')).includes('g4'), 'made on the next tick');
        await storage.removeExpired({ deliveries: at(600), events: at(600) }, 100);
        assert.not.ok((await partitionsOf(client, schema, 'events')).includes('g2'), 'and dropped');
      } finally {
        await reader.query('ROLLBACK').catch(() => {});
        reader.release();
      }
    }),
  );

  test(
    "generations: an events drop locks the log before the events, in a claim's order, so that the two never deadlock",
    withSqlStorage(backend, async (storage, { schema }) => {
      if (backend.pool === undefined) {
        console.log('  skipped on PGlite: one connection, so no transaction runs beside the store');
        return;
      }
      const claim = await backend.pool.connect();
      try {
        // What a claim holds as it starts: the log for the deliveries it cancels, before the events.
        await claim.query('BEGIN');
        await claim.query(`LOCK TABLE ONLY "${schema}".portal_deliveries IN ROW EXCLUSIVE MODE`);
        // Generation 0, empty and closed, is dropped: its events wait for the log's lock.
        const dropping = storage.removeExpired({ deliveries: null, events: at(600) }, 100);
        let seen: { holds_events: boolean } | undefined;
        let done = false;
        // Settled either way: a rejection is seen by the `await dropping` below, not left unhandled.
        const settle = () => {
          done = true;
        };
        void dropping.then(settle, settle);
        while (seen === undefined && !done) {
          const { rows } = await backend.client.query(
            `SELECT EXISTS (SELECT 1 FROM pg_locks AS h
                WHERE h.pid = w.pid AND h.granted AND h.relation = $2::regclass) AS holds_events
              FROM pg_locks AS w WHERE w.relation = $1::regclass AND NOT w.granted AND w.mode = 'ShareLock'`,
            [`"${schema}".portal_deliveries`, `"${schema}".portal_events`],
          );
          seen = rows[0] as { holds_events: boolean } | undefined;
          if (seen === undefined) await new Promise((resolve) => setTimeout(resolve, 2));
        }
        assert.ok(seen !== undefined, 'the drop waited for the log');
        assert.is(seen.holds_events, false, 'holding no lock of the events while it waits');
        // The claim joins the events: not stuck behind the drop.
        await claim.query(`SELECT count(*) FROM "${schema}".portal_events`);
        await claim.query('COMMIT');
        await dropping;
      } finally {
        await claim.query('ROLLBACK').catch(() => {});
        claim.release();
      }
    }),
  );

  test('generations: retention drops partitions and issues no DELETE while the default partitions are empty', async () => {
    const schema = await takeSchema(backend.client);
    // One connection, its statements seen: a pool's own, or PGlite.
    const connection = backend.pool ? await backend.pool.connect() : undefined;
    const base = connection ?? backend.client;
    const statements: string[] = [];
    const seen = (on: SqlClient): SqlClient => ({
      query: (text: string, params?: unknown[]) => {
        statements.push(text);
        return on.query(text, params);
      },
    });
    const pglite = connection === undefined ? (base as SqlClient & { transaction: TransactionOf }) : undefined;
    const client: SqlClient = pglite
      ? Object.assign(seen(pglite), { transaction: (work: Work) => pglite.transaction((tx) => work(seen(tx))) })
      : seen(base);
    const storage = sqlStorage({ client, schema });
    await storage.open!();
    try {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      for (let minute = 0; minute < 5; minute++) {
        await storage.rotateHistory!(at(minute * 60), MINUTE);
        const [made] = await storage.publishEvents([eventRecord({ createdAt: at(minute * 60) })]);
        await storage.claimDeliveries({
          now: at(minute * 60),
          leaseUntil: at(minute * 60 + 30),
          limit: 10,
          owner: 'w',
        });
        await storage.recordAttempt({
          id: made!.id,
          owner: 'w',
          attempt: attempt(minute * 60, 200),
          outcome: {
            status: 'succeeded',
            nextAttemptAt: null,
          },
        });
      }
      statements.length = 0;
      const removed = await storage.removeExpired({ deliveries: at(240), events: at(240) }, 100);
      assert.equal(removed, { deliveries: 4, events: 4 });
      // The hourly call counts (a row a webhook an hour) are still swept row by row.
      assert.equal(
        statements.filter((text) => /\bDELETE\b/.test(text) && !text.includes('portal_webhook_call_stats')),
        [],
      );
      assert.ok(statements.some((text) => /^DROP TABLE/.test(text)));
    } finally {
      await storage.close!();
      connection?.release();
      await giveBackSchema(backend.client, schema);
    }
  });
}
