import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openBackends } from '../helpers/backends.js';
import { withPortal } from '../helpers/server.js';
import { waitFor } from '../helpers/webhooks.js';

/**
 * A webhook's `rateLimit` against a real receiver on every backend: a burst of 5,000 events, and the
 * receiver counts the calls that reach it in each second of its clock.
 */
const { list: backends, close } = await openBackends('the rate limit tests');

const EVENTS = 5000;
const RATE_LIMIT = 1000;

/** A receiver answering 200 at once, keeping when each call arrived and its webhook-id. */
async function countingReceiver() {
  const arrivals: { at: number; id: string }[] = [];
  const server = http.createServer((req, res) => {
    arrivals.push({ at: Date.now(), id: String(req.headers['webhook-id']) });
    req.resume();
    req.on('end', () => res.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    arrivals,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

for (const backend of backends) {
  const on = suite(`rate limit: ${backend.name}`);

  on(
    `a burst of ${EVENTS} events to a webhook limited to ${RATE_LIMIT} a second: the receiver never counts more than ${RATE_LIMIT} (+1) in a second of its clock, and gets every one once`,
    async () => {
      const { options, cleanup } = await backend.options();
      const receiver = await countingReceiver();
      try {
        await withPortal({ ...options, webhooks: { allowPrivateNetworks: true } }, async (app) => {
          await app.portal.webhooks.create('acct_a', {
            type: 'customer-created',
            url: receiver.url,
            rateLimit: RATE_LIMIT,
          });
          for (let sent = 0; sent < EVENTS; sent += 250) {
            await Promise.all(
              Array.from({ length: 250 }, (_, i) =>
                app.portal.events.publish('acct_a', 'customer-created', { n: sent + i }),
              ),
            );
          }
          await waitFor(() => receiver.arrivals.length >= EVENTS, 'every call', 60_000);
          // A call more would show here: nothing is left to send.
          await new Promise((resolve) => setTimeout(resolve, 300));
        });
        const { arrivals } = receiver;
        assert.is(arrivals.length, EVENTS, 'every event called');
        assert.is(new Set(arrivals.map((one) => one.id)).size, EVENTS, 'each once');
        const perSecond = new Map<number, number>();
        for (const { at } of arrivals)
          perSecond.set(Math.floor(at / 1000), (perSecond.get(Math.floor(at / 1000)) ?? 0) + 1);
        const busiest = Math.max(...perSecond.values());
        assert.ok(busiest <= RATE_LIMIT + 1, `at most ${RATE_LIMIT} (+1) a second: ${busiest}`);
        const spanMs = arrivals.at(-1)!.at - arrivals[0]!.at;
        assert.ok(spanMs >= (EVENTS / RATE_LIMIT - 1) * 1000, `the burst was spread over ${spanMs} ms`);
        console.log(`  ${backend.name}: ${EVENTS} calls over ${spanMs} ms, at most ${busiest} in a second`);
      } finally {
        await receiver.close();
        await cleanup();
      }
    },
  );

  on.run();
}

// The backends' shared clients end once every suite above has run.
const done = suite('rate limit: done');
done.after(close);
done('the shared clients close', () => {});
done.run();
