/**
 * Throttling against a receiver of fixed capacity (`throttle-receiver.js`, its own process): it takes
 * `BENCH_THROTTLE_CAPACITY` (1,000) calls a second and answers 429 with `Retry-After: 1` beyond, and
 * `BENCH_THROTTLE_DOWN_S` (30) seconds after the start it is down for as long again, answering 503.
 * The same engine (memory storage, this process) delivers a backlog of `BENCH_THROTTLE_EVENTS`
 * (50,000) three ways, one after another:
 *
 * - **adaptive**: as it ships, calls in flight adapted to the receiver (`rules/in-flight.ts`);
 * - **adaptation off**: `adaptCallsInFlight: false`, every call the account's share;
 * - **static limit**: adaptation off and `rateLimit` at the receiver's capacity, the static
 *   throttle Svix and Convoy offer, set as well as it can be;
 * - **static limit, twice the capacity**: the same, set by a sender who guessed the capacity wrong.
 *
 * The receiver answers each call `BENCH_THROTTLE_LATENCY_MS` (50) after it; the engine may have 256
 * calls in flight (`concurrency`, `concurrencyPerAccount`), several times what the capacity takes.
 *
 * Each way keeps the `Retry-After` holds. The retry schedule is cut to 5, 30, 60, 120 and 300 s so a
 * run ends within minutes (the Standard one waits 5 minutes after the second try, which would cost
 * the ways that spend their backlog on the outage more). Per way: goodput (deliveries over the time
 * to the last one), the share of calls answered 429, the busiest second after the receiver is back
 * against its capacity, and whether deliveries collapsed again after it came back (a stretch of 5 s
 * with fewer than a tenth of the capacity delivered while work remained). The row: the adaptive
 * way's goodput against the static limit's (target ≥ 1.5×), with 429s ≤ 5 %, its peak after
 * recovery within the capacity and no second collapse. About 6 minutes.
 */
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { memoryStorage } from '../adapters/memory/index.js';
import { createPortal, type Portal } from '../src/index.js';
import { silentLogger } from '../src/shared/logger.js';
import { pinned, spawnNode } from './support/cores.js';
import { emit, REPORTED } from './support/row.js';

const EVENTS = Number(process.env.BENCH_THROTTLE_EVENTS ?? 50_000);
const CAPACITY = Number(process.env.BENCH_THROTTLE_CAPACITY ?? 1000);
const DOWN_S = Number(process.env.BENCH_THROTTLE_DOWN_S ?? 30);
/** Stops a way that has not delivered everything by then. */
const LIMIT_S = Number(process.env.BENCH_THROTTLE_LIMIT_S ?? 600);
const LATENCY_MS = Number(process.env.BENCH_THROTTLE_LATENCY_MS ?? 50);
/** Calls in flight an instance may make, and one account: enough to send several times the capacity. */
const CONCURRENCY = 256;
const RETRY_SCHEDULE = [5, 30, 60, 120, 300];
const KEY = 'bench-throttle-key-0123456789';

type Way = 'adaptive' | 'adaptation off' | 'static limit' | 'static limit, twice the capacity';

interface Result {
  way: Way;
  goodput: number;
  seconds: number;
  delivered: number;
  calls: number;
  share429: number;
  share503: number;
  peakAfter: number;
  collapse: boolean;
}

