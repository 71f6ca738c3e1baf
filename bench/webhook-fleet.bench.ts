/**
 * Webhook delivery by a fleet of instances on one PostgreSQL, against pg-boss doing the same work in
 * the same run. Every instance is its own process:
 *
 * - one receiver answering 204 (`fleet-receiver.js`), which keeps each call's `webhook-id` and its
 *   lag from the publish (`sentAt` in the event data) to the receipt;
 * - per contender, one publisher and 1, then 2, workers: for the portal an API-only portal
 *   (`webhooks: { worker: false }`) publishing through `portal.events.publish`, `BATCH` calls at
 *   once, and portals with the default worker woken by its NOTIFY (`fleet-portal.js`); for pg-boss
 *   a publisher `insert`ing `BATCH` jobs a statement and workers each fetching `BATCH` jobs a poll and
 *   making the same signed POST (`fleet-pgboss.js`).
 *
 * Two phases per worker count, the contenders interleaved: a burst (`events` published as fast as
 * the publisher goes, 32 at a time: publish/s, deliveries/s from the first publish to the last
 * receipt, duplicates), then a paced phase at half the slower contender's burst throughput, which
 * both keep up with (lag p50/p99 from publish to receipt). Targets: deliveries/s ≥ 1.5× pg-boss's,
 * lag p99 ≤ 500 ms in the paced phase, no duplicate. Each contender has a fresh schema, dropped
 * afterwards. Skipped, saying why, when PostgreSQL does not answer.
 *
 *   node dist/bench/webhook-fleet.bench.js [events=10000]
 *   (BENCH_FLEET_EVENTS, BENCH_FLEET_WORKERS=1,2, BENCH_FLEET_ROUNDS=1, BENCH_FLEET_PACED_SECONDS=4,
 *    BENCH_FLEET_TIMEOUT_SECONDS=60, TEST_DATABASE_URL)
 */
import { readFileSync } from 'node:fs';
import type { Pool } from 'pg';
import { pinned } from './support/cores.js';
import { connectPostgres, dropSchema } from '../test/helpers/sql.js';
import { now, type Report } from './support/fleet.js';
import { Child, type Fleet, type Stats, script, startFleet, stopFleet } from './support/fleet-processes.js';
import { REPORTED, emit } from './support/row.js';

const EVENTS = Number(process.argv[2] ?? process.env.BENCH_FLEET_EVENTS ?? 10_000);
const WORKER_COUNTS = (process.env.BENCH_FLEET_WORKERS ?? '1,2').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_FLEET_ROUNDS ?? 1);
const PACED_SECONDS = Number(process.env.BENCH_FLEET_PACED_SECONDS ?? 4);
/** How long one phase may take to be received in full before its row fails. */
const TIMEOUT_MS = Number(process.env.BENCH_FLEET_TIMEOUT_SECONDS ?? 60) * 1000;
/** Events published at once, and jobs a pg-boss worker fetches at once (the portal worker's concurrency). */
const BATCH = 32;
/** Accounts of the portal, one webhook each: with the default fair share (a quarter), 4 fill a worker. */
const ACCOUNTS = 8;
/** Padding of each event's data: a call body of about 600 bytes. */
const PAD = 400;
const LAG_TARGET_MS = 500;
const RATIO_TARGET = 1.5;
const START_TIMEOUT_MS = 30_000;

/** USER_HZ: the unit of the CPU times in /proc/<pid>/stat (100 on Linux everywhere in practice). */
const CLOCK_TICKS = 100;

interface Phase {
  published: number;
  publishPerSecond: number;
  deliveriesPerSecond: number;
  p50: number;
  p99: number;
  duplicates: number;
  /** From the last publish to the last receipt: small when the workers kept up. */
  tailMs: number;
  /**
   * CPU time a delivery: the contender's processes (publisher, workers) and their PostgreSQL
   * backends, in µs. Less swayed by other load on the host than the rates.
   */
  cpuPerDelivery: number;
  /** The same, split: the publisher, the workers, their PostgreSQL backends. */
  cpuSplit: { publisher: number; workers: number; postgres: number };
}

