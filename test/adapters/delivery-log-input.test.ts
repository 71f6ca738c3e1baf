import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openBackends } from '../helpers/backends.js';
import { json, withPortal } from '../helpers/server.js';
import { NEVER } from '../helpers/webhooks.js';

const { list: backends, close } = await openBackends('the delivery log input tests');

const cursorOf = (createdAt: string, key: string) =>
  Buffer.from(JSON.stringify([createdAt, key])).toString('base64url');

for (const backend of backends) {
  const on = suite(`delivery log, crafted input: ${backend.name}`);

  on('crafted cursors and impossible dates are a 400 naming the parameter, never a 500', async () => {
    const { options, cleanup } = await backend.options();
    try {
      await withPortal({ ...options, webhooks: { tick: NEVER } }, async (app) => {
        const hook = await app.portal.webhooks.create('acct_a', {
          type: 'customer-created',
          url: 'https://hooks.example.com/a',
        });
        await app.portal.events.publish('acct_a', 'customer-created', { name: 'A' });
        const page = async (query: string) => app.api(`/webhooks/${hook.id}/deliveries?${query}`);
        const refused: [string, RegExp][] = [
          [`cursor=${cursorOf('0000-01-01T00:00:00+00:00', '1')}`, /^cursor: is not one this list gave/],
          [`cursor=${cursorOf('2026-02-30T00:00:00+00:00', '1')}`, /^cursor: is not one this list gave/],
          [`cursor=${cursorOf('2026-13-01T00:00:00+00:00', '1')}`, /^cursor: is not one this list gave/],
          [`cursor=${cursorOf('2026-01-01T24:00:00+00:00', '1')}`, /^cursor: is not one this list gave/],
          ['since=0000-01-01T00:00:00%2B00:00', /^deliveries\.since: must be a date-time/],
          ['since=2026-02-30T00:00:00Z', /^deliveries\.since: must be a date-time/],
          ['until=2026-04-31T00:00:00Z', /^deliveries\.until: must be a date-time/],
          ['since=2026-01-01T00:00:00%2B24:00', /^deliveries\.since: must be a date-time/],
          ['since=10000-01-01T00:00:00Z', /^deliveries\.since: must be a date-time/],
        ];
        for (const [query, message] of refused) {
          const res = await page(query);
          assert.is(res.status, 400, query);
          assert.match((await json(res)).message, message, query);
        }
        // A key past a bigint names no delivery on any store: refused (SQL) or an empty page, never a 500.
        const huge = await page(`cursor=${cursorOf('2026-01-01T00:00:00+00:00', '9999999999999999999')}`);
        assert.ok(huge.status === 400 || huge.status === 200, `a huge key: ${huge.status}`);
        const leap = await page('since=2024-02-29T00:00:00Z');
        assert.is(leap.status, 200, 'February 29 of a leap year is a date');
      });
    } finally {
      await cleanup();
    }
  });

  on.run();
}

// The backends' shared clients end once every suite above has run.
const done = suite('delivery log, crafted input: done');
done.after(close);
done('the shared clients close', () => {});
done.run();
