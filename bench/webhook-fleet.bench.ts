/**
 * Webhook delivery by a fleet of instances on one PostgreSQL, against pg-boss and graphile-worker
 * doing the same work in the same run. Every instance is its own process:
 *
 * - one receiver answering 204 (`fleet-receiver.js`), which keeps each call's `webhook-id` and its
 *   lag from the publish (`sentAt` in the event data) to the receipt;
 * - per contender, one publisher and 1, then 2, workers: for the portal an API-only portal
 *   (`webhooks: { worker: false }`) publishing through `portal.events.publish`, `BATCH` calls at
 *   once, and portals with the default worker woken by its NOTIFY (`fleet-portal.js`); for each
 *   peer, configured as its documentation says for throughput, a publisher adding `BATCH` jobs a
 *   statement and workers `BATCH` jobs at once, each making the same signed POST
 *   (`fleet-pgboss.js`, `fleet-graphile.js`).
 *
 * Per worker count, the contenders interleaved in a rotating order, each round: end to end while
 * publishing (`events` published as fast as the publisher goes, 32 at a time: publish/s,
 * deliveries/s from the first publish to the last receipt, CPU a delivery, duplicates), then a
 * drain (the workers stopped, `events` queued, the workers started: deliveries/s from the first
 * receipt to the last). Then a paced phase at half the slowest contender's throughput, which all
 * keep up with (lag p50/p99 from publish to receipt). Targets: deliveries/s ≥ 1.5× each peer's in
 * both, lag p99 ≤ 50 ms paced, no duplicate. Each fleet has a fresh schema, dropped afterwards.
 * Every process of the fleets runs on one Node of at least 22.18, which the peers' current releases
 * need (`fleetNode`). Skipped, saying why, when PostgreSQL does not answer or there is no such Node.
 *
 *   node dist/bench/webhook-fleet.bench.js [events=10000]
 *   (BENCH_FLEET_EVENTS, BENCH_FLEET_WORKERS=1,2, BENCH_FLEET_ROUNDS=1, BENCH_FLEET_PACED_SECONDS=4,
 *    BENCH_FLEET_PACED_RATE, BENCH_FLEET_TIMEOUT_SECONDS=60, BENCH_FLEET_CONTENDERS=portal,pg-boss,graphile-worker,
 *    BENCH_FLEET_NODE, TEST_DATABASE_URL)
 */
import { CLOCK_TICKS, cpuTicks, postgresTicks } from './support/proc-cpu.js';
import type { Pool } from 'pg';
import { pinned } from './support/cores.js';
import { connectPostgres, dropSchema } from '../test/helpers/sql.js';
import { now, type Report } from './support/fleet.js';
import {
  Child,
  type Fleet,
  SCHEMA_PREFIX,
  type Stats,
  fleetNode,
  script,
  startFleet,
  startWorkers,
  stopFleet,
  stopWorkers,
  useNode,
} from './support/fleet-processes.js';
import { REPORTED, emit } from './support/row.js';
import { median } from './support/median.js';

const EVENTS = Number(process.argv[2] ?? process.env.BENCH_FLEET_EVENTS ?? 10_000);
const WORKER_COUNTS = (process.env.BENCH_FLEET_WORKERS ?? '1,2').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_FLEET_ROUNDS ?? 1);
const PACED_SECONDS = Number(process.env.BENCH_FLEET_PACED_SECONDS ?? 4);
/** Events a second of the paced phase; by default half the slowest contender's rate while publishing. */
const PACED_RATE =
  process.env.BENCH_FLEET_PACED_RATE === undefined ? undefined : Number(process.env.BENCH_FLEET_PACED_RATE);
/** How long one phase may take to be received in full before its row fails. */
const TIMEOUT_MS = Number(process.env.BENCH_FLEET_TIMEOUT_SECONDS ?? 60) * 1000;
/** Events published at once, and jobs a peer's worker takes at once (the portal worker's concurrency). */
const BATCH = 32;
/** Accounts of the portal, one webhook each: with the default fair share (a quarter), 4 fill a worker. */
const ACCOUNTS = 8;
/** Padding of each event's data: a call body of about 600 bytes. */
const PAD = 400;
const LAG_TARGET_MS = 50;
const CONTENDERS = (process.env.BENCH_FLEET_CONTENDERS ?? 'portal,pg-boss,graphile-worker').split(
  ',',
) as Fleet['contender'][];
const RATIO_TARGET = 1.5;
const START_TIMEOUT_MS = 30_000;

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
   * CPU time a delivery: the contender's processes (publisher, workers) and the PostgreSQL server's
   * (`postgresTicks` of support/proc-cpu.ts), in µs. Less swayed by other load on the host than the rates.
   */
  cpuPerDelivery: number;
  /**
   * The same, split: the publisher, the workers, the PostgreSQL server; and the receiver's, which
   * is no contender's own (every contender's calls cost it alike) and is left out of the sum.
   */
  cpuSplit: CpuSplit;
  /** WAL the PostgreSQL server wrote a delivery, in bytes (`walMeter`). */
  walPerDelivery: number;
}

