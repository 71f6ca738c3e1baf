/**
 * The fair claim beside a webhook held by `Retry-After`, on PostgreSQL: two webhooks of one account
 * with `BENCH_HELD_EVENTS` (20,000) events each due, claims of 32 one after another, their median
 * time in the second half of `BENCH_HELD_CLAIMS` (60) claims; the same with one webhook held. The
 * row: the held claim against the unheld one (target ≤ 1.5×: a hold may cost its deferrals, not a
 * read of the account's backlog a claim). Skipped, saying why, when the server does not answer.
 */
import pg from 'pg';
import { sqlStorage } from '../adapters/sql/index.js';
import type { WebhookRecord } from '../src/records.js';
import { emit } from './support/row.js';
import { median } from './support/median.js';

const POSTGRES_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const EVENTS = Number(process.env.BENCH_HELD_EVENTS ?? 20_000);
const CLAIMS = Number(process.env.BENCH_HELD_CLAIMS ?? 60);

const at = (seconds: number) => new Date(Date.UTC(2026, 0, 1) + seconds * 1000).toISOString().slice(0, 19) + '+00:00';
const webhook = (id: string): WebhookRecord => ({
  id,
  accountId: 'acct_a',
  type: 'customer-created',
  url: 'https://receiver.example/in',
  secret: 'whsec_' + Buffer.alloc(32, 7).toString('base64'),
  createdAt: at(0),
});
const HELD = 'wbh_heldheldheldheldheldh';

/** The median claim time (ms) of the second half of the run, with `HELD` held or not. */
async function claims(pool: pg.Pool, held: boolean): Promise<number> {
  const schema = `bench_held_${process.pid}_${held ? 'h' : 'n'}`;
  const storage = sqlStorage({ client: pool, schema });
  try {
    await storage.open!();
    await storage.insertWebhook(webhook(HELD));
    await storage.insertWebhook(webhook('wbh_otherotherotherotherot'));
    let n = 0;
    for (let done = 0; done < EVENTS; done += 1000) {
      await storage.publishEvents(
        Array.from({ length: Math.min(1000, EVENTS - done) }, () => ({
          id: `evt_${String(n++).padStart(22, '0')}`,
          accountId: 'acct_a',
          type: 'customer-created',
          createdAt: at(1),
          data: {},
        })),
      );
    }
    await pool.query(`ANALYZE "${schema}".portal_queue`);
    if (held)
      await pool.query(
        `INSERT INTO "${schema}".portal_webhook_health (webhook_id, account_id, held_until) VALUES ($1, 'acct_a', $2)`,
        [HELD, at(99_999)],
      );
    const times: number[] = [];
    for (let i = 0; i < CLAIMS; i++) {
      const began = performance.now();
      const claimed = await storage.claimDeliveries({
        now: at(10 + i),
        leaseUntil: at(100_000),
        limit: 32,
        owner: 'bench',
        perAccount: { max: 32, inFlight: {} },
      });
      times.push(performance.now() - began);
      if (held && claimed.some(({ delivery }) => delivery.webhookId === HELD))
        throw new Error('a held webhook delivery was leased');
    }
    return median(times.slice(Math.floor(CLAIMS / 2)));
  } finally {
    await storage.close!();
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
  }
}

const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4, connectionTimeoutMillis: 2000 });
pool.on('error', () => {});
let reachable = true;
try {
  await pool.query('SELECT 1');
} catch (error) {
  reachable = false;
  console.error(
    `  SKIP fair claim beside a held webhook: ${POSTGRES_URL} cannot be reached (${(error as Error).message})`,
  );
}
try {
  if (reachable) {
    const unheld = await claims(pool, false);
    const held = await claims(pool, true);
    console.error(
      `  fair claim of 32, ${EVENTS.toLocaleString('en')} events to 2 webhooks: ${unheld.toFixed(2)} ms; one webhook held: ${held.toFixed(2)} ms`,
    );
    emit({
      scenario: `fair claim beside a held webhook, ${EVENTS.toLocaleString('en')} due to each of two`,
      figure: held,
      unit: 'ms a claim',
      baselineName: 'the same claims with no webhook held',
      baseline: unheld,
      ratio: held / unheld,
      target: '≤ 1.5×',
      holds: held / unheld <= 1.5,
    });
  }
} finally {
  await pool.end();
}
