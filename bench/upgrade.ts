/**
 * The online upgrade to partitioned events and log (SQL storage migration 23): a schema at version
 * 22 holding UPGRADE_DELIVERIES finished deliveries (1,000,000) with their events, and
 * UPGRADE_PENDING (10,000) in the queue, made by INSERT … SELECT; then, while a publisher of the
 * release before stores an event and its delivery every 20 ms on a connection of its own, the
 * portal's migration. Prints how long the migration took and the longest the publisher waited for
 * one of its publishes. Then retention drops generation 0 (every record in it past its time but the
 * pending deliveries, whose events it keeps) while this release publishes the same way, and prints
 * how long the drop took and the longest publish during it. Target, each: ≤ 1 s.
 *
 *   node dist/bench/upgrade.js   (UPGRADE_DELIVERIES, UPGRADE_PENDING, TEST_DATABASE_URL)
 */
import pg from 'pg';
import { wrapClient } from '../adapters/sql/client.js';
import { sqlStorage } from '../adapters/sql/index.js';
import { migrate } from '../adapters/sql/migrations.js';
import { currentSlot } from '../adapters/sql/outbox/ring.js';
import { resolveNames } from '../adapters/sql/schema.js';
import { STORAGE_MIGRATIONS } from '../adapters/sql/storage-migrations.js';
import { atom } from '../src/shared/time.js';
import { POSTGRES_URL, connectPostgres, dropSchema } from '../test/helpers/sql.js';
import { emit } from './support/row.js';

const DELIVERIES = Number(process.env.UPGRADE_DELIVERIES ?? 1_000_000);
const PENDING = Number(process.env.UPGRADE_PENDING ?? 10_000);
const BEFORE = 22;

/**
 * Runs `work` while a publisher on a connection of its own stores `statement(n)` every 20 ms, from
 * 500 ms before it to 500 ms after: how long the work took, what it answered, how many publishes
 * ran, and the longest one (and the longest before the work began).
 */
