import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { sqlStorage } from '../../adapters/sql/index.js';
import type { Portal } from '../../src/index.js';
import { connectPostgres, dropSchema, freshSchema, openPglite } from '../helpers/sql.js';
import { NEVER, waitFor, webhookPortal } from '../helpers/webhooks.js';

/*
 * Sub-second delivery across instances: a publish on one instance wakes the worker of another
 * through LISTEN/NOTIFY. The workers here tick once a year (NEVER), so a call can only come from
 * the notification: nothing waits for a poll.
 */

test('PGlite serves one process: its storage offers no subscribe, and the local poke delivers', async () => {
  const pglite = await openPglite();
  try {
    const storage = sqlStorage({ client: pglite });
    assert.is(storage.subscribe, undefined);
    // The worker never ticks: the call comes from the publish's poke of the worker beside it.
    const transport = memoryTransport({ respond: () => 204 });
    const portal = await webhookPortal({ storage, transport, webhooks: { tick: NEVER } });
    try {
      await portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
      const event = await portal.events.publish('acct_a', 'customer-created', { n: 1 });
      await waitFor(
        () => transport.calls.some((call) => call.headers['webhook-id'] === event.id),
        'the event delivered through the local poke',
        10_000,
      );
    } finally {
      await portal.close();
    }
  } finally {
    await pglite.close();
  }
});

const postgres = await connectPostgres();
if (!postgres.pool) {
  console.log(`SKIP cross-instance wake-up tests: ${postgres.reason}`);
} else {
  const pool = postgres.pool;

  /** An API-only instance and a worker instance on one schema, their webhook, and the worker's calls. */
  async function twoInstances(schema: string) {
    const transport = memoryTransport({ respond: () => 204 });
    const publisher = await webhookPortal({
      storage: sqlStorage({ client: pool, schema }),
      webhooks: { worker: false },
    });
    const worker = await webhookPortal({
      storage: sqlStorage({ client: pool, schema }),
      transport,
      webhooks: { tick: NEVER },
    });
    const hook = await publisher.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    return { publisher, worker, transport, hook };
  }
  const closeAll = async (...portals: Portal[]) => {
    for (const portal of portals) await portal.close();
  };

  test('an event published on an instance without a worker is delivered by another instance at once, not at its tick', async () => {
    const schema = freshSchema();
    const { publisher, worker, transport, hook } = await twoInstances(schema);
    try {
      for (let n = 1; n <= 3; n++) {
        const event = await publisher.events.publish('acct_a', 'customer-created', { n });
        await waitFor(
          () => transport.calls.some((call) => call.headers['webhook-id'] === event.id),
          `event ${n} delivered through the notification`,
          10_000,
        );
      }
      assert.is(transport.calls.length, 3);
      const [delivery] = (await publisher.webhooks.deliveries('acct_a', hook.id))!;
      await waitFor(
        async () => (await publisher.webhooks.deliveries('acct_a', hook.id))!.every((d) => d.status === 'succeeded'),
        'every attempt recorded',
      );
      await publisher.webhooks.redeliver('acct_a', delivery!.id);
      await waitFor(
        () => transport.calls.length === 4,
        'a redeliver on the API-only instance delivered by the worker instance',
        10_000,
      );
    } finally {
      await closeAll(publisher, worker);
      await dropSchema(pool, schema);
    }
  });

  test('the listener comes back after its connection is killed, and the next publish is heard', async () => {
    const schema = freshSchema();
    const { publisher, worker, transport } = await twoInstances(schema);
    try {
      const listeners = async () =>
        (
          await pool.query(`SELECT pid FROM pg_stat_activity WHERE query = $1`, [
            `LISTEN "customer_portal_work_${schema}"`,
          ])
        ).rows as { pid: number }[];
      await waitFor(async () => (await listeners()).length === 1, 'the worker instance to listen');
      const [first] = await listeners();
      await pool.query('SELECT pg_terminate_backend($1)', [first!.pid]);
      await waitFor(
        async () => (await listeners()).some((row) => row.pid !== first!.pid),
        'a new listening connection',
        10_000,
      );
      const event = await publisher.events.publish('acct_a', 'customer-created', { after: 'reconnect' });
      await waitFor(
        () => transport.calls.some((call) => call.headers['webhook-id'] === event.id),
        'the event delivered after the reconnect',
        10_000,
      );
    } finally {
      await closeAll(publisher, worker);
      await dropSchema(pool, schema);
    }
  });

  test.after(async () => {
    await pool.end();
  });
}

test.run();
