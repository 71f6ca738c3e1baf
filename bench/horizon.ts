/**
 * The outbox beside a long transaction (issue 35): events published at a paced rate into one
 * PostgreSQL, two worker processes, one receiver, while another connection of the same database
 * holds a `REPEATABLE READ` transaction open (after a read), which keeps VACUUM from removing the
 * row versions every claim and record leave behind; then it commits. The portal, then pg-boss
 * doing the same work. Every 10 s: the lag p50/p99 of the calls that arrived in those 10 s, the
 * backlog (events published and not yet received), the dead tuples of the contender's tables, and
 * the portal workers' claim times. Targets: lag p99 ≤ 1 s throughout the hold, no growing backlog,
 * and back to the figures before the hold within a minute of the release. On a server without
 * autovacuum, the bench runs VACUUM (ANALYZE) on the contender's tables every 10 s in its place,
 * paced as autovacuum paces itself.
 *
 * Not part of `npm run bench` (it takes about half an hour): `npm run bench:horizon`, or
 *
 *   node dist/bench/horizon.js
 *   (HORIZON_RATE=500, HORIZON_BEFORE_SECONDS=60, HORIZON_HOLD_SECONDS=600, HORIZON_AFTER_SECONDS=90,
 *    HORIZON_CONTENDERS=portal,pg-boss, TEST_DATABASE_URL)
 */
import pg from 'pg';
import { connectPostgres, dropSchema } from '../test/helpers/sql.js';
import { pinned } from './support/cores.js';
import { DATABASE_URL, now } from './support/fleet.js';
import { Child, type Fleet, fleetNode, script, startFleet, stopFleet, useNode } from './support/fleet-processes.js';
import { emit } from './support/row.js';

const RATE = Number(process.env.HORIZON_RATE ?? 500);
const BEFORE = Number(process.env.HORIZON_BEFORE_SECONDS ?? 60);
const HOLD = Number(process.env.HORIZON_HOLD_SECONDS ?? 600);
const AFTER = Number(process.env.HORIZON_AFTER_SECONDS ?? 90);
const CONTENDERS = (process.env.HORIZON_CONTENDERS ?? 'portal,pg-boss').split(',') as Fleet['contender'][];
const WORKERS = 2;
const BATCH = 32;
const ACCOUNTS = 8;
const PAD = 400;
const SAMPLE_SECONDS = 10;
const LAG_TARGET_MS = 1000;

interface Sample {
  second: number;
  phase: 'before' | 'hold' | 'after';
  calls: number;
  p50: number;
  p99: number;
  backlog: number;
  deadTuples: number;
  claims: number;
  claimP50: number;
  claimP99: number;
}

const fixed = (value: number, digits = 0) => (Number.isFinite(value) ? value.toFixed(digits) : '—');

/**
 * VACUUM (ANALYZE) of every table of `schema`, paced as autovacuum paces itself (its default cost
 * delay of 2 ms every 200 units of work), for a server that runs without autovacuum. During the hold
 * it removes nothing (the held snapshot may still see every dead version), but it keeps the
 * planner's statistics current, and after the release it does the cleanup. One pass at a time: a
 * pass still running when the next is due makes that one wait for the next sample.
 */
let vacuuming: Promise<void> | undefined;
function vacuumSchema(pool: pg.Pool, schema: string): void {
  vacuuming ??= (async () => {
    const client = await pool.connect();
    try {
      await client.query(`SET vacuum_cost_delay = '2ms'`);
      await client.query(`SET vacuum_cost_limit = 200`);
      const { rows } = await client.query(`SELECT tablename FROM pg_tables WHERE schemaname = $1`, [schema]);
      for (const { tablename } of rows as { tablename: string }[])
        await client.query(`VACUUM (ANALYZE) "${schema}"."${tablename}"`);
    } catch {
      // The schema went meanwhile (the run ended): nothing to do.
    } finally {
      client.release();
      vacuuming = undefined;
    }
  })();
}

