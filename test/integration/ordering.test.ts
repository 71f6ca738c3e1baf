/**
 * Ordering keys through the worker, on every adapter, against a receiver that fails a quarter of
 * its calls at random: each key's events arrive in publish order, one call of a key at a time, each
 * event once; other keys and the unkeyed events are not held up. On PostgreSQL, by two instances
 * (two pools, two workers) publishing and delivering together. The workers run on a clock the
 * test moves, a second at a time, once every instance's tick has nothing left to do: a retry falls
 * due when the clock reaches it, not after a second of waiting.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { sqlAdapters } from '../../adapters/sql/index.js';
import { createPortal, type Portal, type PortalOptions, type WebhookTransport } from '../../src/index.js';
import { connectPostgres, dropSchema, freshSchema, openPglite } from '../helpers/sql.js';
import { removeDir, tempDir } from '../helpers/fs-dirs.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';

const KEYS = 8;
const PER_KEY = 10;
const UNKEYED = 12;

/** A receiver that fails 25 % of calls (a seeded draw), answers within 3 ms, and watches each key. */
function receiver() {
  let seed = 42;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const inFlight = new Map<string, number>();
  const delivered = new Map<string, number[]>();
  const unkeyed = new Set<number>();
  const calls = new Set<string>();
  let mostAtOnce = 0;
  let instances = new Set<string>();
  const transport = (instance: string): WebhookTransport => ({
    async send(call) {
      const { key, n } = JSON.parse(call.body).data as { key: string | null; n: number };
      calls.add(instance);
      instances = calls;
      if (key !== null) {
        const now = (inFlight.get(key) ?? 0) + 1;
        inFlight.set(key, now);
        mostAtOnce = Math.max(mostAtOnce, now);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 3)));
      const fails = random() < 0.25;
      if (key !== null) inFlight.set(key, inFlight.get(key)! - 1);
      if (!fails) {
        if (key === null) unkeyed.add(n);
        else delivered.set(key, [...(delivered.get(key) ?? []), n]);
      }
      return { statusCode: fails ? 500 : 204, headers: {}, error: null };
    },
  });
  const done = () =>
    unkeyed.size === UNKEYED && [...delivered.values()].reduce((sum, list) => sum + list.length, 0) >= KEYS * PER_KEY;
  return { transport, delivered, unkeyed, done, mostAtOnce: () => mostAtOnce, instances: () => instances };
}

const webhooks = { tick: NEVER, concurrency: 32, retrySchedule: Array.from({ length: 12 }, () => 1) };
/** Seconds the clock may move before every event must have arrived: 12 retries of a second, 10 events a key. */
const MOST_SECONDS = 300;

/** Publishes every key's events in order (each awaited before the next of its key, keys at once), taking turns among `portals`. */
async function publishAll(portals: Portal[]): Promise<void> {
  await Promise.all([
    ...Array.from({ length: KEYS }, async (_, k) => {
      for (let n = 0; n < PER_KEY; n++) {
        await portals[n % portals.length]!.events.publish(
          'acct_a',
          'customer-created',
          { key: `cus_${k}`, n },
          { orderingKey: `cus_${k}` },
        );
      }
    }),
    ...Array.from({ length: UNKEYED }, (_, n) =>
      portals[n % portals.length]!.events.publish('acct_a', 'customer-created', { key: null, n }),
    ),
  ]);
}

async function scenario(
  label: string,
  make: (transport: WebhookTransport, instance: number) => PortalOptions,
  instances = 1,
): Promise<string[]> {
  const watch = receiver();
  const time = manualClock();
  const portals: Portal[] = [];
  try {
    for (let i = 0; i < instances; i++) {
      portals.push(
        await createPortal({
          auth: { apiKeys: { 'ordering-test-key-of-a': 'acct_a' } },
          ...make(watch.transport(`instance-${i}`), i),
          clock: time.clock,
          webhooks,
        }),
      );
    }
    await portals[0]!.webhooks.create('acct_a', { type: 'customer-created', url: 'https://receiver.example/hook' });
    await publishAll(portals);
    for (let second = 0; !watch.done(); second++) {
      if (second > MOST_SECONDS) throw new Error(`${label}: not every event delivered within ${MOST_SECONDS} s`);
      // Every instance at once, as their cron ticks would run: each resolves when it has nothing due.
      await Promise.all(portals.map((portal) => portal.worker!.tick()));
      if (!watch.done()) time.advance(1);
    }
    for (let k = 0; k < KEYS; k++) {
      assert.equal(
        watch.delivered.get(`cus_${k}`),
        Array.from({ length: PER_KEY }, (_, n) => n),
        `${label}: cus_${k} in publish order, each once`,
      );
    }
    assert.is(watch.unkeyed.size, UNKEYED);
    assert.is(watch.mostAtOnce(), 1, `${label}: never two calls of one key at once`);
    return [...watch.instances()];
  } finally {
    for (const portal of portals) await portal.close();
  }
}

test('memory: each key in publish order under failures and retries', async () => {
  await scenario('memory', (transport) => ({ transport }));
});

test('fs: each key in publish order under failures and retries', async () => {
  const dir = tempDir('ordering');
  try {
    await scenario('fs', (transport) => ({
      storage: fsStorage({ dir }),
      blobs: fsBlobs({ dir: `${dir}/blobs` }),
      transport,
    }));
  } finally {
    removeDir(dir);
  }
});

test('PGlite: each key in publish order under failures and retries', async () => {
  const db = await openPglite();
  try {
    await scenario('PGlite', (transport) => ({ ...sqlAdapters({ client: db }), transport }));
  } finally {
    await db.close();
  }
});

test('PostgreSQL, two instances: each key in publish order under failures and retries, both delivering', async () => {
  const pools = [await connectPostgres(), await connectPostgres()];
  if (pools[0]!.pool === undefined || pools[1]!.pool === undefined) {
    console.log(`  skipped: ${pools[0]!.reason ?? pools[1]!.reason}`);
    for (const { pool } of pools) await pool?.end();
    return;
  }
  const schema = freshSchema();
  try {
    const delivering = await scenario(
      'PostgreSQL',
      (transport, i) => ({ ...sqlAdapters({ client: pools[i]!.pool!, schema }), transport }),
      2,
    );
    assert.equal(delivering.sort(), ['instance-0', 'instance-1'], 'both instances made calls');
  } finally {
    await dropSchema(pools[0]!.pool, schema);
    for (const { pool } of pools) await pool!.end();
  }
});

test.run();
