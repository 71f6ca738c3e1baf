/**
 * A soak of the delivery engine with retention (issue 35): 1,000,000 events published through one
 * portal at a paced rate, each delivered at once (a `memoryTransport` answering 200), with
 * `retention` at two minutes and the worker ticking every second, on the fs adapter and then on
 * PostgreSQL. Every 10 s: the process's RSS and heap, the store's size on disk (the record log; the
 * tables with their indexes), and the calls made. Flat after the first retention period is the
 * target: what retention removes keeps pace with what is published.
 *
 * Not part of `npm run bench` (about a quarter of an hour): `npm run bench:soak`, or
 *
 *   node --expose-gc dist/bench/soak.js
 *   (SOAK_EVENTS=1000000, SOAK_RATE=2500, SOAK_RETENTION_MS=120000, SOAK_ADAPTERS=fs,postgres)
 *
 * With SOAK_DAYS (`npm run bench:soak -- --days`, about 100 minutes), simulated days on PostgreSQL instead: a clock the
 * bench moves an hour at a time, SOAK_DAYS_EVENTS events (10,000,000) over SOAK_DAYS days (30),
 * retention SOAK_DAYS_RETENTION days (7), every delivery made in its hour. At the end of each day:
 * the size of the events, the log and the queue with their indexes, their partitions, dead row
 * versions, and the rows deleted from events and the log (`n_tup_del` of their partitions: the
 * default ones are the only ones retention deletes from). Flat after the retention's days is the
 * target, with no row deleted.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { fsStorage } from '../adapters/fs/index.js';
import { memoryTransport } from '../adapters/memory/index.js';
import { sqlStorage } from '../adapters/sql/index.js';
import { createPortal } from '../src/index.js';
import type { Storage } from '../src/ports.js';
import { POSTGRES_URL, connectPostgres, dropSchema } from '../test/helpers/sql.js';
import { emit } from './support/row.js';
import { BENCH_SIGNING_KEYS } from './support/signing-keys.js';

const EVENTS = Number(process.env.SOAK_EVENTS ?? 1_000_000);
const RATE = Number(process.env.SOAK_RATE ?? 2500);
const RETENTION_MS = Number(process.env.SOAK_RETENTION_MS ?? 120_000);
const ADAPTERS = (process.env.SOAK_ADAPTERS ?? 'fs,postgres').split(',');
const ACCOUNTS = 8;
const AT_ONCE = 32;
const SAMPLE_MS = 10_000;

interface Sample {
  second: number;
  published: number;
  delivered: number;
  rssMb: number;
  heapMb: number;
  diskMb: number;
}

async function soak(name: string, storage: Storage, diskBytes: () => Promise<number>): Promise<Sample[]> {
  const transport = memoryTransport();
  const portal = await createPortal({
    auth: { apiKeys: ['soak-bench-key-0123456789abcdef'] },
    signingKeys: BENCH_SIGNING_KEYS,
    storage,
    transport,
    retention: { eventsMs: RETENTION_MS, deliveriesMs: RETENTION_MS },
    webhooks: { tick: '* * * * * *' },
  });
  const accounts = Array.from({ length: ACCOUNTS }, (_, i) => `acct_soak_${i}`);
  for (const account of accounts)
    await portal.webhooks.create(account, { type: 'customer-created', url: 'https://soak.example/in' });
  const samples: Sample[] = [];
  const started = performance.now();
  let published = 0;
  let sampling = true;
  // memoryTransport keeps every call it made: counted and let go as they come, so the bench holds none.
  let delivered = 0;
  const counter = setInterval(() => {
    delivered += transport.calls.length;
    transport.calls.length = 0;
  }, 100);
  const sampler = (async () => {
    for (let next = SAMPLE_MS; sampling; next += SAMPLE_MS) {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + next - performance.now())));
      global.gc?.();
      const memory = process.memoryUsage();
      const sample = {
        second: Math.round((performance.now() - started) / 1000),
        published,
        delivered,
        rssMb: memory.rss / 2 ** 20,
        heapMb: memory.heapUsed / 2 ** 20,
        diskMb: (await diskBytes()) / 2 ** 20,
      };
      samples.push(sample);
      console.error(
        `  ${name} ${String(sample.second).padStart(4)} s  published ${String(published).padStart(8)}  delivered ${String(delivered).padStart(8)}  ` +
          `RSS ${sample.rssMb.toFixed(0).padStart(5)} MiB  heap ${sample.heapMb.toFixed(0).padStart(5)} MiB  disk ${sample.diskMb.toFixed(1).padStart(7)} MiB`,
      );
    }
  })();
  try {
    for (let first = 0; first < EVENTS; first += AT_ONCE) {
      const due = started + (first / RATE) * 1000;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
      const size = Math.min(AT_ONCE, EVENTS - first);
      await Promise.all(
        Array.from({ length: size }, (_, i) =>
          portal.events.publish(accounts[(first + i) % ACCOUNTS]!, 'customer-created', {
            customer: { id: `cus_${first + i}`, name: 'Ada Lovelace' },
          }),
        ),
      );
      published += size;
    }
    // One retention period more: what was published last is removed too.
    await new Promise((resolve) => setTimeout(resolve, RETENTION_MS + 2 * SAMPLE_MS));
  } finally {
    sampling = false;
    await sampler;
    clearInterval(counter);
    await portal.close();
  }
  return samples;
}

function report(name: string, samples: Sample[]) {
  // Flat: the largest figure of the second half of the run against that of its first retention period on.
  const settled = samples.filter((sample) => sample.second * 1000 >= 1.5 * RETENTION_MS);
  const half = settled.slice(Math.floor(settled.length / 2));
  const early = settled.slice(0, Math.floor(settled.length / 2));
  for (const [figure, unit, pick] of [
    ['RSS', 'MiB', (sample: Sample) => sample.rssMb],
    ['heap', 'MiB', (sample: Sample) => sample.heapMb],
    ['disk', 'MiB', (sample: Sample) => sample.diskMb],
  ] as const) {
    const late = Math.max(...half.map(pick));
    const before = Math.max(...early.map(pick));
    emit({
      scenario: `soak (${name}, ${EVENTS.toLocaleString('en')} events at ${RATE}/s, retention ${RETENTION_MS / 1000} s): ${figure}, most in the second half`,
      figure: late,
      unit,
      baselineName: 'most in the first half',
      baseline: before,
      ratio: late / before,
      target: '≤ 1.25×',
      holds: late / before <= 1.25,
    });
  }
  const last = samples.at(-1)!;
  emit({
    scenario: `soak (${name}): calls made`,
    figure: last.delivered,
    unit: 'calls',
    baselineName: 'events published',
    baseline: last.published,
    ratio: last.delivered / last.published,
    target: '≥ 1×',
    holds: last.delivered >= last.published,
  });
}

const DAYS = Number(process.env.SOAK_DAYS ?? 30);
const DAYS_EVENTS = Number(process.env.SOAK_DAYS_EVENTS ?? 10_000_000);
const DAYS_RETENTION = Number(process.env.SOAK_DAYS_RETENTION ?? 7);
const HOUR = 60 * 60 * 1000;

interface Day {
  day: number;
  tablesMb: number;
  indexesMb: number;
  partitions: number;
  dead: number;
  deleted: number;
}

/** Simulated days on PostgreSQL: what the history tables hold and cost at the end of each. */
async function days(): Promise<void> {
  const postgres = await connectPostgres({ max: 2 });
  if (postgres.pool === undefined) {
    console.error(`soak bench (days): PostgreSQL skipped: ${postgres.reason}`);
    return;
  }
  const admin = postgres.pool;
  const schema = `soak_days_${process.pid}`;
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 8 });
  let now = new Date('2026-01-01T00:00:00Z');
  const transport = memoryTransport();
  const portal = await createPortal({
    auth: { apiKeys: ['soak-bench-key-0123456789abcdef'] },
    signingKeys: BENCH_SIGNING_KEYS,
    storage: sqlStorage({ client: pool, schema }),
    transport,
    clock: () => now,
    retention: { eventsMs: DAYS_RETENTION * 24 * HOUR, deliveriesMs: DAYS_RETENTION * 24 * HOUR },
    webhooks: { tick: '0 0 0 1 1 *', concurrency: 64 },
  });
  const history = `c.relname ~ '^portal_(events|deliveries|queue)'`;
  const measure = async (day: number): Promise<Day> => {
    const { rows } = await admin.query(
      `SELECT
        coalesce(sum(pg_table_size(c.oid)) FILTER (WHERE c.relkind = 'r'), 0)::bigint AS tables,
        coalesce(sum(pg_indexes_size(c.oid)) FILTER (WHERE c.relkind = 'r'), 0)::bigint AS indexes,
        count(*) FILTER (WHERE c.relkind = 'r' AND c.relispartition)::int AS partitions,
        coalesce(sum(s.n_dead_tup), 0)::bigint AS dead,
        coalesce(sum(s.n_tup_del) FILTER (WHERE c.relname !~ '^portal_queue'), 0)::bigint AS deleted
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
      WHERE n.nspname = $1 AND ${history}`,
      [schema],
    );
    const row = rows[0] as Record<string, string | number>;
    return {
      day,
      tablesMb: Number(row.tables) / 2 ** 20,
      indexesMb: Number(row.indexes) / 2 ** 20,
      partitions: Number(row.partitions),
      dead: Number(row.dead),
      deleted: Number(row.deleted),
    };
  };
  const accounts = Array.from({ length: ACCOUNTS }, (_, i) => `acct_soak_${i}`);
  const samples: Day[] = [];
  try {
    for (const account of accounts)
      await portal.webhooks.create(account, { type: 'customer-created', url: 'https://soak.example/in' });
    const perHour = Math.ceil(DAYS_EVENTS / (DAYS * 24));
    let published = 0;
    for (let hour = 0; hour < DAYS * 24; hour++) {
      const start = now.getTime();
      for (let first = 0; first < perHour; first += AT_ONCE) {
        // Spread over the hour, as publishes come: each batch at its own time.
        now = new Date(start + Math.floor((first / perHour) * HOUR));
        await Promise.all(
          Array.from({ length: Math.min(AT_ONCE, perHour - first) }, (_, i) =>
            portal.events.publish(accounts[(published + i) % ACCOUNTS]!, 'customer-created', {
              customer: { id: `cus_${published + i}`, name: 'Ada Lovelace' },
            }),
          ),
        );
        published += Math.min(AT_ONCE, perHour - first);
        if (first % 1024 === 0) transport.calls.length = 0;
      }
      // Delivered, then the hour's housekeeping (retention among it), and the queue vacuumed as
      // autovacuum would (this server may run without it).
      now = new Date(start + HOUR);
      await portal.worker!.tick();
      transport.calls.length = 0;
      await admin.query(`VACUUM "${schema}"."portal_queue"`);
      if ((hour + 1) % 24 === 0) {
        const sample = await measure((hour + 1) / 24);
        samples.push(sample);
        console.error(
          `  day ${String(sample.day).padStart(2)}  published ${String(published).padStart(9)}  tables ${sample.tablesMb.toFixed(1).padStart(7)} MiB  ` +
            `indexes ${sample.indexesMb.toFixed(1).padStart(7)} MiB  partitions ${String(sample.partitions).padStart(3)}  dead ${String(sample.dead).padStart(8)}  deleted ${sample.deleted}`,
        );
      }
    }
  } finally {
    await portal.close();
    await pool.end();
    await dropSchema(admin, schema);
    await admin.end();
  }
  // Flat: every day after the retention's days (and one more, for the generation that straddles
  // its time) against the first of them.
  const settled = samples.filter((sample) => sample.day > DAYS_RETENTION + 1);
  const title = `soak (PostgreSQL, ${DAYS} simulated days, ${DAYS_EVENTS.toLocaleString('en')} events, retention ${DAYS_RETENTION} days)`;
  for (const [figure, pick] of [
    ['tables', (sample: Day) => sample.tablesMb],
    ['indexes', (sample: Day) => sample.indexesMb],
  ] as const) {
    const first = pick(settled[0]!);
    const most = Math.max(...settled.map(pick));
    const least = Math.min(...settled.map(pick));
    emit({
      scenario: `${title}: ${figure}, most after day ${DAYS_RETENTION + 1}`,
      figure: most,
      unit: 'MiB',
      baselineName: `day ${settled[0]!.day}`,
      baseline: first,
      ratio: most / first,
      target: '≤ 1.1×, ≥ 0.9×',
      holds: most / first <= 1.1 && least / first >= 0.9,
    });
  }
  const deleted = samples.at(-1)!.deleted;
  emit({
    scenario: `${title}: rows deleted from events and the log`,
    figure: deleted,
    unit: 'rows',
    baselineName: 'none',
    baseline: 0,
    ratio: deleted === 0 ? 1 : Infinity,
    target: '0',
    holds: deleted === 0,
  });
}