async function run(
  contender: Fleet['contender'],
  receiver: Child,
  url: string,
  pool: pg.Pool,
  vacuum: boolean,
): Promise<Sample[]> {
  const fleet = await startFleet(contender, WORKERS, url, { accounts: ACCOUNTS, batch: BATCH });
  const total = BEFORE + HOLD + AFTER;
  const events = RATE * total;
  const samples: Sample[] = [];
  const holder = new pg.Client({ connectionString: DATABASE_URL, application_name: 'horizon-holder' });
  await holder.connect();
  try {
    await receiver.request({ cmd: 'reset' }, 5000);
    const publishing = fleet.publisher.request(
      { cmd: 'publish', events, batch: BATCH, rate: RATE, pad: PAD },
      (total + 600) * 1000,
    );
    publishing.catch(() => {});
    const started = now();
    let holding = false;
    for (let second = SAMPLE_SECONDS; second <= total; second += SAMPLE_SECONDS) {
      const at = started + second * 1000;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, at - now())));
      const elapsed = (now() - started) / 1000;
      if (!holding && elapsed >= BEFORE && elapsed < BEFORE + HOLD) {
        // A snapshot taken by a read, held: what an analytics query or a forgotten BEGIN does.
        await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        await holder.query('SELECT count(*) FROM pg_class');
        holding = true;
      } else if (holding && elapsed >= BEFORE + HOLD) {
        await holder.query('COMMIT');
        holding = false;
      }
      if (vacuum) vacuumSchema(pool, fleet.schema);
      const window = await receiver.request<{ distinct: number; calls: number; p50: number; p99: number }>(
        { cmd: 'window' },
        5000,
      );
      const { rows } = await pool.query(
        `SELECT coalesce(sum(n_dead_tup), 0)::int AS dead FROM pg_stat_user_tables WHERE schemaname = $1`,
        [fleet.schema],
      );
      const claims =
        contender === 'portal'
          ? await Promise.all(
              fleet.workers.map((worker) =>
                worker.request<{ claims: number; p50: number; p99: number }>({ cmd: 'claims' }, 5000),
              ),
            )
          : [];
      const sample: Sample = {
        second,
        phase: second <= BEFORE ? 'before' : second <= BEFORE + HOLD ? 'hold' : 'after',
        calls: window.calls,
        p50: window.p50,
        p99: window.p99,
        backlog: Math.max(0, Math.min(events, Math.round(elapsed * RATE)) - window.distinct),
        deadTuples: rows[0].dead,
        claims: claims.reduce((sum, one) => sum + one.claims, 0),
        claimP50: Math.max(...claims.map((one) => one.p50).filter(Number.isFinite)),
        claimP99: Math.max(...claims.map((one) => one.p99).filter(Number.isFinite)),
      };
      samples.push(sample);
      console.error(
        `  ${contender} ${String(second).padStart(4)} s ${sample.phase.padEnd(6)} calls ${String(sample.calls).padStart(5)}  lag p50 ${fixed(sample.p50).padStart(6)} ms p99 ${fixed(sample.p99).padStart(6)} ms  ` +
          `backlog ${String(sample.backlog).padStart(6)}  dead tuples ${String(sample.deadTuples).padStart(7)}` +
          (contender === 'portal'
            ? `  claims ${sample.claims} (p50 ${fixed(sample.claimP50, 1)} ms, p99 ${fixed(sample.claimP99, 1)} ms)`
            : ''),
      );
    }
  } finally {
    await holder.query('COMMIT').catch(() => {});
    await holder.end();
    await vacuuming;
    await stopFleet(fleet);
    await dropSchema(pool, fleet.schema);
  }
  return samples;
}

