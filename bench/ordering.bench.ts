/**
 * Ordering keys on PostgreSQL: a publisher and two worker instances (each its own process, the
 * fleet's `fleet-portal.js`) deliver `events` (100,000 by default) over 1,000 keys and 8 accounts to
 * a receiver that fails 5 % of its calls at random (`ordering-receiver.js`), once with ordering keys
 * and once without, the same data, one after the other, each on a fresh schema. The workers retry
 * after 1 s and tick every second (`FLEET_RETRY_SCHEDULE`, `FLEET_TICK`), so that a failing key
 * holds back only a second or two.
 *
 * Rows: inversions and overlaps with keys (target 0: a call of a key before the one before it was
 * answered 2xx, or two calls of a key at once), and deliveries/s with keys against without, from
 * the first publish to the last delivery (reported). Without keys the receiver counts the same
 * inversions, for contrast. Skipped, saying why, when PostgreSQL does not answer.
 *
 *   node dist/bench/ordering.bench.js [events=100000]
 *   (BENCH_ORDERING_EVENTS, BENCH_ORDERING_KEYS=1000, BENCH_ORDERING_TIMEOUT_SECONDS=600, TEST_DATABASE_URL)
 */
import { connectPostgres, dropSchema } from '../test/helpers/sql.js';
import { Child, script } from './support/fleet-processes.js';
import { now } from './support/fleet.js';
import { REPORTED, emit } from './support/row.js';

const EVENTS = Number(process.argv[2] ?? process.env.BENCH_ORDERING_EVENTS ?? 100_000);
const KEYS = Number(process.env.BENCH_ORDERING_KEYS ?? 1000);
const ACCOUNTS = 8;
const WORKERS = 2;
const BATCH = 32;
const TIMEOUT_MS = Number(process.env.BENCH_ORDERING_TIMEOUT_SECONDS ?? 600) * 1000;
const START_TIMEOUT_MS = 30_000;
const RETRY_SCHEDULE = Array.from({ length: 20 }, () => 1).join(',');

interface Stats {
  delivered: number;
  calls: number;
  failedOnPurpose: number;
  inversions: number;
  overlaps: number;
  duplicates: number;
  first: number;
  last: number;
}

interface Run {
  stats: Stats;
  publishSeconds: number;
  deliveriesPerSecond: number;
}

async function run(mode: 'ordered' | 'unordered', receiver: Child, url: string): Promise<Run> {
  const schema = `ordering_${mode}_${process.pid}`;
  const file = script('fleet-portal.js');
  // Read by the workers (a child takes this process's environment when it starts): retries after
  // a second, found by a tick every second once no other work makes the worker claim.
  process.env.FLEET_RETRY_SCHEDULE = RETRY_SCHEDULE;
  process.env.FLEET_TICK = '* * * * * *';
  const publisher = new Child(
    `${mode} publisher`,
    file,
    ['publisher', schema, url, String(ACCOUNTS), String(KEYS), mode],
    1,
    schema,
  );
  const workers: Child[] = [];
  try {
    await publisher.next(START_TIMEOUT_MS, 'start');
    for (let i = 0; i < WORKERS; i++)
      workers.push(new Child(`${mode} worker ${i + 1}`, file, ['worker', schema], 0, schema));
    for (const worker of workers) await worker.next(START_TIMEOUT_MS, 'start');
    await receiver.request({ cmd: 'reset' }, 10_000);
    const published = await publisher.request<{ published: number; started: number; seconds: number }>(
      { cmd: 'publish', events: EVENTS, batch: BATCH, rate: 0, pad: 0 },
      TIMEOUT_MS,
    );
    const deadline = now() + TIMEOUT_MS;
    let stats = await receiver.request<Stats>({ cmd: 'stats' }, 10_000);
    while (stats.delivered < EVENTS) {
      if (now() > deadline)
        throw new Error(`${mode}: ${stats.delivered} of ${EVENTS} delivered within ${TIMEOUT_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      stats = await receiver.request<Stats>({ cmd: 'stats' }, 10_000);
    }
    return {
      stats,
      publishSeconds: published.seconds,
      deliveriesPerSecond: EVENTS / ((stats.last - published.started) / 1000),
    };
  } finally {
    delete process.env.FLEET_RETRY_SCHEDULE;
    delete process.env.FLEET_TICK;
    await Promise.all([...workers, publisher].map((child) => child.stop()));
    const postgres = await connectPostgres();
    if (postgres.pool !== undefined) {
      await dropSchema(postgres.pool, schema);
      await postgres.pool.end();
    }
  }
}

const postgres = await connectPostgres();
if (postgres.pool === undefined) {
  console.log(`ordering.bench: skipped: ${postgres.reason}`);
} else {
  await postgres.pool.end();
  const receiver = new Child('ordering receiver', script('ordering-receiver.js'), [], 1);
  try {
    const { url } = await receiver.next<{ url: string }>(START_TIMEOUT_MS, 'start');
    const ordered = await run('ordered', receiver, url);
    const unordered = await run('unordered', receiver, url);
    console.log(`ordering.bench: with keys ${JSON.stringify(ordered)}`);
    console.log(`ordering.bench: without ${JSON.stringify(unordered)}`);
    const label = `${EVENTS.toLocaleString('en')} events, ${KEYS.toLocaleString('en')} keys, 2 instances, 5 % failing`;
    emit({
      scenario: `ordering keys (${label}): inversions + overlaps`,
      figure: ordered.stats.inversions + ordered.stats.overlaps,
      unit: 'calls',
      baselineName: 'the same without keys (inversions + overlaps)',
      baseline: unordered.stats.inversions + unordered.stats.overlaps,
      ratio: 0,
      target: '0',
      holds: ordered.stats.inversions + ordered.stats.overlaps === 0,
    });
    emit({
      scenario: `ordering keys (${label}): deliveries/s`,
      figure: Math.round(ordered.deliveriesPerSecond),
      unit: 'deliveries/s',
      baselineName: 'the same without keys',
      baseline: Math.round(unordered.deliveriesPerSecond),
      ratio: Math.round((ordered.deliveriesPerSecond / unordered.deliveriesPerSecond) * 100) / 100,
      target: REPORTED,
      holds: true,
    });
  } finally {
    await receiver.stop();
  }
}
