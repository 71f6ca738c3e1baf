/**
 * A webhook's call charts (`GET /webhooks/{id}/stats`) at 100,000 deliveries over a week, on the fs
 * adapter and on PostgreSQL: the read of the hourly counts and the summary, median of 30 reads of
 * the 7-day window, beside what the chart would cost without them, every attempt in the window
 * aggregated at read time (on fs the delivery log paged through at 500 a page, on PostgreSQL one
 * statement over the deliveries' attempts, the fastest form of it). The seeding records every
 * attempt through `recordAttempt`, so it also gives the record path's rate with the counting in it.
 *
 *   npm run build:bench && node dist/bench/stats.bench.js
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { fsStorage } from '../adapters/fs/index.js';
import { sqlStorage } from '../adapters/sql/index.js';
import { hourOf, summarize, windowStart } from '../src/rules/call-stats.js';
import type { Storage } from '../src/ports.js';
import type { DeliveryCursor, EventRecord, WebhookRecord } from '../src/records.js';
import { newId } from '../src/shared/ids.js';
import { REPORTED, emit } from './support/row.js';
import { median } from './support/median.js';

const DELIVERIES = Number(process.env.BENCH_STATS_DELIVERIES ?? 100_000);
const READS = 30;
const POSTGRES_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const atom = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, '+00:00');

async function timed(run: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < READS; i++) {
    const started = performance.now();
    await run();
    times.push(performance.now() - started);
  }
  return median(times);
}

/** One webhook, DELIVERIES deliveries over the last week, each attempted once; resolves the record rate. */
async function seed(storage: Storage, now: number): Promise<{ webhook: WebhookRecord; perSecond: number }> {
  const first = now - 7 * 24 * 3600_000 + 3 * 3600_000;
  const step = (now - 60_000 - first) / DELIVERIES;
  const webhook: WebhookRecord = {
    id: newId('wbh'),
    accountId: 'acct_bench',
    type: 'customer-created',
    url: 'https://receiver.example/hooks',
    secret: 'whsec_' + Buffer.alloc(24, 7).toString('base64'),
    createdAt: atom(first - 60_000),
  };
  await storage.insertWebhook(webhook);
  let recording = 0;
  for (let start = 0; start < DELIVERIES; start += 1000) {
    const events: EventRecord[] = [];
    for (let i = start; i < Math.min(DELIVERIES, start + 1000); i++) {
      events.push({
        id: newId('evt'),
        accountId: webhook.accountId,
        type: webhook.type,
        createdAt: atom(first + i * step),
        data: { n: i },
      });
    }
    await storage.publishEvents(events);
    const claimed = await storage.claimDeliveries({
      now: atom(now),
      leaseUntil: atom(now + 3600_000),
      limit: 1000,
      owner: 'bench',
    });
    const began = performance.now();
    for (let k = 0; k < claimed.length; k += 100) {
      await Promise.all(
        claimed.slice(k, k + 100).map(({ delivery }, j) => {
          const i = start + k + j;
          const failed = i % 10 === 0;
          return storage.recordAttempt({
            id: delivery.id,
            owner: 'bench',
            attempt: {
              at: atom(Date.parse(delivery.createdAt) + 1000),
              statusCode: failed ? 500 : 200,
              error: null,
              durationMs: 40 + ((i * 37) % 860),
            },
            outcome: { status: failed ? 'failed' : 'succeeded', nextAttemptAt: null },
          });
        }),
      );
    }
    recording += performance.now() - began;
  }
  return { webhook, perSecond: DELIVERIES / (recording / 1000) };
}

/** The chart as the service makes it: the hourly counts of the window, summarised. */
const chart = (storage: Storage, webhook: WebhookRecord, now: Date) => async () =>
  summarize('7d', now, await storage.callStats(webhook.accountId, webhook.id, windowStart('7d', now)));

