import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { sqlAdapters } from '../../adapters/sql/index.js';
import { createPortal } from '../../src/index.js';
import { silentLogger } from '../../src/shared/logger.js';
import { openBackends } from '../helpers/backends.js';
import { KEY_A } from '../helpers/server.js';
import { connectPostgres, dropSchema, freshSchema } from '../helpers/sql.js';
import { NEVER, manualClock, waitFor } from '../helpers/webhooks.js';

/**
 * Retention through the portal on every adapter: the worker's tick removes finished deliveries and
 * events past their time, never a pending delivery or the event it needs; and on one PostgreSQL,
 * two instances ticking at once remove each record once.
 */
const { list: backends, close } = await openBackends('retention');

for (const backend of backends) {
  const on = suite(`retention: ${backend.name}`);

  on(
    'the tick removes finished deliveries past retention; a failing one still retrying stays, with its event',
    async () => {
      const { options, cleanup, dump } = await backend.options();
      const time = manualClock();
      const failing = new Set<string>();
      const transport = memoryTransport({ respond: (call) => (failing.has(call.url) ? 503 : 200) });
      const portal = await createPortal({
        ...options,
        // The worker's errors, printed (a file that fails prints what it wrote): a claim or a
        // record that failed is what leaves a delivery waiting.
        logger: { ...silentLogger, error: (fields, message) => console.error(message, JSON.stringify(fields)) },
        auth: { apiKeys: [KEY_A] },
        transport,
        clock: time.clock,
        retention: { deliveriesMs: 10 * 60_000, eventsMs: 10 * 60_000 },
        webhooks: { tick: NEVER, retrySchedule: [3600, 3600] },
      });
      try {
        const good = await portal.webhooks.create('acct_a', {
          type: 'customer-created',
          url: 'https://good.example/in',
        });
        const bad = await portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://bad.example/in' });
        failing.add('https://bad.example/in');
        for (let i = 0; i < 3; i++) await portal.events.publish('acct_a', 'customer-created', { n: i });
        await portal.worker!.tick();
        await waitFor(
          async () => (await portal.webhooks.deliveries('acct_a', good.id, { status: 'succeeded' }))!.length === 3,
          'the good calls recorded',
        );
        await waitFor(
          async () =>
            (await portal.webhooks.deliveries('acct_a', bad.id))!.every((delivery) => delivery.attempts.length === 1),
          'the bad calls recorded',
        );
        time.advance(9 * 60);
        await portal.worker!.tick();
        assert.is((await portal.webhooks.deliveries('acct_a', good.id))!.length, 3, 'not yet past retention');
        time.advance(2 * 60);
        await portal.worker!.tick();
        assert.is((await portal.webhooks.deliveries('acct_a', good.id))!.length, 0, 'past retention: removed');
        const pending = (await portal.webhooks.deliveries('acct_a', bad.id))!;
        assert.equal(
          pending.map((delivery) => delivery.status),
          ['pending', 'pending', 'pending'],
          'still retrying: kept',
        );
        // Their events are kept: a redeliver still sends the event's data.
        failing.delete('https://bad.example/in');
        await portal.webhooks.redeliver('acct_a', pending[0]!.id);
        await portal.worker!.tick();
        try {
          await waitFor(
            async () => (await portal.webhooks.deliveries('acct_a', bad.id, { status: 'succeeded' }))!.length === 1,
            'the redelivery went out',
          );
        } catch (error) {
          // What the store held then, to tell a delivery never claimed from one claimed and lost.
          console.error(
            "the bad webhook's deliveries:",
            JSON.stringify(await portal.webhooks.deliveries('acct_a', bad.id)),
          );
          if (dump !== undefined) console.error('the store:', (await dump()).slice(0, 20_000));
          throw error;
        }
        assert.ok(
          transport.calls.some((call) => call.url === 'https://bad.example/in' && call.body.includes('"n":')),
          'with its data',
        );
      } finally {
        await portal.close();
        await cleanup();
      }
    },
  );

  on.run();
}

const options = suite('retention: options');
options('retention is checked at start: at least a minute, or Infinity', async () => {
  for (const retention of [
    { eventsMs: 1000 },
    { deliveriesMs: -1 },
    { deliveriesMs: 90_000.5 },
    { eventsMs: Number.NaN },
  ]) {
    try {
      await createPortal({ auth: { apiKeys: [KEY_A] }, retention, webhooks: { worker: false } });
      assert.unreachable(JSON.stringify(retention));
    } catch (error) {
      assert.match(String(error), /retention\.(eventsMs|deliveriesMs) must be/);
    }
  }
  const portal = await createPortal({
    auth: { apiKeys: [KEY_A] },
    retention: { eventsMs: Infinity, deliveriesMs: 60_000 },
    webhooks: { worker: false },
  });
  await portal.close();
});
options.run();

const instances = suite('retention: two instances on one PostgreSQL');
instances('two instances ticking at once remove each record once', async () => {
  const postgres = await connectPostgres();
  if (postgres.pool === undefined) {
    console.log(`  skipped: ${postgres.reason}`);
    return;
  }
  const schema = freshSchema();
  const time = manualClock();
  const shared = {
    auth: { apiKeys: [KEY_A] },
    clock: time.clock,
    transport: memoryTransport(),
    retention: { deliveriesMs: 60_000, eventsMs: 60_000 },
  };
  const one = await createPortal({
    ...sqlAdapters({ client: postgres.pool, schema }),
    ...shared,
    webhooks: { tick: NEVER },
  });
  const two = await createPortal({
    ...sqlAdapters({ client: postgres.pool, schema }),
    ...shared,
    webhooks: { tick: NEVER },
  });
  try {
    const hook = await one.webhooks.create('acct_a', { type: 'customer-created', url: 'https://hooks.example.com/in' });
    for (let i = 0; i < 1200; i++) await one.events.publish('acct_a', 'customer-created', { n: i });
    while ((await one.webhooks.deliveries('acct_a', hook.id, { status: 'pending', limit: 1 }))!.length > 0)
      await one.worker!.tick();
    time.advance(120);
    const { rows: before } = await postgres.pool.query(
      `SELECT ((SELECT count(*) FROM "${schema}".portal_deliveries) + (SELECT count(*) FROM "${schema}".portal_queue))::int AS d, (SELECT count(*) FROM "${schema}".portal_events)::int AS e`,
    );
    assert.equal(before[0], { d: 1200, e: 1200 });
    await Promise.all([one.worker!.tick(), two.worker!.tick()]);
    const { rows: after } = await postgres.pool.query(
      `SELECT ((SELECT count(*) FROM "${schema}".portal_deliveries) + (SELECT count(*) FROM "${schema}".portal_queue))::int AS d, (SELECT count(*) FROM "${schema}".portal_events)::int AS e`,
    );
    assert.equal(after[0], { d: 0, e: 0 });
  } finally {
    await one.close();
    await two.close();
    await dropSchema(postgres.pool, schema);
    await postgres.pool.end();
  }
});
instances.after(close);
instances.run();
