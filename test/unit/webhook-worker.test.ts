import cron from 'node-cron';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryStorage, memoryTransport } from '../../adapters/memory/index.js';
import type { Logger, WebhookCall } from '../../src/index.js';
import { newEvent } from '../../src/domain/events.js';
import { DEFAULT_RETRY_SCHEDULE } from '../../src/rules/retry-schedule.js';
import { createWebhookWorker, LEASE_MARGIN_MS, REFILL_WAIT_MS, type WorkerTimers } from '../../src/webhooks/worker.js';
import { atom } from '../../src/shared/time.js';
import { webhookRecord } from '../conformance/fixtures.js';
import { deferred, fakeTimers, manualClock, secondsBetween, waitFor, webhookPortal } from '../helpers/webhooks.js';
import { everyDelivery } from '../helpers/every-delivery.js';
import { notRecorded } from '../helpers/attempts.js';

const data = { customer: { id: 'cus_1' } };
const HOOK = { type: 'customer-created', url: 'https://receiver.example/hook' };

function recordingLogger() {
  const lines: { level: string; object: Record<string, unknown>; message?: string }[] = [];
  const at = (level: string) => (object: object, message?: string) =>
    lines.push({ level, object: object as Record<string, unknown>, message });
  const logger: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  return { logger, lines };
}

/** A worker that claims only when ticked or poked (its cron never fires), retrying after 5 s. */
function tickedWorker(
  storage: Parameters<typeof createWebhookWorker>[0]['storage'],
  transport: Parameters<typeof createWebhookWorker>[0]['transport'],
  clock: () => Date,
  options: { concurrency: number; concurrencyPerAccount?: number; timeoutMs?: number; timers?: WorkerTimers },
) {
  return createWebhookWorker({
    storage,
    transport,
    clock,
    logger: recordingLogger().logger,
    tick: '0 0 0 1 1 *',
    timeoutMs: 15_000,
    retrySchedule: [5],
    ...options,
  });
}

test('the default schedule: ten attempts over about three days, each wait its step ± 10 %, then failed', async () => {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const transport = memoryTransport({ respond: () => 500 });
  const portal = await webhookPortal({ clock: time.clock, transport });
  try {
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    await portal.events.publish('acct_a', 'customer-created', data);
    await portal.worker!.tick();
    const waits: number[] = [];
    for (;;) {
      const [delivery] = (await portal.webhooks.deliveries('acct_a', webhook.id))!;
      if (delivery!.status !== 'pending') break;
      waits.push(secondsBetween(time.now, delivery!.nextAttemptAt!));
      time.advance(waits[waits.length - 1]! - 1);
      await portal.worker!.tick();
      assert.is(transport.calls.length, waits.length, 'not a second early');
      time.to(delivery!.nextAttemptAt!);
      await portal.worker!.tick();
    }
    assert.is(transport.calls.length, DEFAULT_RETRY_SCHEDULE.length + 1);
    assert.is(waits.length, DEFAULT_RETRY_SCHEDULE.length);
    waits.forEach((wait, i) => {
      const step = DEFAULT_RETRY_SCHEDULE[i]!;
      assert.ok(
        wait >= Math.floor(step * 0.9) && wait <= Math.ceil(step * 1.1) + 1,
        `retry ${i + 1}: ${wait} s for a ${step} s step`,
      );
    });
    const total = waits.reduce((sum, wait) => sum + wait, 0);
    assert.ok(
      total > 2.8 * 86_400 && total < 3.5 * 86_400,
      `about three days from first to last (${total / 86_400} days)`,
    );
    const [delivery] = (await portal.webhooks.deliveries('acct_a', webhook.id))!;
    assert.equal([delivery!.status, delivery!.nextAttemptAt, delivery!.attempts.length], ['failed', null, 10]);
    time.advance(30 * 86_400);
    await portal.worker!.tick();
    assert.is(transport.calls.length, 10);
  } finally {
    await portal.close();
  }
});

test('a call body is serialized once per event, for every webhook, attempt and secret; a rotated webhook gets both signatures', async () => {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const transport = memoryTransport({ respond: (_call) => (transport.calls.length <= 4 ? 500 : 200) });
  const portal = await webhookPortal({ clock: time.clock, transport, webhooks: { retrySchedule: [5, 5] } });
  const stringify = JSON.stringify;
  let serialized = 0;
  try {
    const rotated = await portal.webhooks.create('acct_a', HOOK);
    await portal.webhooks.create('acct_a', HOOK);
    await portal.webhooks.rotateSecret('acct_a', rotated.id, { graceMs: 3_600_000 });
    // A call body is the one object with exactly these keys (`callBody`); the publish sends the first attempt at once.
    JSON.stringify = ((value: unknown, ...rest: never[]) => {
      if (typeof value === 'object' && value !== null && Object.keys(value).join() === 'id,type,createdAt,data')
        serialized++;
      return stringify(value, ...rest);
    }) as typeof JSON.stringify;
    await portal.events.publish('acct_a', 'customer-created', data);
    for (let round = 0; round < 3; round++) {
      await portal.worker!.tick();
      time.advance(6);
    }
    JSON.stringify = stringify;
    assert.is(transport.calls.length, 6, 'two webhooks, three attempts each');
    assert.is(serialized, 1, 'one body for all six calls');
    assert.is(new Set(transport.calls.map((call) => call.body)).size, 1);
    const toRotated = transport.calls.filter(
      (call) => call.url === rotated.url && call.headers['webhook-signature']!.includes(' '),
    );
    assert.is(toRotated.length, 3, 'every attempt to the rotated webhook carries both signatures');
  } finally {
    JSON.stringify = stringify;
    await portal.close();
  }
});

