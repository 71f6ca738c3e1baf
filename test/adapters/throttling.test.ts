import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openBackends } from '../helpers/backends.js';
import { withPortal } from '../helpers/server.js';
import { waitFor } from '../helpers/webhooks.js';

/**
 * Throttling against a real receiver on every backend: a webhook's `rateLimit` over a burst of
 * 5,000 events, the receiver counting the calls that reach it in each second of its clock; and the
 * calls in flight, which fall under `503`s and climb back once the receiver answers again.
 */
const { list: backends, close } = await openBackends('the throttling tests');

const EVENTS = 5000;
const RATE_LIMIT = 1000;

/**
 * A receiver answering at once (`503` to the first `failFirst` calls, then 200), keeping when each
 * call arrived, its webhook-id, and the most calls it held at once.
 */
async function countingReceiver(failFirst = 0, delayMs = 0) {
  const arrivals: { at: number; id: string }[] = [];
  const seen = { open: 0, most: 0 };
  const server = http.createServer((req, res) => {
    arrivals.push({ at: Date.now(), id: String(req.headers['webhook-id']) });
    seen.most = Math.max(seen.most, ++seen.open);
    const status = arrivals.length <= failFirst ? 503 : 200;
    req.resume();
    // Answered `delayMs` later, so that calls overlap as they would at a real receiver.
    const answer = () => {
      seen.open--;
      res.statusCode = status;
      res.end();
    };
    req.on('end', () => (delayMs === 0 ? answer() : setTimeout(answer, delayMs)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    arrivals,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

for (const backend of backends) {
  const on = suite(`throttling: ${backend.name}`);

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

  on(
    "calls in flight: 503s halve the limit down to one call; once the receiver answers, it climbs back to the account's share, and the health shows each step",
    async () => {
      const { options, cleanup } = await backend.options();
      // 8 calls at once, each a 503: one fall for the calls in flight then (to 4), then 4, 2, 1.
      const receiver = await countingReceiver(8 + 4 + 2 + 1, 5);
      const storage = options.storage!;
      const kept: (number | null)[] = [];
      const watched = new Proxy(storage, {
        get(target, name, receiverOf) {
          if (name !== 'setInFlightLimit') return Reflect.get(target, name, receiverOf);
          return async (webhookId: string, limit: number | null) => {
            kept.push(limit);
            return target.setInFlightLimit(webhookId, limit);
          };
        },
      });
      try {
        await withPortal(
          {
            ...options,
            storage: watched,
            webhooks: { allowPrivateNetworks: true, concurrencyPerAccount: 8, retrySchedule: [0, 0, 0, 0, 0, 0, 0, 0] },
          },
          async (app) => {
            const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: receiver.url });
            await Promise.all(
              Array.from({ length: 60 }, (_, n) => app.portal.events.publish('acct_a', 'customer-created', { n })),
            );
            await waitFor(() => kept.at(-1) === null, 'the limit back at the share', 30_000);
            await waitFor(
              async () => (await app.portal.webhooks.health('acct_a', hook.id))?.inFlightLimit === null,
              'the health without a limit',
            );
            const delivered = () => new Set(receiver.arrivals.slice(15).map((one) => one.id)).size;
            await waitFor(() => delivered() === 60, 'every event delivered', 30_000);
          },
        );
        const lowest = kept.indexOf(1);
        assert.ok(lowest > 0, `it fell to one call: ${kept.join(' ')}`);
        assert.equal(kept.slice(0, lowest + 1), [4, 2, 1], 'halved, once for the calls in flight each time');
        const climb = kept.slice(lowest + 1);
        assert.equal(climb.at(-1), null, 'back to the share (no limit shown)');
        assert.ok(
          climb.slice(0, -1).every((limit, i, all) => limit !== null && (i === 0 || limit > all[i - 1]!)),
          `it climbed one step at a time: ${climb.join(' ')}`,
        );
        assert.is(climb[0], 2, 'from one call: a receiver just back is not sent the backlog at once');
        console.log(
          `  ${backend.name}: in flight ${kept.map((limit) => limit ?? 'share').join(' → ')}; at most ${receiver.seen.most} at once`,
        );
      } finally {
        await receiver.close();
        await cleanup();
      }
    },
  );

  on.run();
}

// The backends' shared clients end once every suite above has run.
const done = suite('throttling: done');
done.after(close);
done('the shared clients close', () => {});
done.run();
