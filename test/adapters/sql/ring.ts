import { readFileSync } from 'node:fs';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqlStorage } from '../../../adapters/sql/index.js';
import { wrapClient } from '../../../adapters/sql/client.js';
import { migrate } from '../../../adapters/sql/migrations.js';
import { resolveNames } from '../../../adapters/sql/schema.js';
import { STORAGE_MIGRATIONS } from '../../../adapters/sql/storage-migrations.js';
import type { Storage } from '../../../src/ports.js';
import type { DeliveryAttempt } from '../../../src/records.js';
import { at, webhookRecord } from '../../conformance/fixtures.js';
import { dropSchema, freshSchema } from '../../helpers/sql.js';
import { eventRecord, rowsOf, withSqlStorage, type SqlBackend } from './context.js';

const attempt = (seconds: number, statusCode: number): DeliveryAttempt => ({
  at: at(seconds),
  statusCode,
  error: null,
  durationMs: 5,
});

/** A claim at `seconds` that leases nothing new (limit 1, nothing due): the ring's turn only. */
const turnAt = (storage: Storage, seconds: number) =>
  storage.claimDeliveries({ now: at(seconds), leaseUntil: at(seconds), limit: 1, owner: 'turner', fullWebhooks: [] });

/** Each slot's state, in slot order. */
async function ringOf(backend: SqlBackend, schema: string): Promise<string[]> {
  return (await rowsOf(backend.client, schema, 'queue_ring', 'true ORDER BY slot')).map((row) => row.state as string);
}

/** The blocks of docs/operations.md that take a migration back, by their first statement. */
const ROLLBACKS = { 28: 'INSERT INTO portal_delivery_queue', 29: 'ALTER TABLE portal_queue_0 SET LOGGED' };

/** The statements of docs/operations.md that take migration `version` back, as an operator runs them. */
export function rollbackStatements(version: keyof typeof ROLLBACKS): string[] {
  const doc = readFileSync(new URL('../../../../docs/operations.md', import.meta.url), 'utf8');
  const block = new RegExp(`\`\`\`sql\\n(BEGIN;\\n${ROLLBACKS[version]}[\\s\\S]*?COMMIT;)\\n\`\`\``).exec(doc);
  if (block === null) throw new Error(`docs/operations.md: no rollback of version ${version} found`);
  return block[1]!
    .split(/;\n/)
    .map((statement) => statement.replace(/;$/, '').trim())
    .filter((statement) => !/^(BEGIN|COMMIT)$/.test(statement));
}

/**
 * Runs `statements` as an operator does, every instance stopped: in one transaction of one session,
 * the schema on its path.
 */
export async function asOperator(backend: SqlBackend, schema: string, statements: string[]): Promise<void> {
  const connection = backend.pool === undefined ? undefined : await backend.pool.connect();
  const session = connection ?? backend.client;
  try {
    await session.query('BEGIN');
    await session.query(`SET LOCAL search_path TO "${schema}"`);
    for (const statement of statements) await session.query(statement);
    await session.query('COMMIT');
  } finally {
    connection?.release();
  }
}