test('jitter spreads retries: the same failure does not always wait the same', async () => {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const portal = await webhookPortal({
    clock: time.clock,
    // A 500, which says nothing of load: every delivery is tried (a 503 would lower the calls in flight).
    transport: memoryTransport({ respond: () => 500 }),
    webhooks: { retrySchedule: [1000] },
  });
  try {
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    for (let i = 0; i < 20; i++) await portal.events.publish('acct_a', 'customer-created', data);
    await portal.worker!.tick();
    const waits = new Set(
      (await portal.webhooks.deliveries('acct_a', webhook.id))!.map((d) => secondsBetween(time.now, d.nextAttemptAt!)),
    );
    assert.ok(waits.size > 3, `20 retries spread over several times (${[...waits]})`);
    for (const wait of waits) assert.ok(wait >= 900 && wait <= 1100, String(wait));
  } finally {
    await portal.close();
  }
});

test('a worker killed mid-call: its lease runs out and another worker delivers, exactly one attempt recorded', async () => {
  const storage = memoryStorage();
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const publisher = await webhookPortal({ storage, clock: time.clock, webhooks: { worker: false } });
  const transport = memoryTransport();
  const survivor = tickedWorker(storage, transport, time.clock, { concurrency: 4 });
  try {
    const webhook = await publisher.webhooks.create('acct_a', HOOK);
    const event = await publisher.events.publish('acct_a', 'customer-created', data);
    // The dead worker: it claimed the delivery, started the call, and never came back to record it.
    const [claimed] = await storage.claimDeliveries({
      now: atom(time.now),
      leaseUntil: atom(new Date(time.now.getTime() + 15_000 + LEASE_MARGIN_MS)),
      limit: 10,
      owner: 'worker-dead',
    });
    assert.is(claimed!.event.id, event.id);
    await survivor.tick();
    assert.is(transport.calls.length, 0, 'leased: the other worker leaves it alone');
    time.advance(75);
    await survivor.tick();
    assert.is(transport.calls.length, 0, 'still leased at the last second');
    time.advance(1);
    await survivor.tick();
    assert.is(transport.calls.length, 1, 'the lease ran out: delivered');
    assert.is(transport.calls[0]!.headers['webhook-id'], event.id);
    const [delivery] = (await publisher.webhooks.deliveries('acct_a', webhook.id))!;
    assert.equal([delivery!.status, delivery!.attempts.length], ['succeeded', 1]);
    const late = { at: atom(time.now), statusCode: 200, error: null, durationMs: 1 };
    assert.equal(
      await storage.recordAttempt({
        id: delivery!.id,
        owner: 'worker-dead',
        attempt: late,
        outcome: { status: 'succeeded', nextAttemptAt: null },
      }),
      notRecorded,
    );
  } finally {
    await survivor.stop();
    await publisher.close();
  }
});

test('a call holds a lease of timeoutMs + 60 s, and the lease is released when the attempt is recorded', async () => {
  const storage = memoryStorage();
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  let seen: { leaseOwner: string | null; leaseUntil: string | null } | undefined;
  const transport = memoryTransport({
    respond: async () => {
      const [delivery] = await everyDelivery(storage, 'acct_a', webhookId);
      seen = { leaseOwner: delivery!.leaseOwner, leaseUntil: delivery!.leaseUntil };
      return 200;
    },
  });
  let webhookId = '';
  const portal = await webhookPortal({ storage, clock: time.clock, transport, webhooks: { timeoutMs: 20_000 } });
  try {
    webhookId = (await portal.webhooks.create('acct_a', HOOK)).id;
    await portal.events.publish('acct_a', 'customer-created', data);
    await portal.worker!.tick();
    assert.equal(seen, { leaseOwner: portal.worker!.owner, leaseUntil: atom(new Date(time.now.getTime() + 80_000)) });
    const [after] = await everyDelivery(storage, 'acct_a', webhookId);
    assert.equal([after!.leaseOwner, after!.leaseUntil], [null, null]);
  } finally {
    await portal.close();
  }
});

/** A transport answering 204 after 2 ms that counts the most calls it had in flight at once. */
function countingTransport() {
  let inFlight = 0;
  let most = 0;
  const transport = memoryTransport({
    respond: async () => {
      most = Math.max(most, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 2));
      inFlight--;
      return 204;
    },
  });
  return { transport, most: () => most };
}

test('no more than `concurrency` calls are in flight; every event still goes out', async () => {
  const { transport, most } = countingTransport();
  // One account: its share is the whole of concurrency here, so that concurrency alone is what holds.
  const portal = await webhookPortal({ transport, webhooks: { concurrency: 3, concurrencyPerAccount: 3 } });
  try {
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    const events = [];
    for (let i = 0; i < 25; i++) events.push(await portal.events.publish('acct_a', 'customer-created', { n: i }));
    await portal.worker!.tick();
    assert.is(most(), 3);
    assert.is(transport.calls.length, 25);
    assert.equal(
      new Set(transport.calls.map((call) => call.headers['webhook-id'])),
      new Set(events.map((event) => event.id)),
    );
    const log = (await portal.webhooks.deliveries('acct_a', webhook.id))!;
    assert.ok(log.every((delivery) => delivery.status === 'succeeded'));
  } finally {
    await portal.close();
  }
});

