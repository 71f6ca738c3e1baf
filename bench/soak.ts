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

async function main() {
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
            for (const table of [
              'portal_delivery_queue',
              'portal_deliveries',
              'portal_events',
              'portal_webhook_health',
            ]) {
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
