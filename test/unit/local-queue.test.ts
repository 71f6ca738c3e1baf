import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { LocalQueue, REFILL_WAIT_MS } from '../../src/webhooks/local-queue.js';
import type { ClaimedDelivery } from '../../src/records.js';
import { deferred, fakeTimers } from '../helpers/webhooks.js';

const silent = { debug() {}, info() {}, warn() {}, error() {} };

/** A claimed delivery of `accountId`, with only what the queue reads. */
const delivery = (id: string, accountId = 'acct_a') => ({ delivery: { id, accountId } }) as unknown as ClaimedDelivery;

/**
 * A queue over a backlog of `backlog` deliveries (round-robin over `accounts`), whose calls are held
 * until the test lets them go, on a fake clock. It records each claim (its limit and what was held),
 * the calls in flight and the records.
 */
function harness({
  concurrency = 2,
  perAccount = 10,
  backlog = 0,
  accounts = ['acct_a'],
  claimMs = 0,
  aheadWaitLimitMs = 30_000,
  moreDue = () => false,
  gate,
}: {
  concurrency?: number;
  perAccount?: number;
  backlog?: number;
  accounts?: string[];
  claimMs?: number;
  aheadWaitLimitMs?: number;
  moreDue?: (id: string) => boolean;
  gate?: (id: string, now: number) => number;
} = {}) {
  const timers = fakeTimers();
  let left = backlog;
  let made = 0;
  const claims: { limit: number; held: Record<string, number>; at: number; took: number }[] = [];
  const calls = new Map<string, () => void>();
  const started: string[] = [];
  const recorded: string[] = [];
  const startedAt = new Map<string, number>();
  const queue = new LocalQueue<string>({
    concurrency,
    perAccount,
    aheadWaitLimitMs,
    timers,
    logger: silent,
    async claim(limit, held) {
      const at = timers.now();
      if (claimMs > 0) await timers.sleep(claimMs);
      const take = Math.min(limit, left);
      left -= take;
      claims.push({ limit, held: { ...held }, at, took: take });
      return Array.from({ length: take }, () => {
        made++;
        return delivery(`d${made}`, accounts[(made - 1) % accounts.length]);
      });
    },
    call(claimed) {
      const { promise, resolve } = deferred<string>();
      started.push(claimed.delivery.id);
      calls.set(claimed.delivery.id, () => resolve(claimed.delivery.id));
      return promise;
    },
    async record(_claimed, made) {
      recorded.push(made);
      return moreDue(made);
    },
    ...(gate === undefined ? {} : { gate: (claimed: ClaimedDelivery, now: number) => gate(claimed.delivery.id, now) }),
    started: (claimed, now) => startedAt.set(claimed.delivery.id, now),
  });
  /** Lets the call of `id` answer, then lets everything that follows run. */
  const answer = async (id: string) => {
    calls.get(id)!();
    calls.delete(id);
    await settle();
  };
  return { queue, timers, claims, calls, started, startedAt, recorded, answer, add: (n: number) => (left += n) };
}

/** Lets pending promises and immediates run. */
const settle = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

test('idle: with nothing claimed, whenIdle resolves at once, and a fill that finds nothing leaves it idle', async () => {
  const { queue, claims } = harness();
  await queue.whenIdle();
  queue.fill();
  await queue.whenIdle();
  assert.equal(
    claims.map(({ limit, took }) => ({ limit, took })),
    [{ limit: 4, took: 0 }],
  );
});

test('delivering: a claim takes room for concurrency in flight and as many ahead; an ended call starts the next', async () => {
  const { queue, claims, started, answer, recorded } = harness({ concurrency: 2, backlog: 3 });
  queue.fill();
  await settle();
  assert.equal(claims[0]!.limit, 4, 'twice the concurrency');
  assert.equal(started, ['d1', 'd2'], 'two in flight, one ahead');
  await answer('d1');
  assert.equal(started, ['d1', 'd2', 'd3'], 'the one claimed ahead starts at once, without a claim');
  assert.equal(recorded, ['d1']);
  await answer('d2');
  await answer('d3');
  await queue.whenIdle();
  assert.equal(recorded, ['d1', 'd2', 'd3']);
  assert.is(claims.length, 1, 'the claim took less than it asked for: no backlog, no claim more');
});

test('gated: a delivery whose gate says wait lets the next ones go first, and starts when its time comes', async () => {
  const { queue, started, startedAt, answer, recorded } = harness({
    concurrency: 4,
    backlog: 3,
    gate: (id, now) => (id === 'd1' && now < 500 ? 500 - now : 0),
  });
  queue.fill();
  while (!started.includes('d1')) await settle();
  assert.equal(started, ['d2', 'd3', 'd1'], 'd1 waits; the others go');
  assert.equal(
    ['d1', 'd2', 'd3'].map((id) => startedAt.get(id)),
    [500, 0, 0],
    'd1 at the time its gate named, each told to `started`',
  );
  const drained = queue.drain();
  for (const id of ['d2', 'd3', 'd1']) await answer(id);
  await drained;
  assert.equal(recorded, ['d2', 'd3', 'd1']);
});