async function main() {
  if (process.argv.includes('--days') || process.env.SOAK_DAYS !== undefined) return days();
  for (const adapter of ADAPTERS) {
    if (adapter === 'fs') {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'soak-bench-'));
      try {
        const size = async () => statSync(path.join(dir, 'records.log')).size;
        report('fs', await soak('fs', fsStorage({ dir }), size));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } else if (adapter === 'postgres') {
      const postgres = await connectPostgres({ max: 2 });
      if (postgres.pool === undefined) {
        console.error(`soak bench: PostgreSQL skipped: ${postgres.reason}`);
        continue;
      }
      const schema = `soak_bench_${process.pid}`;
      const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 8 });
      const { rows } = await postgres.pool.query(`SELECT current_setting('autovacuum') = 'on' AS on`);
      const autovacuum = (rows[0] as { on: boolean }).on;
      // Without autovacuum on this server, the bench does its work every 10 s, as it would.
      const vacuum = autovacuum
        ? undefined
        : setInterval(() => {
            for (const table of ['portal_queue', 'portal_deliveries', 'portal_events', 'portal_webhook_health']) {
              postgres.pool!.query(`VACUUM (ANALYZE) "${schema}"."${table}"`).catch(() => {});
            }
          }, SAMPLE_MS);
      try {
        const size = async () => {
          const { rows } = await postgres.pool!.query(
            `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`,
            [schema],
          );
          return Number((rows[0] as { bytes: string }).bytes);
        };
        report('PostgreSQL', await soak('PostgreSQL', sqlStorage({ client: pool, schema }), size));
      } finally {
        clearInterval(vacuum);
        await pool.end();
        await dropSchema(postgres.pool, schema);
        await postgres.pool.end();
      }
    }
  }
}

await main();
