import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openBackends } from '../helpers/backends.js';
import { type TestPortal, json, startPortal } from '../helpers/server.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';

/**
 * Portal sessions on every adapter, through the API: a session made on one portal instance works on
 * another over the same store (a restart), its revoke holds there too, its expiry is the store's
 * record, and the store keeps no token, only the secret's hash.
 */
const { list: backends, close } = await openBackends('portal sessions');
const suites: ReturnType<typeof suite>[] = [];

const as = (app: TestPortal, token: string, path: string) =>
  app.api(path, { headers: { authorization: `Bearer ${token}` } });

for (const backend of backends) {
  const on = suite(`portal sessions: ${backend.name}`);
  suites.push(on);

  on(
    'made, used, kept across a restart, revoked there, expired by the clock; the token is not in the store',
    async () => {
      const { options, cleanup, dump, reopen } = await backend.options();
      const time = manualClock(new Date('2026-12-06T10:00:00Z'));
      const base = { clock: time.clock, webhooks: { tick: NEVER } };
      const app = await startPortal({ ...options, ...base });
      let second: TestPortal | undefined;
      try {
        const made = await json(
          await app.api('/portal-sessions', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ scopes: ['webhooks'], ttlSeconds: 600 }),
          }),
        );
        const kept = await json(
          await app.api('/portal-sessions', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ ttlSeconds: 120 }),
          }),
        );
        assert.is((await as(app, made.token, '/webhooks')).status, 200);
        assert.is((await as(app, made.token, '/files')).status, 403);

        const stored = await dump();
        assert.ok(stored.includes(made.id), 'the session is in the store');
        assert.not.ok(stored.includes(made.token.split('.')[1]), "the token's secret is not");

        let now = app;
        if (reopen === null) {
          console.log(`SKIP the restart half on ${backend.name}: a memory store keeps nothing across a restart`);
        } else {
          await app.close();
          second = await startPortal({ ...reopen(), ...base });
          now = second;
          assert.is((await as(now, made.token, '/webhooks')).status, 200, 'the session outlives the instance');
        }
        assert.is((await now.api(`/portal-sessions/${made.id}`, { method: 'DELETE' })).status, 204);
        assert.is((await as(now, made.token, '/webhooks')).status, 401, 'revoked');
        assert.is((await as(now, kept.token, '/files')).status, 200);
        time.advance(120);
        assert.is((await as(now, kept.token, '/files')).status, 401, 'expired');
      } finally {
        await (second ?? app).close();
        await cleanup();
      }
    },
  );
}

suites[suites.length - 1]!.after(close);
for (const one of suites) one.run();