function report(contender: string, samples: Sample[]): void {
  const during = samples.filter((sample) => sample.phase === 'hold');
  const before = samples.filter((sample) => sample.phase === 'before');
  const after = samples.filter((sample) => sample.phase === 'after');
  const worst = Math.max(...during.map((sample) => sample.p99));
  const backlog = Math.max(...during.map((sample) => sample.backlog));
  const baseline = Math.max(...before.map((sample) => sample.p99));
  // Back to the figures before the hold: the first sample after the release whose p99 is within
  // twice the worst before (at least 100 ms of slack), and every one after it too.
  const settled = after.findIndex((_sample, i) =>
    after.slice(i).every((later) => later.p99 <= Math.max(2 * baseline, baseline + 100)),
  );
  const recoverySeconds = settled === -1 ? Infinity : (settled + 1) * SAMPLE_SECONDS;
  const label = `outbox beside a ${HOLD} s transaction (${contender}, ${RATE}/s, ${WORKERS} workers)`;
  emit({
    scenario: `${label}: lag p99, worst 10 s of the hold`,
    figure: worst,
    unit: 'ms',
    baselineName: 'before the hold',
    baseline,
    ratio: worst / baseline,
    target: `≤ ${LAG_TARGET_MS} ms`,
    holds: worst <= LAG_TARGET_MS,
  });
  emit({
    scenario: `${label}: backlog, most during the hold`,
    figure: backlog,
    unit: 'events',
    baselineName: 'events a second',
    baseline: RATE,
    ratio: backlog / RATE,
    target: `≤ ${RATE} (1 s)`,
    holds: backlog <= RATE,
  });
  emit({
    scenario: `${label}: back to the lag before the hold, after the release`,
    figure: recoverySeconds,
    unit: 's',
    baselineName: 'target',
    baseline: 60,
    ratio: recoverySeconds / 60,
    target: '≤ 60 s',
    holds: recoverySeconds <= 60,
  });
  // Issue 59's target for the portal: at every sample of the hold, what VACUUM cannot remove.
  const mostDead = Math.max(...during.map((sample) => sample.deadTuples));
  emit({
    scenario: `${label}: dead tuples, most at a sample of the hold`,
    figure: mostDead,
    unit: 'tuples',
    baselineName: 'before the hold',
    baseline: before.at(-1)?.deadTuples ?? NaN,
    ratio: mostDead / (before.at(-1)?.deadTuples ?? NaN),
    target: contender === 'portal' ? '≤ 50,000' : 'none (reported)',
    holds: contender !== 'portal' || mostDead <= 50_000,
  });
}

async function main() {
  const postgres = await connectPostgres({ max: 2 });
  if (!postgres.pool) {
    console.error(`horizon bench: skipped: ${postgres.reason}`);
    return;
  }
  // pg-boss 12 needs Node 22: every process of the run on the one `fleetNode` finds.
  const node = fleetNode();
  if (typeof node === 'string') {
    console.error(`horizon bench: skipped: ${node}`);
    await postgres.pool.end();
    return;
  }
  useNode(node.path);
  const receiver = new Child('receiver', script('fleet-receiver.js'), [], 1);
  try {
    const { url } = await receiver.next<{ url: string }>(30_000, 'start');
    console.error(
      `horizon bench: ${RATE} events/s, ${WORKERS} workers; ${BEFORE} s, then a transaction held ${HOLD} s, then ${AFTER} s; ` +
        (pinned ? 'workers on core 0, publisher and receiver on core 1' : 'no taskset: cores not pinned'),
    );
    // A server without autovacuum (as this machine's test server is set up) gets its work done by
    // the bench, every sample, for both contenders alike.
    const { rows } = await postgres.pool.query(`SELECT current_setting('autovacuum') = 'on' AS on`);
    const vacuum = !(rows[0] as { on: boolean }).on;
    if (vacuum)
      console.error(
        "horizon bench: autovacuum is off on this server: the bench runs VACUUM (ANALYZE) on the contender's tables every 10 s instead, paced as autovacuum is",
      );
    for (const contender of CONTENDERS) report(contender, await run(contender, receiver, url, postgres.pool, vacuum));
  } finally {
    await receiver.stop();
    await postgres.pool.end();
  }
}

await main();