/** CPU seconds (user + system) each process has used, from /proc; 0 for one that is gone. */
function cpuSeconds(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      // The fields after the command (which may hold spaces), from the third: utime and stime are the 14th and 15th.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // Gone: its time is not counted.
    }
  }
  return ticks / CLOCK_TICKS;
}

/** The fleet's processes and their PostgreSQL backends (found by application_name). */
async function fleetPids(fleet: Fleet, pool: Pool): Promise<Record<keyof Phase['cpuSplit'], number[]>> {
  const { rows } = await pool.query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1`, [fleet.schema]);
  return {
    publisher: [fleet.publisher.child.pid!],
    workers: fleet.workers.map((child) => child.child.pid!),
    postgres: (rows as { pid: number }[]).map((row) => row.pid),
  };
}

/** CPU seconds of each part of the fleet. */
const fleetCpu = (pids: Record<keyof Phase['cpuSplit'], number[]>): Phase['cpuSplit'] => ({
  publisher: cpuSeconds(pids.publisher),
  workers: cpuSeconds(pids.workers),
  postgres: cpuSeconds(pids.postgres),
});

/** Publishes `events` (at `rate` a second, 0: as fast as it goes) and waits until the receiver has every one. */
async function phase(fleet: Fleet, receiver: Child, pool: Pool, events: number, rate: number): Promise<Phase> {
  await receiver.request({ cmd: 'reset' }, 5000);
  const pids = await fleetPids(fleet, pool);
  const cpuBefore = fleetCpu(pids);
  const publishing = fleet.publisher.request<Extract<Report, { published: number }>>({ cmd: 'publish', events, batch: BATCH, rate, pad: PAD }, TIMEOUT_MS);
  const deadline = now() + TIMEOUT_MS;
  let stats = await receiver.request<Stats>({ cmd: 'stats' }, 5000);
  let published: Extract<Report, { published: number }> | undefined;
  let publishFailed: Error | undefined;
  publishing.then(
    (report) => (published = report),
    (error: Error) => (publishFailed = error),
  );
  while (stats.distinct < events || published === undefined) {
    if (publishFailed !== undefined) throw publishFailed;
    if (now() > deadline) {
      throw new Error(
        `${fleet.contender}: ${stats.distinct} of ${events} events received within ${TIMEOUT_MS / 1000} s${published === undefined ? ' (publishing not finished)' : ''}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    stats = await receiver.request<Stats>({ cmd: 'stats' }, 5000);
  }
  // A little longer, for a duplicate that would come late.
  await new Promise((resolve) => setTimeout(resolve, 250));
  stats = await receiver.request<Stats>({ cmd: 'stats' }, 5000);
  const cpuAfter = fleetCpu(pids);
  const perDelivery = (part: keyof Phase['cpuSplit']) => ((cpuAfter[part] - cpuBefore[part]) * 1e6) / stats.distinct;
  const cpuSplit = { publisher: perDelivery('publisher'), workers: perDelivery('workers'), postgres: perDelivery('postgres') };
  if (stats.refused > 0) throw new Error(`${fleet.contender}: the receiver refused ${stats.refused} malformed calls`);
  const { started, seconds } = published!;
  return {
    published: events,
    publishPerSecond: events / seconds,
    deliveriesPerSecond: stats.distinct / ((stats.last - started) / 1000),
    p50: stats.p50!,
    p99: stats.p99!,
    duplicates: stats.duplicates,
    tailMs: stats.last - (started + seconds * 1000),
    cpuPerDelivery: cpuSplit.publisher + cpuSplit.workers + cpuSplit.postgres,
    cpuSplit,
  };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Both contenders with `workerCount` workers: warm-up, bursts, paced phase; the rows of that count. */