/** The queue's and the counts' partitions and retirement (adapters/sql/outbox/ring.ts). */
export function ringTests(test: Test, backend: SqlBackend): void {
  test(
    'ring: a slot closes after its span and is emptied a span later; what it still held moves to the kept partition, is recorded and claimed there, and its counts reach their hour',
    withSqlStorage(backend, async (storage, { schema }) => {
      const { client } = backend;
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      // The host's clock, far behind the database's that opened slot 0: slot 1 opens at once.
      await turnAt(storage, 0);
      assert.equal(await ringOf(backend, schema), ['closed', 'current']);
      const [inFlight] = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      const [retried] = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      assert.equal(
        (await rowsOf(client, schema, 'queue_1')).map((row) => row.id).sort(),
        [inFlight!.id, retried!.id].sort(),
        'queued in the current slot',
      );
      const claimed = await storage.claimDeliveries({ now: at(2), leaseUntil: at(100), limit: 10, owner: 'w' });
      assert.is(claimed.length, 2);
      // One fails and is due again at 50 s; the other's call is still in flight when its slot goes.
      await storage.recordAttempt({
        id: retried!.id,
        owner: 'w',
        attempt: attempt(2, 500),
        outcome: { status: 'pending', nextAttemptAt: at(50) },
      });
      assert.is((await rowsOf(client, schema, 'call_counts_1')).length, 1, 'the failure counted in the slot');

      await turnAt(storage, 11);
      assert.equal(
        await ringOf(backend, schema),
        ['current', 'closed'],
        'slot 0, closed before, is emptied and current',
      );
      await turnAt(storage, 15);
      assert.equal(await ringOf(backend, schema), ['current', 'closed'], 'slot 1 waits its span');
      await turnAt(storage, 21);
      assert.equal(await ringOf(backend, schema), ['closed', 'current']);
      assert.is((await rowsOf(client, schema, 'queue_1')).length, 0, 'slot 1 is emptied');
      assert.is((await rowsOf(client, schema, 'call_counts_1')).length, 0);
      assert.equal(
        (await rowsOf(client, schema, 'queue_kept')).map((row) => row.id).sort(),
        [inFlight!.id, retried!.id].sort(),
        'what it held moved to the kept partition',
      );
      const [hour] = await rowsOf(client, schema, 'webhook_call_stats');
      assert.is(hour?.failed, 1, "the slot's counts added to their hour");

      // The call in flight is recorded where its delivery is now, and only it: the current slot's
      // first rows have the same places in their partition as the kept ones in theirs.
      const later = [
        ...(await storage.publishEvents([eventRecord({ createdAt: at(21) })])),
        ...(await storage.publishEvents([eventRecord({ createdAt: at(21) })])),
      ];
      const recorded = await storage.recordAttempt({
        id: inFlight!.id,
        owner: 'w',
        attempt: attempt(22, 200),
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      assert.ok(recorded.recorded);
      assert.is((await storage.getDelivery('acct_a', inFlight!.id))?.status, 'succeeded');
      assert.equal(
        (await rowsOf(client, schema, 'queue_1', 'true ORDER BY ctid')).map((row) => row.id),
        later.map((delivery) => delivery.id),
        'the rows at the same places in the current slot are untouched',
      );
      assert.equal(
        (await storage.claimDeliveries({ now: at(50), leaseUntil: at(100), limit: 10, owner: 'w' })).map(
          (one) => one.delivery.id,
        ),
        [...later.map((delivery) => delivery.id).sort(), retried!.id],
        'the retry is claimed from the kept partition when it falls due',
      );
      const [stats] = await storage.callStats('acct_a', webhook.id, at(0));
      assert.equal([stats?.succeeded, stats?.failed], [1, 1], 'folded and unfolded counts read together');
    }),
  );

  test(
    'ring: a slot the ring cannot lock in time stays closed, the ring stops turning, and nothing is lost; it goes on once free',
    withSqlStorage(backend, async (storage, { schema }) => {
      const { client, pool } = backend;
      if (pool === undefined) {
        console.log(`skip: ${backend.name} has one connection, so no other transaction can hold a slot`);
        return;
      }
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      await turnAt(storage, 0);
      const [pending] = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      // A failure counted in slot 1, and due again once the ring goes on.
      await storage.claimDeliveries({ now: at(2), leaseUntil: at(100), limit: 10, owner: 'w' });
      await storage.recordAttempt({
        id: pending!.id,
        owner: 'w',
        attempt: attempt(2, 500),
        outcome: { status: 'pending', nextAttemptAt: at(68) },
      });
      await turnAt(storage, 11);
      const holder = await pool.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(`SELECT count(*) FROM "${schema}".portal_queue_1`);
        await turnAt(storage, 21);
        assert.equal(await ringOf(backend, schema), ['current', 'closed'], 'slot 1 is still closed');
        // Its counts, locked apart from its deliveries, were folded all the same, and only once.
        assert.is((await rowsOf(client, schema, 'call_counts_1')).length, 0);
        assert.is((await rowsOf(client, schema, 'webhook_call_stats'))[0]?.failed, 1);
        await turnAt(storage, 31);
        await turnAt(storage, 41);
        assert.equal(
          await ringOf(backend, schema),
          ['current', 'closed'],
          'slot 1 is next after 0, and it is not empty yet: 0 stays current',
        );
        await turnAt(storage, 51);
        assert.equal(await ringOf(backend, schema), ['current', 'closed']);
      } finally {
        await holder.query('COMMIT');
        holder.release();
      }
      // Tried again 2, 4, 8 then 16 s after each try that gave up: at 51 + 16 s.
      await turnAt(storage, 61);
      assert.equal(await ringOf(backend, schema), ['current', 'closed'], 'not tried before its time');
      await turnAt(storage, 67);
      assert.equal(await ringOf(backend, schema), ['closed', 'current']);
      const claimed = await storage.claimDeliveries({ now: at(68), leaseUntil: at(100), limit: 10, owner: 'w' });
      assert.equal(
        claimed.map((one) => one.delivery.id),
        [pending!.id],
      );
      assert.is((await rowsOf(client, schema, 'queue_kept')).length, 1);
      const [stats] = await storage.callStats('acct_a', webhook.id, at(0));
      assert.is(stats?.failed, 1, 'the failure counted once, though slot 1 was tried five times');
    }),
  );

  test(
    'ring: with no slot current (its rows changed by hand), records count in slot 0, deliveries go to the kept partition, and the next turn opens a slot',
    withSqlStorage(backend, async (storage, { schema }) => {
      const { client } = backend;
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [first] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      await storage.claimDeliveries({ now: at(0), leaseUntil: at(60), limit: 10, owner: 'w' });
      await client.query(
        `UPDATE "${schema}".portal_queue_ring SET state = 'empty', opened_at = NULL, closed_at = NULL`,
      );
      const recorded = await storage.recordAttempt({
        id: first!.id,
        owner: 'w',
        attempt: attempt(1, 200),
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      assert.ok(recorded.recorded);
      assert.is((await rowsOf(client, schema, 'call_counts_0')).length, 1, 'counted in slot 0');
      const [second] = await storage.publishEvents([eventRecord({ createdAt: at(1) })]);
      assert.equal(
        (await rowsOf(client, schema, 'queue_kept')).map((row) => row.id),
        [second!.id],
      );
      await turnAt(storage, 2);
      assert.equal(await ringOf(backend, schema), ['current', 'empty'], 'the next turn opened a slot');
      const [third] = await storage.publishEvents([eventRecord({ createdAt: at(2) })]);
      assert.equal(
        (await rowsOf(client, schema, 'queue_0')).map((row) => row.id),
        [third!.id],
      );
    }),
  );

  test('migrations: the rollbacks of versions 29 and 28 in docs/operations.md give the release before its pending deliveries and counts, and the upgrade takes them back', async () => {
    const schema = freshSchema();
    const { client } = backend;
    try {
      let storage = sqlStorage({ client, schema });
      await storage.open!();
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [failed] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      const [due] = await storage.publishEvents([eventRecord({ createdAt: at(0) })]);
      // Both leased; one fails and is due again at 5 s, the other's call is in flight.
      await storage.claimDeliveries({ now: at(0), leaseUntil: at(60), limit: 2, owner: 'w' });
      await storage.recordAttempt({
        id: failed!.id,
        owner: 'w',
        attempt: attempt(0, 500),
        outcome: { status: 'pending', nextAttemptAt: at(5) },
      });
      await storage.close!();

      await asOperator(backend, schema, [...rollbackStatements(29), ...rollbackStatements(28)]);
      assert.equal(
        (await rowsOf(client, schema, 'delivery_queue', 'true ORDER BY id')).map((row) => [row.id, row.lease_owner]),
        [failed!.id, due!.id].sort().map((id) => [id, null]),
      );
      const [hour] = await rowsOf(client, schema, 'webhook_call_stats');
      assert.is(hour?.failed, 1);
      const [version] = await rowsOf(
        client,
        schema,
        'migrations',
        "component = 'storage' ORDER BY version DESC LIMIT 1",
      );
      assert.is(version?.version, 27);

      storage = sqlStorage({ client, schema });
      await storage.open!();
      try {
        const claimed = await storage.claimDeliveries({ now: at(5), leaseUntil: at(60), limit: 10, owner: 'w' });
        assert.equal(claimed.map((one) => one.delivery.id).sort(), [failed!.id, due!.id].sort());
        assert.equal(
          (await storage.callStats('acct_a', webhook.id, at(0))).map((one) => one.failed),
          [1],
        );
      } finally {
        await storage.close!();
      }
    } finally {
      await dropSchema(client, schema);
    }
  });

  test('migrations: version 28 moves the queue into the ring: what no lease holds at once, a leased one once its lease runs out', async () => {
    const schema = freshSchema();
    const { client } = backend;
    try {
      const names = resolveNames({ schema }, 'test');
      const { table } = names;
      await migrate(
        wrapClient(client, 'test'),
        names,
        'storage',
        STORAGE_MIGRATIONS.filter((migration) => migration.version <= 27),
      );
      const webhook = webhookRecord();
      await client.query(
        `INSERT INTO ${table('webhooks')} (id, account_id, type, url, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
        [webhook.id, webhook.accountId, webhook.type, webhook.url, webhook.secret, webhook.createdAt],
      );
      // As the release before queues them: one due, one whose call is in flight on one of its instances.
      const queued = async (id: string, leased: boolean) => {
        const event = eventRecord({ createdAt: at(0) });
        await client.query(
          `INSERT INTO ${table('events')} (id, account_id, type, created_at, data) VALUES ($1, $2, $3, $4, '{}')`,
          [event.id, event.accountId, event.type, event.createdAt],
        );
        await client.query(
          `INSERT INTO ${table('delivery_queue')} (id, account_id, webhook_id, event_id, next_attempt_at, created_at, event_type, lease_owner, lease_until)
            VALUES ($1, 'acct_a', $2, $3, $4, $4, $5, $6, CASE WHEN $6::text IS NULL THEN NULL ELSE now() + interval '1 hour' END)`,
          [id, webhook.id, event.id, event.createdAt, event.type, leased ? 'old-instance' : null],
        );
      };
      await queued('whd_due', false);
      await queued('whd_leased', true);
      const storage = sqlStorage({ client, schema });
      await storage.open!();
      try {
        assert.equal(
          (await rowsOf(client, schema, 'queue_kept')).map((row) => row.id),
          ['whd_due'],
        );
        assert.equal(
          (await rowsOf(client, schema, 'delivery_queue')).map((row) => row.id),
          ['whd_leased'],
          'left to the instance whose lease holds it',
        );
        // That instance is gone: its lease runs out, and a full claim adopts the delivery.
        await client.query(`UPDATE ${table('delivery_queue')} SET lease_until = $1`, [at(0)]);
        const claimed = await storage.claimDeliveries({
          now: at(1),
          leaseUntil: at(60),
          limit: 10,
          owner: 'w',
          perAccount: { max: 10, inFlight: {} },
        });
        assert.equal(claimed.map((one) => one.delivery.id).sort(), ['whd_due', 'whd_leased']);
        assert.is((await rowsOf(client, schema, 'delivery_queue')).length, 0);
      } finally {
        await storage.close!();
      }
    } finally {
      await dropSchema(client, schema);
    }
  });
}