test('claiming: one claim at a time; a fill during a claim claims again once it ends', async () => {
  const { queue, claims, timers } = harness({ concurrency: 1, backlog: 1, claimMs: 5 });
  queue.fill();
  queue.fill();
  queue.fill();
  await timers.sleep(6);
  await settle();
  assert.is(claims.length, 2, 'the two fills during the claim made one claim more');
  assert.ok(claims[1]!.at >= claims[0]!.at + 5, 'after the first ended');
});

for (const [claimMs, expected] of [
  [3, 1.8],
  [50, REFILL_WAIT_MS],
] as const) {
  test(`waiting to refill: after a full claim of ${claimMs} ms a freed slot waits ${expected} ms (two claims' time, at most REFILL_WAIT_MS)`, async () => {
    const { queue, claims, timers, answer } = harness({ concurrency: 4, backlog: 100, claimMs });
    queue.fill();
    await timers.sleep(claimMs);
    await settle();
    assert.equal(claims.length, 1);
    assert.is(claims[0]!.took, 8, 'it took all it asked for: a backlog');
    // Room worth less than a slot after a full claim: it waits for others to free.
    const freedAt = timers.now();
    await answer('d1');
    await timers.sleep(REFILL_WAIT_MS + claimMs + 10);
    await settle();
    assert.ok(claims.length >= 2, 'a refill claim');
    // The claims' moving average after one claim is 0.3 of its time; the wait twice that.
    assert.ok(Math.abs(claims[1]!.at - freedAt - expected) < 1e-9, `waited ${claims[1]!.at - freedAt} ms`);
  });
}

test('per account: each claim is told what this worker holds of each account', async () => {
  const { queue, claims, answer } = harness({ concurrency: 2, backlog: 3, accounts: ['acct_a', 'acct_b'] });
  queue.fill();
  await settle();
  assert.equal(claims[0]!.held, {});
  await answer('d1');
  queue.fill();
  await settle();
  // d2 (acct_b) in flight, d3 (acct_a) started when d1 ended.
  assert.equal(claims.at(-1)!.held, { acct_a: 1, acct_b: 1 });
});

test('a record that says more is due claims again, at once when nothing is left in flight or ahead', async () => {
  const { queue, claims, answer, add, timers } = harness({
    concurrency: 2,
    backlog: 1,
    claimMs: 4,
    moreDue: (id) => id === 'd1',
  });
  queue.fill();
  await timers.sleep(4);
  await settle();
  assert.is(claims.length, 1);
  add(1);
  const endedAt = timers.now();
  await answer('d1');
  assert.is(claims.length, 2, 'the record asked for another claim');
  assert.is(claims[1]!.at, endedAt, 'with no timer');
});

test('a delivery claimed ahead that waited past the limit is not called', async () => {
  const { queue, started, answer, timers } = harness({ concurrency: 1, backlog: 2, aheadWaitLimitMs: 50 });
  queue.fill();
  await settle();
  assert.equal(started, ['d1']);
  await timers.sleep(60);
  await answer('d1');
  await queue.whenIdle();
  assert.equal(started, ['d1'], 'd2 waited 60 ms for a slot: left to its lease');
});

test('stopped: drain claims no more, and resolves once what was claimed is called and recorded', async () => {
  const { queue, claims, answer, recorded } = harness({ concurrency: 1, backlog: 10 });
  queue.fill();
  await settle();
  let drained = false;
  const draining = queue.drain().then(() => (drained = true));
  await answer('d1');
  assert.not.ok(drained, 'd2 was claimed ahead: it still goes out');
  await answer('d2');
  await draining;
  assert.equal(recorded, ['d1', 'd2']);
  queue.fill();
  await settle();
  assert.is(claims.length, 1, 'no claim after drain');
});

test('a failing claim is logged and leaves the queue idle, not backlogged', async () => {
  const errors: string[] = [];
  const queue = new LocalQueue<string>({
    concurrency: 1,
    perAccount: 1,
    aheadWaitLimitMs: 1000,
    timers: fakeTimers(),
    logger: { ...silent, error: (_: object, message: string) => errors.push(message) },
    claim: () => Promise.reject(new Error('database gone')),
    call: async () => 'x',
    record: async () => false,
  });
  queue.fill();
  await queue.whenIdle();
  assert.equal(errors, ['webhook worker: claiming due deliveries failed']);
  assert.not.ok(queue.backlogged);
});

test('a fill asked while a claim fails claims once more when it ends; a failure alone does not', async () => {
  const timers = fakeTimers();
  let claims = 0;
  let fail = true;
  const queue = new LocalQueue<string>({
    concurrency: 1,
    perAccount: 1,
    aheadWaitLimitMs: 1000,
    timers,
    logger: silent,
    async claim() {
      claims++;
      const failing = fail;
      await timers.sleep(5);
      if (failing) throw new Error('deadlock detected');
      return [];
    },
    call: async () => 'x',
    record: async () => false,
  });
  queue.fill();
  await timers.sleep(6);
  await queue.whenIdle();
  assert.is(claims, 1, 'a failed claim that nobody asked after is not tried again');
  queue.fill();
  // A publish's poke while the claim runs: it fails, and the poke is not lost.
  queue.fill();
  fail = false;
  await timers.sleep(6);
  await settle();
  await timers.sleep(6);
  await queue.whenIdle();
  assert.is(claims, 3, 'the fill asked during the failing claim claimed again');
});

test.run();