test('an account holds at most its share of the slots (a quarter by default), yet all its due deliveries go out in one tick', async () => {
  const { transport, most } = countingTransport();
  const portal = await webhookPortal({ transport, webhooks: { concurrency: 8 } });
  try {
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    for (let i = 0; i < 12; i++) await portal.events.publish('acct_a', 'customer-created', { n: i });
    await portal.worker!.tick();
    assert.is(most(), 2, 'floor(8 / 4) calls of the account at once');
    assert.is(transport.calls.length, 12);
    assert.ok(
      (await portal.webhooks.deliveries('acct_a', webhook.id))!.every((delivery) => delivery.status === 'succeeded'),
    );
  } finally {
    await portal.close();
  }
});

test('close() stops the cron job and waits for the call in flight, which is recorded', async () => {
  const release = deferred<number>();
  const started = deferred();
  const transport = memoryTransport({
    respond: () => {
      started.resolve();
      return release.promise;
    },
  });
  // The portal schedules other cron tasks too (the orphan sweep): count the worker's own.
  const workerTasks = () =>
    [...cron.getTasks().values()].filter((task) => task.name?.startsWith('customer-portal webhooks')).length;
  const before = workerTasks();
  const portal = await webhookPortal({ transport });
  let closing: Promise<unknown> | undefined;
  try {
    assert.is(workerTasks(), before + 1, 'the worker scheduled one cron task');
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    await portal.events.publish('acct_a', 'customer-created', data);
    await started.promise;
    let closed = false;
    closing = portal.close().then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.is(closed, false, 'close waits while the call is in flight');
    assert.is(workerTasks(), before, 'the cron task is gone already');
    release.resolve(200);
    await closing;
    const [delivery] = (await portal.webhooks.deliveries('acct_a', webhook.id))!;
    assert.equal([delivery!.status, delivery!.attempts.length], ['succeeded', 1]);
    await portal.events.publish('acct_a', 'customer-created', data);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.is(transport.calls.length, 1, 'a closed portal sends nothing more');
  } finally {
    release.resolve(200);
    await (closing ?? portal.close());
  }
});

test('webhooks.worker false: no worker, no calls; an instance with a worker delivers what it stored', async () => {
  const storage = memoryStorage();
  const transport = memoryTransport();
  const apiOnly = await webhookPortal({ storage, transport, webhooks: { worker: false } });
  const before = cron.getTasks().size;
  try {
    assert.is(apiOnly.worker, null);
    assert.is(cron.getTasks().size, before);
    const webhook = await apiOnly.webhooks.create('acct_a', HOOK);
    await apiOnly.events.publish('acct_a', 'customer-created', data);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.is(transport.calls.length, 0);
    const [pending] = (await apiOnly.webhooks.deliveries('acct_a', webhook.id))!;
    assert.equal([pending!.status, pending!.attempts], ['pending', []]);
    const worker = await webhookPortal({ storage, transport });
    try {
      await worker.worker!.tick();
      assert.is(transport.calls.length, 1);
    } finally {
      await worker.close();
    }
  } finally {
    await apiOnly.close();
  }
});

test('the cron tick picks up deliveries that are due without being poked', async () => {
  const storage = memoryStorage();
  const transport = memoryTransport();
  const portal = await webhookPortal({ storage, transport, webhooks: { tick: '* * * * * *' } });
  try {
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    // Stored behind the worker's back, as another instance would: only the tick can find it.
    await storage.publishEvents([newEvent('acct_a', 'customer-created', data, new Date())]);
    await waitFor(() => transport.calls.length === 1, 'the cron tick to deliver');
    await waitFor(
      async () => (await portal.webhooks.deliveries('acct_a', webhook.id))![0]!.status === 'succeeded',
      'the attempt recorded',
    );
  } finally {
    await portal.close();
  }
});

test('deleting a webhook cancels what is pending; a call in flight then is not recorded', async () => {
  const release = deferred<number>();
  const started = deferred();
  const { logger, lines } = recordingLogger();
  let calls = 0;
  const storage = memoryStorage();
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const transport = memoryTransport({
    respond: () => {
      if (++calls > 1) return 500;
      started.resolve();
      return release.promise;
    },
  });
  const portal = await webhookPortal({ storage, transport, logger, clock: time.clock });
  try {
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    await portal.events.publish('acct_a', 'customer-created', data);
    await started.promise;
    time.advance(1);
    await portal.events.publish('acct_a', 'customer-created', data);
    // The second fails with a 500 and waits for its retry (tick() would wait for the first, held in flight).
    await waitFor(
      async () => (await portal.webhooks.deliveries('acct_a', webhook.id))![0]!.attempts.length === 1,
      'the 500',
    );
    const log = (await portal.webhooks.deliveries('acct_a', webhook.id))!;
    assert.equal(
      log.map((d) => d.status),
      ['pending', 'pending'],
    );
    assert.is(await portal.webhooks.delete('acct_a', webhook.id), true);
    assert.is(await portal.webhooks.deliveries('acct_a', webhook.id), null, 'the log goes with the webhook');
    const tick = portal.worker!.tick();
    release.resolve(200);
    await tick;
    for (const delivery of log) {
      const stored = (await storage.getDelivery('acct_a', delivery.id))!;
      assert.is(stored.status, 'cancelled');
    }
    const inFlight = (await storage.getDelivery('acct_a', log[1]!.id))!;
    assert.equal(inFlight.attempts, [], 'the call that was in flight is not recorded');
    assert.ok(lines.some((line) => line.message?.startsWith('webhook attempt not recorded')));
    time.advance(86_400);
    await portal.worker!.tick();
    assert.is(transport.calls.length, 2, 'a cancelled delivery is not tried again');
  } finally {
    release.resolve(200);
    await portal.close();
  }
});