async function compare(workerCount: number, receiver: Child, url: string, pool: Pool): Promise<void> {
  const label = `webhook fleet, ${workerCount} worker${workerCount === 1 ? '' : 's'}`;
  const fleetsByName = new Map<Fleet['contender'], Fleet>();
  const failures: string[] = [];
  const bursts = new Map<Fleet['contender'], Phase[]>([
    ['portal', []],
    ['pg-boss', []],
  ]);
  const paced = new Map<Fleet['contender'], Phase>();
  let rate = 0;
  try {
    for (const contender of ['portal', 'pg-boss'] as const) {
      const fleet = await startFleet(contender, workerCount, url, { accounts: ACCOUNTS, batch: BATCH });
      fleetsByName.set(contender, fleet);
      // Warm-up, not counted: every pool connection open, the paths run once. The JIT is not done
      // by then: the first burst still compiles (about 150 functions a portal worker).
      await phase(fleet, receiver, pool, Math.min(1000, Math.max(BATCH, Math.floor(EVENTS / 10))), 0);
    }
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? (['portal', 'pg-boss'] as const) : (['pg-boss', 'portal'] as const);
      for (const contender of order) {
        const result = await phase(fleetsByName.get(contender)!, receiver, pool, EVENTS, 0);
        bursts.get(contender)!.push(result);
        console.error(
          `  ${label}, ${contender} burst: publish ${Math.round(result.publishPerSecond)}/s, ${Math.round(result.deliveriesPerSecond)} deliveries/s, ` +
            `lag p50 ${Math.round(result.p50)} ms p99 ${Math.round(result.p99)} ms, ${result.duplicates} duplicates, ` +
            `CPU ${Math.round(result.cpuPerDelivery)} µs a delivery (publisher ${Math.round(result.cpuSplit.publisher)}, ` +
            `workers ${Math.round(result.cpuSplit.workers)}, PostgreSQL ${Math.round(result.cpuSplit.postgres)})`,
        );
      }
    }
    // Half the slower contender's throughput: a load both keep up with, the same for both.
    rate = Math.max(BATCH, Math.floor(0.5 * Math.min(...[...bursts.values()].map((runs) => median(runs.map((r) => r.deliveriesPerSecond))))));
    const events = Math.max(BATCH, Math.round(rate * PACED_SECONDS));
    for (const contender of ['pg-boss', 'portal'] as const) {
      const result = await phase(fleetsByName.get(contender)!, receiver, pool, events, rate);
      paced.set(contender, result);
      console.error(
        `  ${label}, ${contender} paced at ${rate}/s: lag p50 ${Math.round(result.p50)} ms p99 ${Math.round(result.p99)} ms, ` +
          `last receipt ${Math.round(result.tailMs)} ms after the last publish, ${result.duplicates} duplicates`,
      );
    }
  } catch (error) {
    failures.push((error as Error).message);
  } finally {
    for (const fleet of fleetsByName.values()) {
      await stopFleet(fleet);
    }
  }

  const portalBursts = bursts.get('portal')!;
  const bossBursts = bursts.get('pg-boss')!;
  const ok = failures.length === 0;
  if (!ok) console.error(`webhook-fleet.bench: ${label} failed: ${failures.join('; ')}`);
  const figure = (runs: Phase[], pick: (phase: Phase) => number) => (runs.length === 0 ? 0 : median(runs.map(pick)));
  const failed = ok ? '' : ` (FAILED: ${failures.join('; ')})`;

  const portalRate = figure(portalBursts, (r) => r.deliveriesPerSecond);
  const bossRate = figure(bossBursts, (r) => r.deliveriesPerSecond);
  emit({
    scenario: `${label}: deliveries/s, ${EVENTS.toLocaleString('en')} events${failed}`,
    figure: portalRate,
    unit: 'deliveries/s',
    baselineName: 'pg-boss',
    baseline: bossRate,
    ratio: bossRate > 0 ? portalRate / bossRate : 0,
    target: `≥ ${RATIO_TARGET}×`,
    holds: ok && bossRate > 0 && portalRate / bossRate >= RATIO_TARGET,
  });
  const portalPublish = figure(portalBursts, (r) => r.publishPerSecond);
  const bossPublish = figure(bossBursts, (r) => r.publishPerSecond);
  emit({
    scenario: `${label}: publish/s, ${BATCH} at a time${failed}`,
    figure: portalPublish,
    unit: 'events/s',
    baselineName: 'pg-boss',
    baseline: bossPublish,
    ratio: bossPublish > 0 ? portalPublish / bossPublish : 0,
    target: REPORTED,
    holds: true,
  });
  const portalCpu = figure(portalBursts, (r) => r.cpuPerDelivery);
  const bossCpu = figure(bossBursts, (r) => r.cpuPerDelivery);
  emit({
    scenario: `${label}: CPU a delivery, processes and their PostgreSQL backends${failed}`,
    figure: portalCpu,
    unit: 'µs',
    baselineName: 'pg-boss',
    baseline: bossCpu,
    ratio: portalCpu > 0 ? bossCpu / portalCpu : 0,
    target: REPORTED,
    holds: true,
  });
  const portalBacklogP99 = figure(portalBursts, (r) => r.p99);
  const bossBacklogP99 = figure(bossBursts, (r) => r.p99);
  emit({
    scenario: `${label}: lag p99 draining the burst${failed}`,
    figure: portalBacklogP99,
    unit: 'ms',
    baselineName: 'pg-boss',
    baseline: bossBacklogP99,
    ratio: portalBacklogP99 > 0 ? bossBacklogP99 / portalBacklogP99 : 0,
    target: REPORTED,
    holds: true,
  });
  const portalPaced = paced.get('portal');
  const bossPaced = paced.get('pg-boss');
  for (const [name, pick] of [
    ['p50', (p: Phase) => p.p50],
    ['p99', (p: Phase) => p.p99],
  ] as const) {
    const mine = portalPaced === undefined ? 0 : pick(portalPaced);
    const theirs = bossPaced === undefined ? 0 : pick(bossPaced);
    emit({
      scenario: `${label}: lag ${name}, paced at ${rate} events/s${failed}`,
      figure: mine,
      unit: 'ms',
      baselineName: 'pg-boss',
      baseline: theirs,
      ratio: mine > 0 ? theirs / mine : 0,
      target: name === 'p99' ? `≤ ${LAG_TARGET_MS} ms` : REPORTED,
      holds: name === 'p99' ? ok && portalPaced !== undefined && mine <= LAG_TARGET_MS : true,
    });
  }
  const portalDuplicates = [...portalBursts, ...(portalPaced ? [portalPaced] : [])].reduce((sum, r) => sum + r.duplicates, 0);
  const bossDuplicates = [...bossBursts, ...(bossPaced ? [bossPaced] : [])].reduce((sum, r) => sum + r.duplicates, 0);
  emit({
    scenario: `${label}: duplicate calls${failed}`,
    figure: portalDuplicates,
    unit: 'calls',
    baselineName: 'pg-boss',
    baseline: bossDuplicates,
    ratio: (bossDuplicates + 1) / (portalDuplicates + 1),
    target: '= 0',
    holds: ok && portalDuplicates === 0,
  });
}

