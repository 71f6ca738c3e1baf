/**
 * A portal instance of `webhook-fleet.bench.js`, in its own process, on PostgreSQL:
 *
 *   node dist/bench/fleet-portal.js publisher <schema> <receiver url> <accounts> [<keys> ordered|unordered]
 *   node dist/bench/fleet-portal.js worker <schema>
 *
 * With `<keys>` (the ordering bench), the i-th event's data names its key (`k<i mod keys>`) and its
 * place in it (`n`), and `ordered` publishes it with that ordering key. `FLEET_RETRY_SCHEDULE`
 * (seconds, comma-separated) and `FLEET_TICK` give the workers a retry schedule and a tick of their own.
 *
 * The publisher is API-only (`webhooks: { worker: false }`): it creates one webhook per account to
 * the receiver, then publishes through `portal.events.publish` when told, `batch` calls at once.
 * A worker is a portal with the default worker (concurrency 32, a quarter of it per account), woken
 * by the publisher's NOTIFY. Driven over IPC (see `support/fleet.ts`).
 */
import pg from 'pg';
import { sqlStorage } from '../adapters/sql/index.js';
import { createPortal } from '../src/index.js';
import { DATABASE_URL, EVENT_TYPE, publishAll, serve } from './support/fleet.js';
import { BENCH_SIGNING_KEYS } from './support/signing-keys.js';

const [role, schema, url, accountCount = '8', keyCount, keyMode] = process.argv.slice(2);
const keys = keyCount === undefined ? 0 : Number(keyCount);
const retrySchedule = process.env.FLEET_RETRY_SCHEDULE?.split(',').map(Number);
const tick = process.env.FLEET_TICK;
if (
  (role !== 'publisher' && role !== 'worker') ||
  schema === undefined ||
  (role === 'publisher' && url === undefined)
) {
  console.error('usage: fleet-portal.js publisher <schema> <receiver url> <accounts> | worker <schema>');
  process.exit(2);
}

const pool = new pg.Pool({ connectionString: DATABASE_URL, connectionTimeoutMillis: 5000 });
pool.on('error', () => {});
const storage = sqlStorage({ client: pool, schema });
/** How long each claim took since the last `claims` command, in ms. */
let claimTimes: number[] = [];
const claimDeliveries = storage.claimDeliveries.bind(storage);
storage.claimDeliveries = async (claim) => {
  const started = performance.now();
  try {
    return await claimDeliveries(claim);
  } finally {
    claimTimes.push(performance.now() - started);
  }
};
const portal = await createPortal({
  auth: { apiKeys: ['bench-key-0123456789abcdef'] },
  signingKeys: BENCH_SIGNING_KEYS,
  storage,
  webhooks:
    role === 'publisher'
      ? { worker: false }
      : {
          allowPrivateNetworks: true,
          ...(retrySchedule === undefined ? {} : { retrySchedule }),
          ...(tick === undefined ? {} : { tick }),
        },
});

const accounts = Array.from({ length: Number(accountCount) }, (_, i) => `acct_fleet_${i}`);
if (role === 'publisher') {
  for (const account of accounts) await portal.webhooks.create(account, { type: EVENT_TYPE, url: url! });
}

const process_ = serve({
  publish:
    role === 'publisher'
      ? (command) =>
          publishAll(command, async (data, first) => {
            await Promise.all(
              data.map((one, i) => {
                if (keys === 0) return portal.events.publish(accounts[(first + i) % accounts.length]!, EVENT_TYPE, one);
                // The events of a batch have distinct keys (keys ≥ batch), and batches go one after
                // another: each key's events are published in order, all to one account's webhook.
                const index = (first + i) % keys;
                const account = accounts[index % accounts.length]!;
                const key = `k${index}`;
                const keyed = { ...one, key, n: Math.floor((first + i) / keys) };
                return portal.events.publish(
                  account,
                  EVENT_TYPE,
                  keyed,
                  keyMode === 'ordered' ? { orderingKey: key } : {},
                );
              }),
            );
          })
      : undefined,
  claims() {
    const sorted = claimTimes.sort((a, b) => a - b);
    claimTimes = [];
    const at = (p: number) =>
      sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
    return { claims: sorted.length, p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? NaN };
  },
  async stop() {
    await portal.close();
    await pool.end();
  },
});
process_.ready();