test('each attempt is logged with ids, status and outcome, and never the secret or signature', async () => {
  const { logger, lines } = recordingLogger();
  const portal = await webhookPortal({ logger, transport: memoryTransport({ respond: () => 500 }) });
  try {
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    const event = await portal.events.publish('acct_a', 'customer-created', data);
    await portal.worker!.tick();
    const line = lines.find((entry) => entry.message === 'webhook attempt');
    assert.ok(line);
    assert.equal(
      { ...line!.object, durationMs: 0, deliveryId: '', nextAttemptAt: '' },
      {
        deliveryId: '',
        webhookId: webhook.id,
        eventId: event.id,
        eventType: 'customer-created',
        attempt: 1,
        statusCode: 500,
        error: null,
        durationMs: 0,
        status: 'pending',
        nextAttemptAt: '',
      },
    );
    const text = JSON.stringify(lines);
    assert.not.match(text, webhook.secret!.slice(6));
    assert.not.match(text, 'v1,');
  } finally {
    await portal.close();
  }
});

test('a transport that rejects or never answers, and a record that cannot be signed, are failed attempts; a hanging call is aborted', async () => {
  const storage = memoryStorage();
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const aborted: string[] = [];
  const transport = {
    calls: [] as WebhookCall[],
    async send(call: WebhookCall, { signal }: { timeoutMs: number; signal?: AbortSignal }) {
      this.calls.push(call);
      if (call.url.endsWith('/reject')) throw new Error('transport bug');
      signal?.addEventListener('abort', () => aborted.push(call.url));
      return new Promise<never>(() => {});
    },
  };
  const worker = tickedWorker(storage, transport, time.clock, {
    timeoutMs: 40,
    concurrency: 4,
    concurrencyPerAccount: 4,
  });
  // The worker's cut-off timer is unref'd (it must not hold a host's process open); this test's process needs holding.
  const keepAlive = setInterval(() => {}, 1000);
  try {
    const good = webhookRecord({ id: 'wbh_reject', url: 'https://receiver.example/reject' });
    await storage.insertWebhook(good);
    await storage.insertWebhook({ ...good, id: 'wbh_hang', url: 'https://receiver.example/hang' });
    await storage.insertWebhook({ ...good, id: 'wbh_broken', secret: 'whsec_***' });
    await storage.publishEvents([newEvent('acct_a', 'customer-created', data, time.now)]);
    await worker.tick();
    const error = async (id: string) => (await everyDelivery(storage, 'acct_a', id))[0]!.attempts[0]!.error;
    assert.is(await error('wbh_reject'), 'transport bug');
    assert.is(await error('wbh_hang'), 'timed out after 40 ms');
    assert.equal(aborted, ['https://receiver.example/hang'], 'the call the worker stopped waiting for is aborted');
    assert.match((await error('wbh_broken'))!, /^the call could not be made: /);
    assert.is(transport.calls.length, 2, 'the unsignable call never reached the transport');
  } finally {
    clearInterval(keepAlive);
    await worker.stop();
  }
});

test('with a backlog, freed slots are refilled together: one claim fills every slot and the room ahead', async () => {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const inner = memoryStorage();
  const limits: number[] = [];
  const storage = {
    ...inner,
    async claimDeliveries(claim: Parameters<typeof inner.claimDeliveries>[0]) {
      limits.push(claim.limit);
      return inner.claimDeliveries(claim);
    },
  };
  // Answers at once: as slots free one by one, a claim per freed slot would ask for one delivery at a time.
  const transport = memoryTransport({ respond: () => 204 });
  const worker = tickedWorker(storage, transport, time.clock, { concurrency: 8, concurrencyPerAccount: 8 });
  const webhook = webhookRecord({ id: 'wbh_backlog' });
  await storage.insertWebhook(webhook);
  for (let i = 0; i < 64; i++) await storage.publishEvents([newEvent('acct_a', 'customer-created', { i }, time.now)]);
  await worker.tick();
  assert.is(transport.calls.length, 64);
  assert.is(limits[0], 16, 'the first claim asked for every slot and as many deliveries ahead');
  assert.ok(
    limits.every((limit) => limit >= 8),
    `each claim of the backlog asked for a slot's worth of room at least: ${limits.join(', ')}`,
  );
  assert.ok(limits.length <= 9, `64 deliveries in ${limits.length} claims`);
  await worker.stop();
});