async function main() {
  const postgres = await connectPostgres({ max: 2 });
  if (!postgres.pool) {
    console.error(`webhook-fleet.bench: skipped: ${postgres.reason}`);
    return;
  }
  const pool = postgres.pool;
  const receiver = new Child('receiver', script('fleet-receiver.js'), [], 1);
  const started = performance.now();
  try {
    const { url } = await receiver.next<{ url: string }>(START_TIMEOUT_MS, 'start');
    console.error(
      `webhook-fleet.bench: ${EVENTS} events, ${BATCH} at a time, workers ${WORKER_COUNTS.join(' then ')}, ${ROUNDS} round(s); ` +
        (pinned ? 'workers on core 0, publisher and receiver on core 1' : 'no taskset: cores not pinned'),
    );
    for (const count of WORKER_COUNTS) await compare(count, receiver, url, pool);
  } finally {
    await receiver.stop();
    // Every schema this run made, the ones of a failed phase too.
    const { rows } = await pool.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE $1 OR nspname LIKE $2`, [
      `portal\\_fleet\\_${process.pid}\\_%`,
      `pgboss\\_fleet\\_${process.pid}\\_%`,
    ]);
    for (const row of rows as { nspname: string }[]) await dropSchema(pool, row.nspname);
    await pool.end();
    console.error(`webhook-fleet.bench: ${Math.round((performance.now() - started) / 1000)} s`);
  }
}

await main();
