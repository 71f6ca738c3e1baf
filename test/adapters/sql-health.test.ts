import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { sqlStorage } from '../../adapters/sql/index.js';
import type { OperationalEventOf, Portal } from '../../src/index.js';
import { connectPostgres, dropSchema, freshSchema } from '../helpers/sql.js';
import { NEVER, webhookPortal } from '../helpers/webhooks.js';

/*
 * Several instances on one PostgreSQL, each with its worker: a webhook disabled by one instance's
 * write is reported by that instance alone, whichever of them records its attempts.
 */

const postgres = await connectPostgres();
if (!postgres.pool) {
  console.log(`SKIP the webhook health tests across instances: ${postgres.reason}`);
} else {
  const pool = postgres.pool;

  test('three instances send a receiver that answers 410: the webhook is disabled once, and webhook.disabled is emitted once in all', async () => {
    const schema = freshSchema();
    const portals: Portal[] = [];
    const emitted: { instance: number; event: OperationalEventOf<'webhook.disabled'> }[] = [];
    const transport = memoryTransport({
      respond: async () => {
        // Held a moment, so that every instance has calls in flight when the first 410 is recorded.
        await new Promise((resolve) => setTimeout(resolve, 20));
        return 410;
      },
    });
    try {
      for (let instance = 0; instance < 3; instance++) {
        const portal = await webhookPortal({
          storage: sqlStorage({ client: pool, schema }),
          transport,
          webhooks: { tick: NEVER, concurrency: 8 },
        });
        portal.on('webhook.disabled', (event) => void emitted.push({ instance, event }));
        portals.push(portal);
      }
      const hook = await portals[0]!.webhooks.create('acct_a', {
        type: 'customer-created',
        url: 'https://r.example/in',
      });
      for (let i = 0; i < 30; i++) await portals[i % 3]!.events.publish('acct_a', 'customer-created', { n: i });
      await Promise.all(portals.map((portal) => portal.worker!.tick()));
      await Promise.all(portals.map((portal) => portal.worker!.tick()));
      assert.is(emitted.length, 1, JSON.stringify(emitted));
      assert.equal([emitted[0]!.event.webhookId, emitted[0]!.event.reason], [hook.id, 'gone']);
      const health = (await portals[1]!.webhooks.health('acct_a', hook.id))!;
      assert.equal([health.status, health.disabledReason], ['disabled', 'gone']);
      const log = (await portals[2]!.webhooks.deliveries('acct_a', hook.id))!;
      assert.is(log.length, 30);
      assert.ok(
        log.every((delivery) => delivery.status === 'failed' || delivery.status === 'cancelled'),
        'nothing left pending',
      );
      assert.is(
        log.filter((delivery) => delivery.status === 'failed').length,
        transport.calls.length,
        'every call made was recorded',
      );
      assert.ok(
        transport.calls.length < 30,
        `${transport.calls.length} calls: those claimed before the disable, no more`,
      );
    } finally {
      for (const portal of portals) await portal.close();
      await dropSchema(pool, schema);
    }
  });

  test.after(() => pool.end());
  test.run();
}