/**
 * One call hangs and keeps its slot of 4 while 15 others are answered at once, on a memory store
 * whose claims take `claimMs`: each claim's start and how many it took, each fast call's answer, in ms.
 * The account's share (4) bounds what a claim takes: its calls in flight and claimed ahead.
 */
async function refillAroundAHangingCall(claimMs: number) {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  // The scheduler's time passes only when nothing else can run: the waits below are what it chose, whatever the load.
  // The hanging call's cut-off (16 s) lies past the horizon: it hangs until the test lets it go.
  const timers = fakeTimers({ horizonMs: 10_000 });
  const inner = memoryStorage();
  const claims: { taken: number; at: number }[] = [];
  const storage = {
    ...inner,
    async claimDeliveries(claim: Parameters<typeof inner.claimDeliveries>[0]) {
      const made = { taken: 0, at: timers.now() };
      claims.push(made);
      if (claimMs > 0) await timers.sleep(claimMs);
      const claimed = await inner.claimDeliveries(claim);
      made.taken = claimed.length;
      return claimed;
    },
  };
  const hang = deferred();
  const answeredAt: number[] = [];
  const transport = memoryTransport({
    respond: async (call) => {
      if (call.url.endsWith('/hang')) await hang.promise;
      else answeredAt.push(timers.now());
      return 204;
    },
  });
  const worker = tickedWorker(storage, transport, time.clock, { concurrency: 4, concurrencyPerAccount: 4, timers });
  const hanging = webhookRecord({ id: 'wbh_a_hang', url: 'https://receiver.example/hang' });
  const fast = webhookRecord({ id: 'wbh_b_fast', url: 'https://receiver.example/fast' });
  await storage.insertWebhook(hanging);
  await storage.insertWebhook(fast);
  await storage.publishEvents([newEvent('acct_a', 'customer-created', { i: 0 }, time.now)], { webhookId: hanging.id });
  time.advance(1); // the hanging one is due first, so the first claim takes it
  for (let i = 1; i <= 15; i++)
    await storage.publishEvents([newEvent('acct_a', 'customer-created', { i }, time.now)], { webhookId: fast.id });
  const ticking = worker.tick();
  try {
    await waitFor(() => answeredAt.length === 15, 'every other call while one hangs');
    assert.is(
      (await everyDelivery(inner, 'acct_a', hanging.id))[0]!.status,
      'pending',
      'the hanging call is still in flight',
    );
  } finally {
    hang.resolve();
    await ticking;
    await worker.stop();
  }
  // After the first claim (the hanging call and three), the refills of the slots the fast calls freed,
  // and how long each waited from the first call it refills that ended.
  const refills = claims.slice(1, 5).map((claim, i) => {
    const freed = Math.min(...answeredAt.filter((at) => at > claims[i]!.at && at < claim.at));
    return { ...claim, waited: claim.at - freed };
  });
  return { refills };
}

test('with a backlog, a hanging call holds back the refill of the other slots by REFILL_WAIT_MS at most', async () => {
  // Claims of 30 ms (a busy database): the freed slots would wait two claims, 60 ms, but for the bound.
  const { refills } = await refillAroundAHangingCall(30);
  assert.equal(
    refills.map((claim) => claim.taken),
    [3, 3, 3, 3],
    'the freed slots were refilled together, three at a time',
  );
  for (const { waited } of refills) {
    // Node's timers count from the event loop's clock, read at the start of its turn: a few ms early at most.
    assert.ok(waited >= REFILL_WAIT_MS - 5, `the freed slots waited for the hanging one's (${waited.toFixed(1)} ms)`);
    assert.ok(
      waited < REFILL_WAIT_MS + 30,
      `but not two claims' time: ${waited.toFixed(1)} ms, at most REFILL_WAIT_MS`,
    );
  }
});

test('with a backlog on a store whose claims take no time, freed slots wait about a millisecond', async () => {
  const { refills } = await refillAroundAHangingCall(0);
  assert.equal(
    refills.map((claim) => claim.taken),
    [3, 3, 3, 3],
    'still refilled together',
  );
  const waits = refills.map(({ waited }) => waited).sort((a, b) => a - b);
  assert.ok(
    waits[1]! < REFILL_WAIT_MS / 2,
    `waits ${waits.map((ms) => ms.toFixed(1)).join(', ')} ms: as long as two claims take, not REFILL_WAIT_MS`,
  );
});

test("a webhook at its in-flight limit with its own deliveries claimed ahead: its calls' ends start those, and claim again only once none is left", async () => {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const timers = fakeTimers();
  const inner = memoryStorage();
  const claimed: number[] = [];
  const storage = {
    ...inner,
    async claimDeliveries(claim: Parameters<typeof inner.claimDeliveries>[0]) {
      const got = await inner.claimDeliveries(claim);
      claimed.push(got.length);
      return got;
    },
  };
  // The first answer is an overload: the limit falls from the share (32) to 16, while the account
  // may still hold 32, so half its deliveries wait claimed ahead of the webhook's room.
  let answers = 0;
  const transport = memoryTransport({
    respond: async () => {
      if (answers++ === 0) return 503;
      // Answers end one at a time, as a receiver's do.
      await timers.sleep(10 + (answers % 7));
      return 204;
    },
  });
  const worker = tickedWorker(storage, transport, time.clock, { concurrency: 32, concurrencyPerAccount: 32, timers });
  await storage.insertWebhook(webhookRecord({ id: 'wbh_limited', accountId: 'acct_a' }));
  for (let i = 0; i < 200; i++) await storage.publishEvents([newEvent('acct_a', 'customer-created', { i }, time.now)]);
  try {
    await worker.tick();
  } finally {
    await worker.stop();
  }
  assert.is(transport.calls.length, 200, 'every delivery called once');
  // Some claims still find nothing (the account at its share asks again as any call ends); before,
  // each end of a call while the webhook was full asked too: 36 empty claims of 50 here.
  const empty = claimed.filter((got) => got === 0).length;
  assert.ok(empty < transport.calls.length / 10, `claims that found nothing: ${empty} of ${claimed.length}`);
});