/** The receiver process, and its answers over IPC one at a time. */
function startReceiver(): { child: ChildProcess; ask<T>(message: object): Promise<T> } {
  const child = spawnNode(1, [fileURLToPath(new URL('./throttle-receiver.js', import.meta.url))], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const inbox: unknown[] = [];
  let waiting: ((message: unknown) => void) | undefined;
  child.on('message', (message) => {
    if (waiting === undefined) inbox.push(message);
    else {
      const resolve = waiting;
      waiting = undefined;
      resolve(message);
    }
  });
  const next = <T>() =>
    inbox.length > 0
      ? Promise.resolve(inbox.shift() as T)
      : new Promise<T>((resolve) => {
          waiting = resolve as (message: unknown) => void;
        });
  return {
    child,
    async ask<T>(message: object) {
      if (Object.keys(message).length > 0) child.send(message);
      return next<T>();
    },
  };
}

async function run(way: Way, receiver: ReturnType<typeof startReceiver>, url: string): Promise<Result> {
  const storage = memoryStorage();
  const common = { storage, auth: { apiKeys: [KEY] }, logger: silentLogger, signingKeys: [KEY.repeat(2)] };
  const webhooks = {
    allowPrivateNetworks: true,
    retrySchedule: RETRY_SCHEDULE,
    adaptCallsInFlight: way === 'adaptive',
    concurrency: CONCURRENCY,
    concurrencyPerAccount: CONCURRENCY,
    // The outage must not disable the webhook: what is measured is what comes after it.
    disableAfterFailures: 1_000_000,
  };
  // The backlog, queued before any worker runs (the memory store outlives the portal).
  const publisher = await createPortal({ ...common, webhooks: { ...webhooks, worker: false } });
  await publisher.webhooks.create('default', {
    type: 'customer-created',
    url,
    ...(way === 'static limit' ? { rateLimit: CAPACITY } : {}),
    ...(way === 'static limit, twice the capacity' ? { rateLimit: 2 * CAPACITY } : {}),
  });
  for (let sent = 0; sent < EVENTS; sent += 500)
    await Promise.all(
      Array.from({ length: Math.min(500, EVENTS - sent) }, (_, i) =>
        publisher.events.publish('default', 'customer-created', { n: sent + i }),
      ),
    );
  await publisher.close();

  await receiver.ask({ cmd: 'start', capacity: CAPACITY, latencyMs: LATENCY_MS });
  const began = performance.now();
  let portal: Portal | undefined;
  try {
    portal = await createPortal({ ...common, webhooks });
    let wentDown = false;
    let stats = { delivered: 0, seconds: [] as [number, number, number][] };
    while (performance.now() - began < LIMIT_S * 1000) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      if (!wentDown && performance.now() - began >= DOWN_S * 1000) {
        await receiver.ask({ cmd: 'down', ms: DOWN_S * 1000 });
        wentDown = true;
      }
      stats = await receiver.ask({ cmd: 'stats' });
      if (stats.delivered >= EVENTS) break;
    }
    const { seconds } = stats;
    if (process.env.BENCH_THROTTLE_TRACE === '1')
      console.error(`  ${way}, each second (2xx/429/503): ${seconds.map((second) => second.join('/')).join(' ')}`);
    const lastSecond = seconds.findLastIndex(([ok]) => ok > 0);
    const elapsed = lastSecond + 1;
    const calls = seconds.reduce((sum, [ok, busy, down]) => sum + ok + busy + down, 0);
    const sum = (kind: 1 | 2) => seconds.reduce((total, second) => total + second[kind], 0);
    const back = 2 * DOWN_S;
    const after = seconds.slice(back);
    const peakAfter = Math.max(0, ...after.map(([ok, busy]) => ok + busy));
    // From 5 s after the receiver is back: five seconds in a row under a tenth of its capacity
    // while work remained.
    const okBefore = (s: number) => seconds.slice(0, s).reduce((total, [ok]) => total + ok, 0);
    let collapse = false;
    for (let s = back + 5; s + 5 <= seconds.length; s++) {
      const window = seconds.slice(s, s + 5).reduce((total, [ok]) => total + ok, 0);
      if (okBefore(s) < EVENTS && window < (CAPACITY / 10) * 5) collapse = true;
    }
    return {
      way,
      goodput: stats.delivered / elapsed,
      seconds: elapsed,
      delivered: stats.delivered,
      calls,
      share429: sum(1) / calls,
      share503: sum(2) / calls,
      peakAfter,
      collapse,
    };
  } finally {
    await portal?.close();
  }
}

const receiver = startReceiver();
try {
  const { url } = await receiver.ask<{ url: string }>({});
  console.error(
    `throttling.bench: ${EVENTS.toLocaleString('en')} events, a receiver of ${CAPACITY.toLocaleString('en')} calls/s down ${DOWN_S} s from ${DOWN_S} s; ` +
      (pinned ? 'the receiver on core 1' : 'no taskset: cores not pinned'),
  );
  const results: Result[] = [];
  const ways = ['adaptive', 'adaptation off', 'static limit', 'static limit, twice the capacity'] as const;
  // BENCH_THROTTLE_WAYS=1 runs the first way alone, to try a change (no row is printed then).
  for (const way of ways.slice(0, Number(process.env.BENCH_THROTTLE_WAYS ?? ways.length))) {
    const result = await run(way, receiver, url);
    results.push(result);
    console.error(
      `  ${way}: ${result.delivered.toLocaleString('en')} delivered in ${result.seconds} s, goodput ${result.goodput.toFixed(0)}/s; ` +
        `${result.calls.toLocaleString('en')} calls, ${(100 * result.share429).toFixed(1)} % answered 429, ${(100 * result.share503).toFixed(1)} % 503; ` +
        `busiest second after the receiver came back ${result.peakAfter} calls (capacity ${CAPACITY}); second collapse: ${result.collapse ? 'yes' : 'no'}`,
    );
  }
  if (results.length < ways.length) process.exit(0);
  const [adaptive, off, fixed, guessed] = results as [Result, Result, Result, Result];
  const holds =
    adaptive.delivered >= EVENTS &&
    adaptive.share429 <= 0.05 &&
    adaptive.peakAfter <= CAPACITY * 1.05 &&
    !adaptive.collapse &&
    adaptive.goodput / fixed.goodput >= 1.5;
  emit({
    scenario: `throttling: ${EVENTS.toLocaleString('en')} events to a receiver of ${CAPACITY.toLocaleString('en')}/s down ${DOWN_S} s`,
    figure: adaptive.goodput,
    unit: 'deliveries/s (goodput)',
    baselineName: 'the same engine with a static rateLimit at the capacity',
    baseline: fixed.goodput,
    ratio: adaptive.goodput / fixed.goodput,
    target: '≥ 1.5×, ≤ 5 % 429, peak after recovery ≤ capacity, no second collapse',
    holds,
  });
  emit({
    scenario: 'throttling: the same, adaptation off',
    figure: off.goodput,
    unit: 'deliveries/s (goodput)',
    baselineName: 'adaptive',
    baseline: adaptive.goodput,
    ratio: off.goodput / adaptive.goodput,
    target: REPORTED,
    holds: true,
  });
  emit({
    scenario: 'throttling: the same, a static rateLimit at twice the capacity',
    figure: guessed.goodput,
    unit: 'deliveries/s (goodput)',
    baselineName: 'adaptive',
    baseline: adaptive.goodput,
    ratio: guessed.goodput / adaptive.goodput,
    target: REPORTED,
    holds: true,
  });
} finally {
  receiver.child.disconnect();
}