interface CpuSplit {
  publisher: number;
  workers: number;
  postgres: number;
  receiver: number;
}

/** A drain's rate, and the CPU a delivery of its workers, the PostgreSQL server and the receiver (the publisher is idle). */
interface Drained {
  deliveriesPerSecond: number;
  duplicates: number;
  cpuSplit: CpuSplit;
  walPerDelivery: number;
  /**
   * What queueing the backlog cost, a delivery: the PostgreSQL server's CPU (µs) and WAL (bytes)
   * while the publisher stored it, the workers stopped. Left out of `cpuSplit` and `walPerDelivery`,
   * which start with the workers; a delivery's whole cost to the server is the sum.
   */
  queued: { postgres: number; wal: number };
}

/**
 * The WAL the PostgreSQL server writes from now until `bytes()`: the distance between two of its
 * insert positions (`pg_current_wal_lsn`), which counts every record and full-page image written
 * meanwhile, by any backend, autovacuum included, as `pg_stat_wal.wal_bytes` sums them (that view is
 * updated when backends report, up to seconds late). One contender runs at a time: it is that one's.
 */
async function walMeter(pool: Pool): Promise<{ bytes(): Promise<number> }> {
  const position = async () =>
    (await pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn;
  const first = await position();
  return {
    async bytes() {
      const { rows } = await pool.query<{ bytes: string }>(
        'SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text AS bytes',
        [await position(), first],
      );
      return Number(rows[0]!.bytes);
    },
  };
}

/** How long a phase waits at most for autovacuum to finish, before it starts and before it ends. */
const VACUUM_WAIT_MS = 60_000;

/**
 * Waits until no autovacuum worker runs: before a phase, so that what the contender before left
 * for autovacuum is not charged to this one; at its end, so that what autovacuum does of this
 * phase's writes is charged to it. Nothing more: a VACUUM of the contender's tables at the end of
 * each phase was tried, and the statistics it left of a drained, empty table (`reltuples` 0) had
 * graphile-worker's next burst run at 394–776 deliveries/s and 2,100–2,700 µs of server CPU a job,
 * its job fetch planned for an empty table. On a server without autovacuum nothing is vacuumed
 * during the bench, and the cost of cleaning up after a contender is in no figure
 * (bench/results/2026-12-06-fleet-accounting.md).
 */
async function settle(pool: Pool): Promise<void> {
  const until = now() + VACUUM_WAIT_MS;
  for (;;) {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`,
    );
    if (rows[0]!.n === 0 || now() > until) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** How often a phase samples its processes' CPU: a process that ends loses at most this much of it. */
const CPU_SAMPLE_MS = 500;

/**
 * The CPU seconds of each part of a fleet over a phase. The contender's processes and the receiver
 * are sampled while it runs: one that starts meanwhile counts from zero, one that ends keeps what it
 * had used at its last sample (none of them ends during a phase). The PostgreSQL server is read at
 * the start and the end, with the backends that ended in between (`postgresTicks`): a pool that
 * closes and opens connections is charged for every backend it used.
 */
function cpuMeter(fleet: Fleet, receiver: Child): { sample(): void; seconds(): CpuSplit } {
  const parts: Record<Exclude<keyof CpuSplit, 'postgres'>, () => number[]> = {
    publisher: () => [fleet.publisher.child.pid!],
    workers: () => fleet.workers.map((child) => child.child.pid!),
    receiver: () => [receiver.child.pid!],
  };
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  const partOf = new Map<number, keyof typeof parts>();
  const sample = () => {
    for (const [part, pids] of Object.entries(parts) as [keyof typeof parts, () => number[]][]) {
      for (const pid of pids()) {
        const ticks = cpuTicks(pid);
        if (ticks === undefined) continue;
        last.set(pid, ticks);
        partOf.set(pid, part);
      }
    }
  };
  sample();
  for (const [pid, ticks] of last) first.set(pid, ticks);
  const postgresFirst = postgresTicks();
  return {
    sample,
    seconds() {
      sample();
      const postgresLast = postgresTicks();
      const split = {
        publisher: 0,
        workers: 0,
        postgres:
          postgresFirst === undefined || postgresLast === undefined ? 0 : (postgresLast - postgresFirst) / CLOCK_TICKS,
        receiver: 0,
      };
      for (const [pid, ticks] of last) split[partOf.get(pid)!] += (ticks - (first.get(pid) ?? 0)) / CLOCK_TICKS;
      return split;
    },
  };
}

/** Publishes `events` (at `rate` a second, 0: as fast as it goes) and waits until the receiver has every one. */
async function phase(fleet: Fleet, receiver: Child, pool: Pool, events: number, rate: number): Promise<Phase> {
  await receiver.request({ cmd: 'reset' }, 5000);
  await settle(pool);
  const wal = await walMeter(pool);
  const cpu = cpuMeter(fleet, receiver);
  // Unref'd: a phase that throws leaves it behind, and it must not keep the bench from exiting.
  const sampling = setInterval(cpu.sample, CPU_SAMPLE_MS).unref();
  const publishing = fleet.publisher.request<Extract<Report, { published: number }>>(
    { cmd: 'publish', events, batch: BATCH, rate, pad: PAD },
    TIMEOUT_MS,
  );
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
  clearInterval(sampling);
  await settle(pool);
  const cpuSplit = perDelivery(cpu.seconds(), stats.distinct);
  const walPerDelivery = (await wal.bytes()) / stats.distinct;
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
    walPerDelivery,
  };
}

/** CPU seconds of each part over `deliveries`, as µs a delivery. */
function perDelivery(used: CpuSplit, deliveries: number): CpuSplit {
  const each = (seconds: number) => (seconds * 1e6) / deliveries;
  return {
    publisher: each(used.publisher),
    workers: each(used.workers),
    postgres: each(used.postgres),
    receiver: each(used.receiver),
  };
}

/**
 * A preloaded backlog: the fleet's workers stopped, `events` published and all of them queued,
 * then the workers started again; deliveries/s from the first receipt to the last, so that the
 * time each contender's processes take to start does not count. The CPU a delivery is counted from
 * the workers' start on (their loading left out), over the deliveries received since.
 */
async function drain(
  fleet: Fleet,
  workerCount: number,
  receiver: Child,
  pool: Pool,
  url: string,
  events: number,
): Promise<Drained> {
  await stopWorkers(fleet);
  await receiver.request({ cmd: 'reset' }, 5000);
  await settle(pool);
  const queueWal = await walMeter(pool);
  const queueCpu = postgresTicks();
  await fleet.publisher.request<Extract<Report, { published: number }>>(
    { cmd: 'publish', events, batch: BATCH, rate: 0, pad: PAD },
    TIMEOUT_MS,
  );
  const queueTicks = queueCpu === undefined ? 0 : (postgresTicks() ?? queueCpu) - queueCpu;
  const queued = {
    postgres: (queueTicks / CLOCK_TICKS / events) * 1e6,
    wal: (await queueWal.bytes()) / events,
  };
  await startWorkers(fleet, workerCount, url, BATCH);
  const wal = await walMeter(pool);
  const cpu = cpuMeter(fleet, receiver);
  // Unref'd: a phase that throws leaves it behind, and it must not keep the bench from exiting.
  const sampling = setInterval(cpu.sample, CPU_SAMPLE_MS).unref();
  const deadline = now() + TIMEOUT_MS;
  let stats = await receiver.request<Stats>({ cmd: 'stats' }, 5000);
  const before = stats.distinct;
  while (stats.distinct < events) {
    if (now() > deadline)
      throw new Error(
        `${fleet.contender}: ${stats.distinct} of ${events} queued events received within ${TIMEOUT_MS / 1000} s`,
      );
    await new Promise((resolve) => setTimeout(resolve, 50));
    stats = await receiver.request<Stats>({ cmd: 'stats' }, 5000);
  }
  clearInterval(sampling);
  await settle(pool);
  const cpuSplit = perDelivery(cpu.seconds(), stats.distinct - before);
  const walPerDelivery = (await wal.bytes()) / (stats.distinct - before);
  await new Promise((resolve) => setTimeout(resolve, 250));
  stats = await receiver.request<Stats>({ cmd: 'stats' }, 5000);
  if (stats.refused > 0) throw new Error(`${fleet.contender}: the receiver refused ${stats.refused} malformed calls`);
  return {
    deliveriesPerSecond: stats.distinct / ((stats.last - stats.first!) / 1000),
    duplicates: stats.duplicates,
    cpuSplit,
    walPerDelivery,
    queued,
  };
}

type Contender = Fleet['contender'];

/** Every contender with `workerCount` workers: warm-up, then per round a burst and a drain each, then a paced phase; the rows of that count. */
async function compare(workerCount: number, receiver: Child, url: string, pool: Pool): Promise<void> {
  const label = `webhook fleet, ${workerCount} worker${workerCount === 1 ? '' : 's'}`;
  const fleets = new Map<Contender, Fleet>();
  const failures: string[] = [];
  const bursts = new Map<Contender, Phase[]>(CONTENDERS.map((name) => [name, []]));
  const drains = new Map<Contender, Drained[]>(CONTENDERS.map((name) => [name, []]));
  const duplicates = new Map<Contender, number>(CONTENDERS.map((name) => [name, 0]));
  const paced = new Map<Contender, Phase>();
  let rate = 0;
  try {
    for (const contender of CONTENDERS) {
      const fleet = await startFleet(contender, workerCount, url, { accounts: ACCOUNTS, batch: BATCH });
      fleets.set(contender, fleet);
      // Warm-up, not counted: every pool connection open, the paths run once. The JIT is not done
      // by then: the first burst still compiles (about 150 functions a portal worker).
      await phase(fleet, receiver, pool, Math.min(1000, Math.max(BATCH, Math.floor(EVENTS / 10))), 0);
    }
    for (let round = 0; round < ROUNDS; round++) {
      // The order rotates each round, so drift on the host hits every contender alike.
      const order = CONTENDERS.map((_, i) => CONTENDERS[(i + round) % CONTENDERS.length]!);
      for (const contender of order) {
        const fleet = fleets.get(contender)!;
        const result = await phase(fleet, receiver, pool, EVENTS, 0);
        bursts.get(contender)!.push(result);
        duplicates.set(contender, duplicates.get(contender)! + result.duplicates);
        const drained = await drain(fleet, workerCount, receiver, pool, url, EVENTS);
        drains.get(contender)!.push(drained);
        duplicates.set(contender, duplicates.get(contender)! + drained.duplicates);
        console.error(
          `  ${label}, ${contender}: while publishing ${Math.round(result.deliveriesPerSecond)} deliveries/s (publish ${Math.round(result.publishPerSecond)}/s, ` +
            `lag p50 ${Math.round(result.p50)} ms p99 ${Math.round(result.p99)} ms, ` +
            `CPU ${Math.round(result.cpuPerDelivery)} µs a delivery: publisher ${Math.round(result.cpuSplit.publisher)}, ` +
            `workers ${Math.round(result.cpuSplit.workers)}, PostgreSQL ${Math.round(result.cpuSplit.postgres)}; receiver ${Math.round(result.cpuSplit.receiver)}; WAL ${Math.round(result.walPerDelivery)} B); ` +
            `draining a backlog ${Math.round(drained.deliveriesPerSecond)} deliveries/s (CPU a delivery: workers ${Math.round(drained.cpuSplit.workers)}, ` +
            `PostgreSQL ${Math.round(drained.cpuSplit.postgres)}, receiver ${Math.round(drained.cpuSplit.receiver)}; WAL ${Math.round(drained.walPerDelivery)} B; queueing it: PostgreSQL ${Math.round(drained.queued.postgres)}, WAL ${Math.round(drained.queued.wal)} B); ${result.duplicates + drained.duplicates} duplicates`,
        );
      }
    }
    // Half the slowest contender's throughput: a load every one keeps up with, the same for all.
    rate =
      PACED_RATE ??
      Math.max(
        BATCH,
        Math.floor(
          0.5 * Math.min(...[...bursts.values()].map((runs) => median(runs.map((r) => r.deliveriesPerSecond)))),
        ),
      );
    const events = Math.max(BATCH, Math.round(rate * PACED_SECONDS));
    for (const contender of CONTENDERS) {
      const result = await phase(fleets.get(contender)!, receiver, pool, events, rate);
      paced.set(contender, result);
      duplicates.set(contender, duplicates.get(contender)! + result.duplicates);
      console.error(
        `  ${label}, ${contender} paced at ${rate}/s: lag p50 ${Math.round(result.p50)} ms p99 ${Math.round(result.p99)} ms, ` +
          `last receipt ${Math.round(result.tailMs)} ms after the last publish, ${result.duplicates} duplicates`,
      );
    }
  } catch (error) {
    failures.push((error as Error).message);
  } finally {
    for (const fleet of fleets.values()) await stopFleet(fleet);
  }

  const ok = failures.length === 0;
  if (!ok) console.error(`webhook-fleet.bench: ${label} failed: ${failures.join('; ')}`);
  // Every row is the portal against a peer: without it, the lines above are the figures.
  if (!CONTENDERS.includes('portal')) return;
  const failed = ok ? '' : ` (FAILED: ${failures.join('; ')})`;
  const burst = (name: Contender, pick: (phase: Phase) => number) => {
    const runs = bursts.get(name)!;
    return runs.length === 0 ? 0 : median(runs.map(pick));
  };
  const fromDrains = (name: Contender, pick: (drained: Drained) => number) => {
    const runs = drains.get(name)!;
    return runs.length === 0 ? 0 : median(runs.map(pick));
  };
  const drained = (name: Contender) => fromDrains(name, (r) => r.deliveriesPerSecond);
  /** A drain's CPU a delivery: the workers', the PostgreSQL server's and the receiver's, which bound its rate together. */
  const drainCpu = (name: Contender) =>
    fromDrains(name, (r) => r.cpuSplit.workers + r.cpuSplit.postgres + r.cpuSplit.receiver);
  const peers = CONTENDERS.filter((name) => name !== 'portal');
  for (const peer of peers) {
    const ratioRow = (scenario: string, mine: number, theirs: number, unit: string, target: number | null) =>
      emit({
        scenario: `${label}: ${scenario}${failed}`,
        figure: mine,
        unit,
        baselineName: peer,
        baseline: theirs,
        ratio: theirs > 0 ? mine / theirs : 0,
        target: target === null ? REPORTED : `≥ ${target}×`,
        holds: target === null || (ok && theirs > 0 && mine / theirs >= target),
      });
    ratioRow(
      `deliveries/s while publishing ${EVENTS.toLocaleString('en')} events`,
      burst('portal', (r) => r.deliveriesPerSecond),
      burst(peer, (r) => r.deliveriesPerSecond),
      'deliveries/s',
      RATIO_TARGET,
    );
    ratioRow(
      `deliveries/s draining ${EVENTS.toLocaleString('en')} queued events`,
      drained('portal'),
      drained(peer),
      'deliveries/s',
      RATIO_TARGET,
    );
    ratioRow(
      `publish/s, ${BATCH} at a time`,
      burst('portal', (r) => r.publishPerSecond),
      burst(peer, (r) => r.publishPerSecond),
      'events/s',
      null,
    );
    const cpu = [burst('portal', (r) => r.cpuPerDelivery), burst(peer, (r) => r.cpuPerDelivery)] as const;
    emit({
      scenario: `${label}: CPU a delivery, processes and the PostgreSQL server${failed}`,
      figure: cpu[0],
      unit: 'µs',
      baselineName: peer,
      baseline: cpu[1],
      ratio: cpu[0] > 0 ? cpu[1] / cpu[0] : 0,
      target: REPORTED,
      holds: true,
    });
    const drainedCpu = [drainCpu('portal'), drainCpu(peer)] as const;
    emit({
      scenario: `${label}: CPU a delivery draining, workers, PostgreSQL server and receiver${failed}`,
      figure: drainedCpu[0],
      unit: 'µs',
      baselineName: peer,
      baseline: drainedCpu[1],
      ratio: drainedCpu[0] > 0 ? drainedCpu[1] / drainedCpu[0] : 0,
      target: REPORTED,
      holds: true,
    });
    // The server's share: while publishing, the store and the delivery together; a backlog's, the
    // store (the workers stopped) and the drain measured apart and summed.
    const serverRows: [string, (phase: Phase) => number, (drained: Drained) => number, string][] = [
      ['PostgreSQL CPU a delivery', (r) => r.cpuSplit.postgres, (r) => r.queued.postgres + r.cpuSplit.postgres, 'µs'],
      ['WAL a delivery', (r) => r.walPerDelivery, (r) => r.queued.wal + r.walPerDelivery, 'bytes'],
    ];
    for (const [name, ofPhase, ofDrain, unit] of serverRows) {
      for (const [when, mine, theirs] of [
        ['while publishing', burst('portal', ofPhase), burst(peer, ofPhase)],
        ['queued then drained', fromDrains('portal', ofDrain), fromDrains(peer, ofDrain)],
      ] as const) {
        emit({
          scenario: `${label}: ${name} ${when}${failed}`,
          figure: mine,
          unit,
          baselineName: peer,
          baseline: theirs,
          ratio: mine > 0 ? theirs / mine : 0,
          target: REPORTED,
          holds: true,
        });
      }
    }
    const lags: [string, (phase: Phase) => number, Map<Contender, Phase> | null][] = [
      ['lag p99 while publishing as fast as it goes', (r) => r.p99, null],
      [`lag p50, paced at ${rate} events/s`, (r) => r.p50, paced],
      [`lag p99, paced at ${rate} events/s`, (r) => r.p99, paced],
    ];
    for (const [name, pick, from] of lags) {
      const mine = from === null ? burst('portal', pick) : from.has('portal') ? pick(from.get('portal')!) : 0;
      const theirs = from === null ? burst(peer, pick) : from.has(peer) ? pick(from.get(peer)!) : 0;
      // The target is the portal's own: judged once, on the row beside the first peer.
      const judged = from !== null && name.startsWith('lag p99') && peer === peers[0];
      emit({
        scenario: `${label}: ${name}${failed}`,
        figure: mine,
        unit: 'ms',
        baselineName: peer,
        baseline: theirs,
        ratio: mine > 0 ? theirs / mine : 0,
        target: judged ? `≤ ${LAG_TARGET_MS} ms` : REPORTED,
        holds: judged ? ok && paced.has('portal') && mine <= LAG_TARGET_MS : true,
      });
    }
    emit({
      scenario: `${label}: duplicate calls${failed}`,
      figure: duplicates.get('portal')!,
      unit: 'calls',
      baselineName: peer,
      baseline: duplicates.get(peer)!,
      ratio: (duplicates.get(peer)! + 1) / (duplicates.get('portal')! + 1),
      target: peer === peers[0] ? '= 0' : REPORTED,
      holds: peer !== peers[0] || (ok && duplicates.get('portal') === 0),
    });
  }
}

async function main() {
  const postgres = await connectPostgres({ max: 2 });
  if (!postgres.pool) {
    console.error(`webhook-fleet.bench: skipped: ${postgres.reason}`);
    return;
  }
  const pool = postgres.pool;
  const node = fleetNode();
  if (typeof node === 'string') {
    console.error(`webhook-fleet.bench: skipped: ${node}`);
    await pool.end();
    return;
  }
  useNode(node.path);
  const autovacuum = (await pool.query<{ autovacuum: string }>('SHOW autovacuum')).rows[0]!.autovacuum;
  const receiver = new Child('receiver', script('fleet-receiver.js'), [], 1);
  const started = performance.now();
  try {
    const { url } = await receiver.next<{ url: string }>(START_TIMEOUT_MS, 'start');
    console.error(
      `webhook-fleet.bench: ${CONTENDERS.join(', ')} on ${node.version}; ${EVENTS} events, ${BATCH} at a time, workers ${WORKER_COUNTS.join(' then ')}, ${ROUNDS} round(s); ` +
        (pinned ? 'workers on core 0, publisher and receiver on core 1' : 'no taskset: cores not pinned') +
        (autovacuum === 'off' ? '; autovacuum is off on this server: nothing is vacuumed during the run' : ''),
    );
    for (const count of WORKER_COUNTS) await compare(count, receiver, url, pool);
  } finally {
    await receiver.stop();
    // Every schema this run made, the ones of a failed phase too.
    const { rows } = await pool.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE ANY($1)`, [
      Object.values(SCHEMA_PREFIX).map((prefix) => `${prefix}\\_fleet\\_${process.pid}\\_%`),
    ]);
    for (const row of rows as { nspname: string }[]) await dropSchema(pool, row.nspname);
    await pool.end();
    console.error(`webhook-fleet.bench: ${Math.round((performance.now() - started) / 1000)} s`);
  }
}

await main();