test('deliveries claimed ahead start as calls end, without waiting for a claim; in flight stays within the slots and shares', async () => {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const timers = fakeTimers();
  const inner = memoryStorage();
  const claims: { started: number; ended: number; limit: number }[] = [];
  // A store whose claims take 30 ms (a busy database).
  const storage = {
    ...inner,
    async claimDeliveries(claim: Parameters<typeof inner.claimDeliveries>[0]) {
      const made = { started: timers.now(), ended: Infinity, limit: claim.limit };
      claims.push(made);
      await timers.sleep(30);
      const claimed = await inner.claimDeliveries(claim);
      made.ended = timers.now();
      return claimed;
    },
  };
  let inFlight = 0;
  let most = 0;
  const calledAt: number[] = [];
  const transport = memoryTransport({
    respond: async () => {
      calledAt.push(timers.now());
      most = Math.max(most, ++inFlight);
      await timers.sleep(2);
      inFlight--;
      return 204;
    },
  });
  const worker = tickedWorker(storage, transport, time.clock, { concurrency: 2, concurrencyPerAccount: 2, timers });
  for (const account of ['acct_a', 'acct_b']) {
    await storage.insertWebhook(webhookRecord({ id: `wbh_${account.slice(5)}_ahead`, accountId: account }));
    for (let i = 0; i < 2; i++) await storage.publishEvents([newEvent(account, 'customer-created', { i }, time.now)]);
  }
  await worker.tick();
  assert.is(calledAt.length, 4);
  assert.is(claims[0]!.limit, 4, 'the first claim asked for the two slots and two deliveries ahead');
  assert.ok(
    calledAt[3]! < (claims[1]?.ended ?? Infinity),
    'the third and fourth calls started as the first two ended, before any other claim came back',
  );
  assert.is(most, 2, 'never more calls in flight than slots');
  await worker.stop();
});

/**
 * Two accounts' deliveries and one slot: the first call holds it until `slotFreedLate` frees it, while the
 * scheduler's clock jumps past half the lease margin, so the other delivery, claimed ahead, has
 * waited too long by then. The portal's clock (`time`) does not move.
 */
async function waitedTooLong(storage: ReturnType<typeof memoryStorage>, logger: Logger) {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const hold = deferred();
  let late = 0;
  const transport = memoryTransport({
    respond: async () => {
      await hold.promise;
      return 204;
    },
  });
  const worker = createWebhookWorker({
    storage,
    transport,
    clock: time.clock,
    logger,
    tick: '0 0 0 1 1 *',
    timeoutMs: 15_000,
    retrySchedule: [5],
    concurrency: 1,
    concurrencyPerAccount: 1,
    timers: {
      now: () => performance.now() + late,
      setTimeout: (run, ms) => setTimeout(run, ms).unref(),
      clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
    },
  });
  for (const account of ['acct_a', 'acct_b']) {
    await storage.insertWebhook(webhookRecord({ id: `wbh_${account.slice(5)}_late`, accountId: account }));
    await storage.publishEvents([newEvent(account, 'customer-created', { account }, time.now)]);
  }
  return {
    time,
    transport,
    worker,
    /** Ticks until the first call holds the slot, then frees it past half the lease margin. */
    async slotFreedLate() {
      const ticking = worker.tick();
      await waitFor(() => transport.calls.length === 1, "the first account's call");
      late = LEASE_MARGIN_MS / 2 + 1000;
      hold.resolve();
      await ticking;
    },
    both: async () => [
      ...(await everyDelivery(storage, 'acct_a', 'wbh_a_late')),
      ...(await everyDelivery(storage, 'acct_b', 'wbh_b_late')),
    ],
  };
}

test('a delivery claimed ahead that waited half the lease margin for a slot is not called then: it is given back and goes with the next claim, not once its lease runs out', async () => {
  const { logger, lines } = recordingLogger();
  const { transport, worker, slotFreedLate, both } = await waitedTooLong(memoryStorage(), logger);
  try {
    await slotFreedLate();
    // Given back, it is claimed again at once: the portal's clock has not moved, its lease
    // (timeoutMs + 60 s) would still hold it.
    await waitFor(async () => (await both()).every((delivery) => delivery.status === 'succeeded'), 'both delivered');
  } finally {
    await worker.stop();
  }
  assert.is(transport.calls.length, 2, 'each called once');
  // Both were due at once: which account's went first depends on their ids.
  const waited = (await both()).find((delivery) => delivery.eventId !== transport.calls[0]!.headers['webhook-id']);
  assert.is(waited!.attempts.length, 1, 'the one that waited too long was called once, after it was given back');
  assert.ok(
    lines.some((line) => line.level === 'warn' && line.object.deliveryId === waited!.id),
    'the give-back is logged with the delivery',
  );
});