async function whilePublishing<T>(
  statement: (n: number) => [string, unknown[]],
  work: () => Promise<T>,
): Promise<{ took: number; result: T; published: number; longest: number; before: number }> {
  const publisher = new pg.Client({ connectionString: POSTGRES_URL });
  await publisher.connect();
  let publishing = true;
  let longest = 0;
  let published = 0;
  const publishes = (async () => {
    while (publishing) {
      const started = performance.now();
      await publisher.query(...statement(published++));
      longest = Math.max(longest, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  try {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const before = longest;
    const started = performance.now();
    const result = await work();
    const took = performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 500));
    return { took, result, published, longest, before };
  } finally {
    publishing = false;
    await publishes;
    await publisher.end();
  }
}

async function main() {
  const postgres = await connectPostgres({ max: 2 });
  if (postgres.pool === undefined) {
    console.error(`upgrade bench: PostgreSQL skipped: ${postgres.reason}`);
    return;
  }
  const admin = postgres.pool;
  const schema = `upgrade_bench_${process.pid}`;
  const names = resolveNames({ schema }, 'upgrade bench');
  const { table } = names;
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
  try {
    await migrate(
      wrapClient(pool, 'upgrade bench'),
      names,
      'storage',
      STORAGE_MIGRATIONS.filter((migration) => migration.version <= BEFORE),
    );
    const total = DELIVERIES + PENDING;
    console.error(`  storing ${total.toLocaleString('en')} events and deliveries at version ${BEFORE}…`);
    await admin.query(
      `INSERT INTO ${table('events')} (id, account_id, type, created_at, data)
        SELECT 'evt_upgrade' || i, 'acct_' || (i % 8), 'customer-created', now() - (${total} - i) * interval '1 second',
          json_build_object('customer', json_build_object('id', 'cus_' || i, 'name', 'Ada Lovelace'))
        FROM generate_series(1, ${total}) AS i`,
    );
    await admin.query(
      `INSERT INTO ${table('deliveries')} (id, account_id, webhook_id, event_id, status, attempts, attempt_count, created_at, event_type)
        SELECT 'whd_upgrade' || i, 'acct_' || (i % 8), 'wbh_upgrade' || (i % 8), 'evt_upgrade' || i, 'succeeded',
          '[{"at":"2026-01-01T00:00:00+00:00","statusCode":200,"error":null,"durationMs":12}]', 1,
          now() - (${total} - i) * interval '1 second', 'customer-created'
        FROM generate_series(1, ${DELIVERIES}) AS i`,
    );
    await admin.query(
      `INSERT INTO ${table('delivery_queue')} (id, account_id, webhook_id, event_id, next_attempt_at, created_at, event_type, seq)
        SELECT 'whd_upgrade' || i, 'acct_' || (i % 8), 'wbh_upgrade' || (i % 8), 'evt_upgrade' || i,
          now() + interval '1 hour', now() - (${total} - i) * interval '1 second', 'customer-created', i
        FROM generate_series(${DELIVERIES + 1}, ${total}) AS i`,
    );
    await admin.query(`VACUUM ANALYZE ${table('events')}, ${table('deliveries')}, ${table('delivery_queue')}`);

    // The release before, publishing as it does: an event and its queued delivery, one statement.
    const upgrade = await whilePublishing(
      (n) => [
        `WITH events AS (
          INSERT INTO ${table('events')} (id, account_id, type, created_at, data)
          VALUES ('evt_during' || $1::text, 'acct_0', 'customer-created', now(), '{}')
        ) INSERT INTO ${table('delivery_queue')} (id, account_id, webhook_id, event_id, next_attempt_at, created_at, event_type)
          VALUES ('whd_during' || $1::text, 'acct_0', 'wbh_upgrade0', 'evt_during' || $1::text, now(), now(), 'customer-created')`,
        [String(n)],
      ],
      () => migrate(wrapClient(pool, 'upgrade bench'), names, 'storage', STORAGE_MIGRATIONS),
    );
    const { rows } = await admin.query(
      `SELECT (SELECT count(*) FROM ${names.quotedSchema}.portal_events_g0)::int AS events,
        (SELECT count(*) FROM ${names.quotedSchema}.portal_deliveries_g0)::int AS deliveries`,
    );
    console.error(
      `  migration ${BEFORE} → ${STORAGE_MIGRATIONS.at(-1)!.version}: ${upgrade.took.toFixed(0)} ms; publishes during it: ${upgrade.published}, ` +
        `the longest ${upgrade.longest.toFixed(0)} ms (${upgrade.before.toFixed(0)} ms before it); generation 0 holds ${JSON.stringify(rows[0])}`,
    );
    emit({
      scenario: `upgrade to partitions (${DELIVERIES.toLocaleString('en')} deliveries, ${PENDING.toLocaleString('en')} pending): the longest a publish of the release before waited`,
      figure: upgrade.longest,
      unit: 'ms',
      baselineName: 'the migration',
      baseline: upgrade.took,
      ratio: upgrade.longest / upgrade.took,
      target: '≤ 1000 ms',
      holds: upgrade.longest <= 1000,
    });

    // Then retention drops generation 0, all of it past its time, while this release publishes.
    const storage = sqlStorage({ client: pool, schema });
    await storage.open!();
    const generation = `(SELECT max(gen) FROM ${table('generations')})`;
    const drop = await whilePublishing(
      (n) => [
        `WITH events AS (
          INSERT INTO ${table('events')} (id, account_id, type, created_at, data, gen)
          VALUES ('evt_after' || $1::text, 'acct_0', 'customer-created', now(), '{}', ${generation})
        ) INSERT INTO ${table('queue')} (id, account_id, webhook_id, event_id, next_attempt_at, created_at, event_type, event_gen, slot)
          VALUES ('whd_after' || $1::text, 'acct_0', 'wbh_upgrade0', 'evt_after' || $1::text, now(), now(), 'customer-created', ${generation},
            ${currentSlot(names)})`,
        [String(n)],
      ],
      async () => {
        const cutoff = atom(new Date(Date.now() + 1000));
        return storage.removeExpired({ deliveries: cutoff, events: cutoff }, 1);
      },
    );
    console.error(
      `  retention dropping generation 0: ${drop.took.toFixed(0)} ms, removed ${JSON.stringify(drop.result)}; publishes during it: ${drop.published}, ` +
        `the longest ${drop.longest.toFixed(0)} ms (${drop.before.toFixed(0)} ms before it)`,
    );
    emit({
      scenario: `retention dropping a generation of ${DELIVERIES.toLocaleString('en')} deliveries and their events (${PENDING.toLocaleString('en')} pending): the longest a publish waited`,
      figure: drop.longest,
      unit: 'ms',
      baselineName: 'the drop',
      baseline: drop.took,
      ratio: drop.longest / drop.took,
      target: '≤ 1000 ms',
      holds: drop.longest <= 1000,
    });
  } finally {
    await pool.end();
    await dropSchema(admin, schema);
    await admin.end();
  }
}

await main();