function check(storage: Storage, webhook: WebhookRecord, now: Date) {
  return chart(storage, webhook, now)().then((stats) => {
    const calls = stats.totals.succeeded + stats.totals.failed + stats.totals.errors;
    if (calls !== DELIVERIES) throw new Error(`the chart counts ${calls} calls of ${DELIVERIES}`);
  });
}

function row(scenario: string, figure: number, baselineName: string, baseline: number) {
  emit({
    scenario,
    figure,
    unit: 'ms',
    baselineName,
    baseline,
    ratio: baseline / figure,
    target: REPORTED,
    holds: true,
  });
}

async function onFs() {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-stats-'));
  const storage = fsStorage({ dir });
  try {
    await storage.open!();
    const now = Date.now();
    const { webhook, perSecond } = await seed(storage, now);
    await check(storage, webhook, new Date(now));
    const figure = await timed(chart(storage, webhook, new Date(now)));
    // Without the counts: every delivery of the window read through the log, 500 a page.
    const since = windowStart('7d', new Date(now));
    const baseline = await timed(async () => {
      const hours = new Map<string, number>();
      let after: DeliveryCursor | undefined;
      do {
        const page = await storage.listDeliveries(webhook.accountId, webhook.id, {
          limit: 500,
          since,
          ...(after ? { after } : {}),
        });
        for (const delivery of page.deliveries)
          for (const attempt of delivery.attempts)
            hours.set(hourOf(attempt.at), (hours.get(hourOf(attempt.at)) ?? 0) + 1);
        after = page.next ?? undefined;
      } while (after !== undefined);
    });
    row(
      `webhook stats, 7 days of ${DELIVERIES.toLocaleString('en')} deliveries, fs`,
      figure,
      'the log paged through at read time',
      baseline,
    );
    console.error(`  fs: recordAttempt with the counting, ${Math.round(perSecond)} attempts/s (100 at once)`);
  } finally {
    await storage.close!();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function onPostgres() {
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 10, connectionTimeoutMillis: 2000 });
  pool.on('error', () => {});
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    console.error(
      `  SKIP webhook stats on PostgreSQL: ${POSTGRES_URL} cannot be reached (${(error as Error).message})`,
    );
    await pool.end();
    return;
  }
  const schema = `bench_stats_${process.pid}`;
  const storage = sqlStorage({ client: pool, schema });
  try {
    await storage.open!();
    const now = Date.now();
    const { webhook, perSecond } = await seed(storage, now);
    await pool.query(`ANALYZE "${schema}".portal_deliveries, "${schema}".portal_queue`);
    await check(storage, webhook, new Date(now));
    const figure = await timed(chart(storage, webhook, new Date(now)));
    const since = windowStart('7d', new Date(now));
    // Without the counts: the attempts of the window's deliveries aggregated by the server.
    const baseline = await timed(() =>
      pool.query(
        `SELECT date_trunc('hour', (a->>'at')::timestamptz) AS hour, count(*) FILTER (WHERE (a->>'statusCode')::int BETWEEN 200 AND 299) AS succeeded,
           count(*) AS calls, percentile_disc(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY (a->>'durationMs')::int) AS p
         FROM "${schema}".portal_deliveries AS d CROSS JOIN LATERAL jsonb_array_elements(d.attempts) AS a
         WHERE d.webhook_id = $1 AND d.created_at >= $2::timestamptz - interval '3 days' AND (a->>'at')::timestamptz >= $2::timestamptz
         GROUP BY 1`,
        [webhook.id, since],
      ),
    );
    row(
      `webhook stats, 7 days of ${DELIVERIES.toLocaleString('en')} deliveries, PostgreSQL`,
      figure,
      'the attempts aggregated by one SELECT at read time',
      baseline,
    );
    console.error(
      `  PostgreSQL: recordAttempt with the counting, ${Math.round(perSecond)} attempts/s (100 at once, pool of 10)`,
    );
  } finally {
    await storage.close!();
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
    await pool.end();
  }
}

await onFs();
await onPostgres();