test('stop() waits for a give-back on its way, so the store is not closed under it', async () => {
  const memory = memoryStorage();
  const giving = deferred();
  let given = false;
  // A store whose give-back takes until the test lets it end.
  const storage = Object.assign(Object.create(memory) as typeof memory, {
    async giveBackDeliveries(owner: string, ids: readonly string[]) {
      await giving.promise;
      await memory.giveBackDeliveries!(owner, ids);
      given = true;
    },
  });
  const { worker, slotFreedLate, both } = await waitedTooLong(storage, recordingLogger().logger);
  await slotFreedLate();
  let stopped = false;
  const stopping = worker.stop().then(() => {
    stopped = true;
  });
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.not.ok(stopped, 'stop() is still waiting for the give-back');
  giving.resolve();
  await stopping;
  assert.ok(given, 'the give-back ended before stop() resolved');
  const waited = (await both()).find((delivery) => delivery.attempts.length === 0);
  assert.is(waited!.leaseOwner, null, 'the delivery that waited too long is free for any worker');
});

test('a store without giveBackDeliveries: a delivery that waited too long stays leased until its lease runs out', async () => {
  const memory = memoryStorage();
  // A store of the host's own, without the optional method.
  const storage = Object.assign(Object.create(memory) as typeof memory, { giveBackDeliveries: undefined });
  const { time, transport, worker, slotFreedLate } = await waitedTooLong(storage, recordingLogger().logger);
  try {
    await slotFreedLate();
    await worker.tick();
    assert.is(transport.calls.length, 1, 'the delivery that waited too long is not called while its lease holds');
    time.advance(15 + LEASE_MARGIN_MS / 1000 + 1);
    await worker.tick();
    assert.is(transport.calls.length, 2, 'it goes once the lease ran out');
  } finally {
    await worker.stop();
  }
});

test('a Retry-After counts from the answer: a record that comes later does not lengthen the hold', async () => {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const inner = memoryStorage();
  const records: Parameters<typeof inner.recordAttempt>[0][] = [];
  const storage = {
    ...inner,
    recordAttempt(record: Parameters<typeof inner.recordAttempt>[0]) {
      records.push(record);
      return inner.recordAttempt(record);
    },
  };
  const start = time.now;
  // The first answer comes at once by the call's own measure, while the portal's clock moves 3 s on
  // before the attempt is recorded (a busy event loop, a slow store).
  let answers = 0;
  const transport = memoryTransport({
    respond: () => {
      if (answers++ > 0) return 204;
      time.advance(3);
      return { statusCode: 429, headers: { 'retry-after': '1' } };
    },
  });
  const worker = tickedWorker(storage, transport, time.clock, { concurrency: 1 });
  await storage.insertWebhook(webhookRecord({ id: 'wbh_held', accountId: 'acct_a' }));
  await storage.publishEvents([newEvent('acct_a', 'customer-created', data, time.now)]);
  try {
    await worker.tick();
  } finally {
    await worker.stop();
  }
  const [held] = records;
  assert.is(held!.attempt.held, true);
  // The call's own measure may read a millisecond, which rounds the hold up to the next second.
  for (const [what, until] of [
    ['the hold', held!.hold!],
    ['the next attempt', held!.outcome.nextAttemptAt!],
  ] as const) {
    const wait = secondsBetween(start, until);
    assert.ok(wait >= 1 && wait <= 2, `${what}: a second after the answer, not after the record (${wait} s)`);
  }
});

test('two holds ending at different times: the worker claims again as each ends, not at the tick', async () => {
  const timers = fakeTimers();
  const base = Date.parse('2026-05-01T00:00:00Z');
  // The portal's clock follows the scheduler's, so that a hold's end is a timer.
  const clock = () => new Date(base + timers.now());
  const storage = memoryStorage();
  const answers: Record<string, string[]> = { '/short': ['1'], '/long': ['3'] };
  const calledAt: Record<string, number[]> = { '/short': [], '/long': [] };
  const transport = memoryTransport({
    respond: (call) => {
      const path = new URL(call.url).pathname;
      calledAt[path]!.push(timers.now());
      const retryAfter = answers[path]!.shift();
      return retryAfter === undefined ? 204 : { statusCode: 429, headers: { 'retry-after': retryAfter } };
    },
  });
  const worker = tickedWorker(storage, transport, clock, { concurrency: 4, timers });
  for (const path of ['/short', '/long']) {
    await storage.insertWebhook(
      webhookRecord({
        id: `wbh${path.replace('/', '_')}`,
        accountId: 'acct_a',
        url: `https://receiver.example${path}`,
      }),
    );
  }
  await storage.publishEvents([newEvent('acct_a', 'customer-created', data, clock())]);
  worker.start();
  try {
    await waitFor(() => calledAt['/long']!.length === 2 && calledAt['/short']!.length === 2, 'both called again');
  } finally {
    await worker.stop();
  }
  // Called at 0; held until 1 s and 3 s (whole seconds from a start at a whole second).
  assert.ok(calledAt['/short']![1]! >= 1000 && calledAt['/short']![1]! < 1100, `short: ${calledAt['/short']}`);
  assert.ok(calledAt['/long']![1]! >= 3000 && calledAt['/long']![1]! < 3100, `long: ${calledAt['/long']}`);
});

