import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Storage } from '../../../src/ports.js';
import { sqlStorage } from '../../../adapters/sql/index.js';
import { at, attempt, webhookRecord } from '../../conformance/fixtures.js';
import { wrapClient } from '../../../adapters/sql/client.js';
import { migrate } from '../../../adapters/sql/migrations.js';
import { resolveNames } from '../../../adapters/sql/schema.js';
import { STORAGE_MIGRATIONS } from '../../../adapters/sql/storage-migrations.js';
import { dropSchema, freshSchema } from '../../helpers/sql.js';
import { asOperator, rollbackStatements } from './ring.js';
import { eventRecord, rowsOf, withSqlStorage, type SqlBackend } from './context.js';

/** What a crash of the server leaves of the unlogged tables: their files reset to empty. */
async function loseUnlogged(backend: SqlBackend, schema: string): Promise<void> {
  await backend.client.query(
    `TRUNCATE "${schema}".portal_queue_0, "${schema}".portal_queue_1, "${schema}".portal_queue_intact`,
  );
}

/** Where each delivery of the queue is: its partition, by id. */
async function partitionsOf(backend: SqlBackend, schema: string): Promise<Record<string, string>> {
  const { rows } = await backend.client.query(
    `SELECT id, tableoid::regclass::text AS part FROM "${schema}".portal_queue ORDER BY id`,
  );
  return Object.fromEntries(
    (rows as { id: string; part: string }[]).map(({ id, part }) => [id, part.replace(/^.*portal_queue_/, '')]),
  );
}

const claimAll = (storage: Storage, seconds: number, owner = 'w') =>
  storage.claimDeliveries({ now: at(seconds), leaseUntil: at(seconds + 60), limit: 100, owner });

/** The queue's unlogged slots, and what a crash of the server takes of them (adapters/sql/outbox/rebuild.ts). */
export function rebuildTests(test: Test, backend: SqlBackend): void {
  test(
    "rebuild: the slots are unlogged and the kept partition is not; after a crash emptied the slots, their untried deliveries come back under their ids, a call in flight's record is refused, and nothing is made twice",
    withSqlStorage(backend, async (storage, { schema }) => {
      const { rows: persistence } = await backend.client.query(
        `SELECT relname, relpersistence FROM pg_class WHERE relnamespace = $1::regnamespace
          AND relname IN ('portal_queue_0', 'portal_queue_1', 'portal_queue_kept', 'portal_queue_intact') ORDER BY relname`,
        [schema],
      );
      assert.equal(
        (persistence as { relname: string; relpersistence: string }[]).map((row) => row.relpersistence),
        ['u', 'u', 'u', 'p'],
        'slots 0 and 1 and the intact row unlogged, the kept partition logged',
      );
      const [one, two] = [webhookRecord(), webhookRecord()];
      await storage.insertWebhook(one);
      await storage.insertWebhook(two);
      // Untried: both deliveries of the first event.
      const untried = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      // Keyed: in the kept partition from the start.
      const keyed = await storage.publishEvents([eventRecord({ createdAt: at(1), orderingKey: 'k' })]);
      // One succeeds (the log), one fails and is due again at 40 s (moved to the kept partition).
      const tried = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      // One in flight when the server goes, one not yet claimed.
      const inFlight = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      assert.is(untried.length + keyed.length + tried.length + inFlight.length, 8);
      const slotted = await partitionsOf(backend, schema);
      for (const delivery of [...untried, ...tried, ...inFlight]) assert.match(slotted[delivery.id]!, /^[01]$/);
      for (const delivery of keyed) assert.is(slotted[delivery.id], 'kept');

      const claimed = await storage.claimDeliveries({ now: at(2), leaseUntil: at(100), limit: 100, owner: 'w' });
      const byId = (id: string) => claimed.find((one) => one.delivery.id === id)!;
      const [succeeded, failed] = tried;
      await storage.recordAttempt({
        id: succeeded!.id,
        owner: 'w',
        attempt: attempt(200, 2),
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      await storage.recordAttempt({
        id: failed!.id,
        owner: 'w',
        attempt: attempt(500, 2),
        outcome: { status: 'pending', nextAttemptAt: at(40) },
      });
      assert.is(
        (await partitionsOf(backend, schema))[failed!.id],
        'kept',
        'a failure leaves its slot with its attempt',
      );
      assert.ok(byId(inFlight[0]!.id), 'leased');
      // Given back but the in-flight one: pending, unleased, as a claim found them.
      await storage.giveBackDeliveries!(
        'w',
        claimed.filter((one) => one.delivery.id !== inFlight[0]!.id).map((one) => one.delivery.id),
      );

      await loseUnlogged(backend, schema);
      assert.is((await rowsOf(backend.client, schema, 'queue_intact')).length, 0);
      // The next turn of the ring makes them again.
      const taken = await claimAll(storage, 3, 'turner');
      await storage.giveBackDeliveries!(
        'turner',
        taken.map((one) => one.delivery.id),
      );
      assert.is((await rowsOf(backend.client, schema, 'queue_intact')).length, 1, 'intact again');
      const after = await partitionsOf(backend, schema);
      assert.equal(
        Object.keys(after).sort(),
        [...untried, ...keyed, failed!, ...inFlight].map((delivery) => delivery.id).sort(),
        'every pending delivery, once; the succeeded one stays in the log alone',
      );
      for (const delivery of [...untried, ...inFlight]) assert.is(after[delivery.id], 'kept');
      const retried = await storage.getDelivery('acct_a', failed!.id);
      assert.equal([retried?.attemptCount, retried?.nextAttemptAt], [1, at(40)], "the failure's attempt and schedule");
      const remade = await storage.getDelivery('acct_a', untried[0]!.id);
      assert.equal(
        [remade?.status, remade?.attemptCount, remade?.nextAttemptAt, remade?.createdAt, remade?.eventId],
        ['pending', 0, at(3), at(1), untried[0]!.eventId],
        'due at the claim that rebuilt it, dated as its event',
      );

      // The call in flight lost its lease with the server: its record is refused, and it is called again.
      const late = await storage.recordAttempt({
        id: inFlight[0]!.id,
        owner: 'w',
        attempt: attempt(200, 3),
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      assert.not.ok(late.recorded);
      const again = (await claimAll(storage, 40)).map((one) => one.delivery.id);
      assert.equal(
        again.sort(),
        [...untried, ...keyed, failed!, ...inFlight].map((delivery) => delivery.id).sort(),
        'all due again, each once',
      );
    }),
  );

  test(
    "rebuild: a lost delivery is due at the claim that makes it again, where the fair claim's floors do not hide it",
    withSqlStorage(backend, async (storage, { schema }) => {
      await storage.insertWebhook(webhookRecord());
      const fair = (seconds: number, limit: number) =>
        storage.claimDeliveries({
          now: at(seconds),
          leaseUntil: at(seconds + 60),
          limit,
          owner: 'w',
          perAccount: { max: 10, inFlight: {} },
        });
      const [first] = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      assert.equal(
        (await fair(2, 1)).map((one) => one.delivery.id),
        [first!.id],
      );
      const [second] = await storage.publishEvents([eventRecord({ createdAt: at(4) })]);
      // The account's walk now starts at 4 s: the first, in flight, is below it.
      assert.equal(
        (await fair(5, 1)).map((one) => one.delivery.id),
        [second!.id],
      );
      await loseUnlogged(backend, schema);
      assert.equal(
        (await fair(6, 10)).map((one) => one.delivery.id).sort(),
        [first!.id, second!.id].sort(),
        'both made again and claimed by the next claim, the one below the floor too',
      );
    }),
  );

  test(
    'rebuild: instances that find the slots lost at once make each delivery once',
    withSqlStorage(backend, async (storage, { schema }) => {
      if (backend.pool === undefined) {
        console.log(`skip: ${backend.name} has one connection, so no two instances rebuild at once`);
        return;
      }
      await storage.insertWebhook(webhookRecord());
      await claimAll(storage, 0);
      const made = [];
      for (let i = 0; i < 20; i++) made.push(...(await storage.publishEvents([eventRecord({ createdAt: at(1) })])));
      await loseUnlogged(backend, schema);
      const instances = [0, 1, 2].map(() => sqlStorage({ client: backend.pool!, schema }));
      try {
        for (const instance of instances) await instance.open!();
        // Each turns the ring in its first claim, which claims nothing yet (limit 1, then given back).
        const taken = await Promise.all(instances.map((instance, i) => claimAll(instance, 2, `w${i}`)));
        assert.equal(
          (await rowsOf(backend.client, schema, 'queue', 'true ORDER BY id')).map((row) => row.id),
          made.map((delivery) => delivery.id).sort(),
          'each lost delivery made once',
        );
        const claimed = taken.flat().map((one) => one.delivery.id);
        assert.is(new Set(claimed).size, claimed.length, 'none claimed twice');
      } finally {
        for (const instance of instances) await instance.close!();
      }
    }),
  );

  test(
    "rebuild: a publish notes what it put in a slot, and the slot's retirement takes the notes with it",
    withSqlStorage(backend, async (storage, { schema }) => {
      await storage.insertWebhook(webhookRecord());
      await claimAll(storage, 0);
      const made = await storage.publishEvents([eventRecord({ createdAt: at(1) }), eventRecord({ createdAt: at(1) })]);
      await storage.publishEvents([eventRecord({ createdAt: at(1), orderingKey: 'k' })]);
      const notes = await rowsOf(backend.client, schema, 'queue_made');
      assert.equal(
        notes.map((row) => [row.slot, row.event_ids, (row.webhook_ids as string[]).length]),
        [[1, made.map((delivery) => delivery.eventId), 2]],
        "one row for the statement's two, in the current slot; none for the keyed one",
      );
      // Claimed and recorded: the slot is empty when it is retired, 20 s on.
      for (const one of await claimAll(storage, 2))
        await storage.recordAttempt({
          id: one.delivery.id,
          owner: 'w',
          attempt: attempt(200, 2),
          outcome: { status: 'succeeded', nextAttemptAt: null },
        });
      await claimAll(storage, 11);
      await claimAll(storage, 21);
      assert.is((await rowsOf(backend.client, schema, 'queue_made', 'slot = 1')).length, 0);
    }),
  );

  test('migrations: version 29 moves what the slots hold to the kept partition before it makes them unlogged', async () => {
    const schema = freshSchema();
    const { client } = backend;
    try {
      const names = resolveNames({ schema }, 'test');
      const db = wrapClient(client, 'test');
      await migrate(
        db,
        names,
        'storage',
        STORAGE_MIGRATIONS.filter((migration) => migration.version <= 28),
      );
      const webhook = webhookRecord();
      await client.query(
        `INSERT INTO ${names.table('webhooks')} (id, account_id, type, url, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
        [webhook.id, webhook.accountId, webhook.type, webhook.url, webhook.secret, webhook.createdAt],
      );
      // As the release before queues them: in the current slot, one with an attempt already.
      for (const [id, attempts] of [
        ['whd_fresh', 0],
        ['whd_tried', 1],
      ] as const)
        await client.query(
          `INSERT INTO ${names.table('queue')} (id, account_id, webhook_id, event_id, next_attempt_at, created_at, event_type, attempt_count, slot)
            VALUES ($1, 'acct_a', $2, 'evt_x', $3, $3, 'customer-created', $4, 0)`,
          [id, webhook.id, at(0), attempts],
        );
      await migrate(db, names, 'storage', STORAGE_MIGRATIONS);
      assert.equal(
        (await rowsOf(client, schema, 'queue_kept', 'true ORDER BY id')).map((row) => [row.id, row.attempt_count]),
        [
          ['whd_fresh', 0],
          ['whd_tried', 1],
        ],
      );
      assert.is((await rowsOf(client, schema, 'queue_0')).length, 0);
      assert.is((await rowsOf(client, schema, 'queue_intact')).length, 1);
    } finally {
      await dropSchema(client, schema);
    }
  });

  test('migrations: the rollback of version 29 in docs/operations.md leaves the slots logged and drops the notes; the upgrade makes them again', async () => {
    const schema = freshSchema();
    const { client } = backend;
    try {
      let storage = sqlStorage({ client, schema });
      await storage.open!();
      await storage.insertWebhook(webhookRecord());
      const [pending] = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      await storage.close!();

      await asOperator(backend, schema, rollbackStatements(29));
      const persistence = async () =>
        (
          (
            await client.query(
              `SELECT string_agg(relpersistence::text, '' ORDER BY relname) AS p FROM pg_class
                WHERE relnamespace = $1::regnamespace AND relname IN ('portal_queue_0', 'portal_queue_1')`,
              [schema],
            )
          ).rows as { p: string }[]
        )[0]!.p;
      assert.is(await persistence(), 'pp');
      const [version] = await rowsOf(
        client,
        schema,
        'migrations',
        "component = 'storage' ORDER BY version DESC LIMIT 1",
      );
      assert.is(version?.version, 28);
      assert.is((await rowsOf(client, schema, 'queue_0')).length, 1, 'the pending delivery kept through the rewrite');

      storage = sqlStorage({ client, schema });
      await storage.open!();
      try {
        assert.is(await persistence(), 'uu');
        assert.equal(
          (await claimAll(storage, 2)).map((one) => one.delivery.id),
          [pending!.id],
        );
      } finally {
        await storage.close!();
      }
    } finally {
      await dropSchema(client, schema);
    }
  });

  test(
    'rebuild: the id SQL computes is the one a publish gives',
    withSqlStorage(backend, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [delivery] = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      const { deliveryIdSql } = await import('../../../adapters/sql/outbox/rebuild.js');
      const { rows } = await backend.client.query(`SELECT ${deliveryIdSql('$1::text', '$2::text')} AS id`, [
        delivery!.eventId,
        webhook.id,
      ]);
      assert.is((rows as { id: string }[])[0]!.id, delivery!.id);
    }),
  );
}