test('fair share on a slow store: calls that end while a claim runs still lead to the next claim, and one tick drains the backlog', async () => {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const inner = memoryStorage();
  // A store whose claim takes a while (a disk, a database): the calls it started end meanwhile.
  const storage = {
    ...inner,
    async claimDeliveries(claim: Parameters<typeof inner.claimDeliveries>[0]) {
      const claimed = await inner.claimDeliveries(claim);
      await new Promise((resolve) => setTimeout(resolve, 15));
      return claimed;
    },
  };
  const transport = memoryTransport();
  const worker = tickedWorker(storage, transport, time.clock, { concurrency: 8, concurrencyPerAccount: 2 });
  const webhook = webhookRecord({ id: 'wbh_slowstore' });
  await storage.insertWebhook(webhook);
  for (let i = 0; i < 20; i++) await storage.publishEvents([newEvent('acct_a', 'customer-created', { i }, time.now)]);
  await worker.tick();
  assert.is(transport.calls.length, 20, 'every due delivery went out in the one tick, two at a time');
  await worker.stop();
});

test('a call frees its slot once answered, before its attempt is stored; unstored attempts are bounded, and tick() and stop() wait for them', async () => {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const inner = memoryStorage();
  const release = deferred();
  let recording = 0;
  // A store whose writes wait (a slow database): the attempts of answered calls are still being stored.
  const storage = {
    ...inner,
    async recordAttempt(...args: Parameters<typeof inner.recordAttempt>) {
      recording++;
      await release.promise;
      return inner.recordAttempt(...args);
    },
  };
  const transport = memoryTransport();
  const worker = tickedWorker(storage, transport, time.clock, { concurrency: 1, concurrencyPerAccount: 1 });
  const webhook = webhookRecord({ id: 'wbh_slowwrite' });
  await storage.insertWebhook(webhook);
  for (let i = 0; i < 3; i++) await storage.publishEvents([newEvent('acct_a', 'customer-created', { i }, time.now)]);
  let idle = false;
  const ticking = worker.tick().then(() => (idle = true));
  await waitFor(
    () => transport.calls.length === 2 && recording === 2,
    'a second call while the first attempt is being stored',
  );
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.is(
    transport.calls.length,
    2,
    'no third call while `concurrency` more attempts than free slots wait to be stored',
  );
  assert.is(idle, false, 'tick() waits for the attempts to be stored');
  const called = new Set(transport.calls.map((call) => call.headers['webhook-id']));
  const leased = (await everyDelivery(inner, 'acct_a', webhook.id)).filter(
    (delivery) => delivery.leaseOwner === worker.owner,
  );
  assert.is(
    leased.filter((delivery) => called.has(delivery.eventId)).length,
    2,
    'an answered call keeps its lease until its attempt is stored',
  );
  assert.is(leased.length, 3, 'the third, claimed ahead, is leased and waits for the records');
  release.resolve();
  await ticking;
  assert.is(transport.calls.length, 3);
  const log = await everyDelivery(inner, 'acct_a', webhook.id);
  assert.equal(
    log.map((delivery) => [delivery.status, delivery.attempts.length, delivery.leaseOwner]),
    log.map(() => ['succeeded', 1, null]),
  );
  await worker.stop();
});

test('a storage that fails to claim is logged; the worker carries on', async () => {
  const { logger, lines } = recordingLogger();
  const storage = memoryStorage();
  let failing = true;
  const claim = storage.claimDeliveries.bind(storage);
  storage.claimDeliveries = async (options) => {
    if (failing) throw new Error('database is down');
    return claim(options);
  };
  const transport = memoryTransport();
  const portal = await webhookPortal({ storage, transport, logger });
  try {
    await portal.webhooks.create('acct_a', HOOK);
    await portal.events.publish('acct_a', 'customer-created', data);
    await portal.worker!.tick();
    assert.ok(lines.some((line) => line.level === 'error' && JSON.stringify(line.object).includes('database is down')));
    assert.is(transport.calls.length, 0);
    failing = false;
    await portal.worker!.tick();
    assert.is(transport.calls.length, 1);
  } finally {
    await portal.close();
  }
});

test('webhook options are checked when the portal is created', async () => {
  for (const [webhooks, pattern] of [
    [{ tick: 'every five seconds' }, /webhooks\.tick/],
    [{ timeoutMs: 0 }, /webhooks\.timeoutMs/],
    [{ timeoutMs: 1.5 }, /webhooks\.timeoutMs/],
    [{ concurrency: -1 }, /webhooks\.concurrency/],
    [{ concurrencyPerAccount: 0 }, /webhooks\.concurrencyPerAccount/],
    [{ maxPerAccount: 0 }, /webhooks\.maxPerAccount/],
    [{ retrySchedule: [5, -1] }, /webhooks\.retrySchedule/],
    [{ retrySchedule: [Number.NaN] }, /webhooks\.retrySchedule/],
  ] as const) {
    let message = '';
    await webhookPortal({ webhooks }).then(
      (portal) => portal.close(),
      (error: Error) => (message = error.message),
    );
    assert.match(message, pattern, JSON.stringify(webhooks));
  }
});

test.run();
