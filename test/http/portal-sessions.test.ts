import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { isPortalError } from '../../src/errors.js';
import type { Logger } from '../../src/shared/logger.js';
import { KEY_B, json, withPortal, type TestPortal } from '../helpers/server.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';

const TOKEN = /^pts_[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/;

async function makeSession(app: TestPortal, body?: unknown) {
  const res = await app.api('/portal-sessions', {
    method: 'POST',
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  assert.is(res.status, 201, await res.clone().text());
  return (await json(res)) as { id: string; url: string | null; token: string; expiresAt: string };
}

/** A request as the session: its token as the Bearer credential. */
const as = (app: TestPortal, token: string, path: string, init: RequestInit = {}) =>
  app.api(path, { ...init, headers: { ...(init.headers as object), authorization: `Bearer ${token}` } });

const post = (body: unknown): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

test('a session: 201 with a token shown once and a link to the page carrying it in the fragment; it acts as the account', async () => {
  const { clock } = manualClock(new Date('2026-12-06T10:00:00Z'));
  await withPortal({ clock, ui: {}, webhooks: { tick: NEVER } }, async (app) => {
    const made = await makeSession(app);
    assert.match(made.id, /^pts_[A-Za-z0-9_-]{22}$/);
    assert.match(made.token, TOKEN);
    assert.ok(made.token.startsWith(`${made.id}.`));
    assert.is(made.url, `${app.url}/portal/#session=${made.token}&scopes=webhooks,agreements,files`);
    assert.is(made.expiresAt, '2026-12-06T11:00:00+00:00', 'an hour by default');

    const webhook = await app.portal.webhooks.create('acct_a', {
      type: 'customer-created',
      url: 'https://a.example/h',
    });
    await app.portal.webhooks.create('acct_b', { type: 'customer-created', url: 'https://b.example/h' });
    const listed = await as(app, made.token, '/webhooks');
    assert.is(listed.status, 200);
    assert.equal(
      (await json(listed)).data.map((one: { id: string }) => one.id),
      [webhook.id],
      "the account's webhooks, no other's",
    );
    const created = await as(
      app,
      made.token,
      '/webhooks',
      post({ type: 'customer-created', url: 'https://a.example/2' }),
    );
    assert.is(created.status, 201, 'all scopes and not read-only by default');
  });
});

test('scopes and read-only: 403 naming why, outside the scopes, on tickets, for any change, and for sessions themselves', async () => {
  await withPortal({ webhooks: { tick: NEVER } }, async (app) => {
    const reader = await makeSession(app, { scopes: ['webhooks'], readOnly: true });
    assert.is((await as(app, reader.token, '/webhooks')).status, 200);
    assert.is((await as(app, reader.token, '/event-types')).status, 200, 'the event types belong to webhooks');

    const agreements = await as(app, reader.token, '/agreements');
    assert.is(agreements.status, 403);
    assert.is((await json(agreements)).message, 'This portal session may reach webhooks; not agreements.');
    assert.is((await as(app, reader.token, '/files')).status, 403);
    const ticket = await as(app, reader.token, '/tickets/tck_1/message/tcm_1/attachment', { method: 'POST' });
    assert.is(ticket.status, 403);
    assert.is((await json(ticket)).message, 'This portal session may reach webhooks; not tickets.');

    const change = await as(
      app,
      reader.token,
      '/webhooks',
      post({ type: 'customer-created', url: 'https://a.example/h' }),
    );
    assert.is(change.status, 403);
    assert.is((await json(change)).message, 'This portal session may only read; POST is a change.');
    assert.equal((await json(await app.api('/webhooks'))).data, [], 'nothing was made');

    const full = await makeSession(app);
    for (const [path, init] of [
      ['/portal-sessions', post({})],
      [`/portal-sessions/${full.id}`, { method: 'DELETE' }],
    ] as const) {
      const refused = await as(app, full.token, path, init);
      assert.is(refused.status, 403, path);
      assert.match((await json(refused)).message, /cannot make or revoke portal sessions/);
    }
  });
});

test("the account's branding: readable with the key and by any session, whatever its scopes; null without one", async () => {
  await withPortal(
    {
      webhooks: { tick: NEVER },
      branding: async (accountId) => ({ name: `Company ${accountId}`, accentColor: '#123456' }),
    },
    async (app) => {
      const shown = { name: 'Company acct_a', logoUrl: null, accentColor: '#123456', supportEmail: null };
      assert.equal(await json(await app.api('/branding')), { branding: shown });
      const filesOnly = await makeSession(app, { scopes: ['files'], readOnly: true });
      assert.equal(await json(await as(app, filesOnly.token, '/branding')), { branding: shown });
      assert.is((await as(app, filesOnly.token, '/branding', { method: 'POST' })).status, 405);
      assert.is((await app.api('/branding', { headers: { authorization: `Bearer ${KEY_B}` } })).status, 200);
      assert.equal(
        (await json(await app.api('/branding', { headers: { authorization: `Bearer ${KEY_B}` } }))).branding.name,
        'Company acct_b',
      );
    },
  );
});

test('revoked or expired: 401; a wrong secret or an unknown id: 401; another account cannot revoke it', async () => {
  const time = manualClock(new Date('2026-12-06T10:00:00Z'));
  await withPortal({ clock: time.clock, webhooks: { tick: NEVER } }, async (app) => {
    const made = await makeSession(app, { ttlSeconds: 60 });
    assert.is(made.expiresAt, '2026-12-06T10:01:00+00:00');
    const forged = `${made.token.slice(0, -1)}${made.token.endsWith('A') ? 'B' : 'A'}`;
    assert.is((await as(app, forged, '/webhooks')).status, 401, 'the secret is checked');
    const unknown = `pts_${'A'.repeat(22)}.${made.token.split('.')[1]}`;
    assert.is((await as(app, unknown, '/webhooks')).status, 401);

    time.advance(59);
    assert.is((await as(app, made.token, '/webhooks')).status, 200);
    time.advance(1);
    const expired = await as(app, made.token, '/webhooks');
    assert.is(expired.status, 401, 'expired at expiresAt');

    const other = await makeSession(app);
    const byB = await app.api(`/portal-sessions/${other.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${KEY_B}` },
    });
    assert.is(byB.status, 404);
    assert.is((await as(app, other.token, '/webhooks')).status, 200, "another account's revoke changed nothing");
    assert.is((await app.api(`/portal-sessions/${other.id}`, { method: 'DELETE' })).status, 204);
    assert.is((await as(app, other.token, '/webhooks')).status, 401, 'revoked');
    assert.is((await app.api(`/portal-sessions/${other.id}`, { method: 'DELETE' })).status, 204, 'twice is fine');
    assert.is((await app.api('/portal-sessions/pts_nope', { method: 'DELETE' })).status, 404);
  });
});

test('bad input: 400 naming the field, and nothing stored', async () => {
  await withPortal({ webhooks: { tick: NEVER } }, async (app) => {
    const cases: [unknown, string][] = [
      [{ ttlSeconds: 59 }, 'the portal session.ttlSeconds: must be at least 60 seconds'],
      [{ ttlSeconds: 86_401 }, 'the portal session.ttlSeconds: must be at most 86400 seconds (a day)'],
      [{ scopes: [] }, 'the portal session.scopes: must name at least one scope'],
      [{ scopes: ['webhooks', 'webhooks'] }, 'the portal session.scopes: must name each scope once'],
      [{ scopes: ['tickets'] }, 'the portal session.scopes[0]: must be "webhooks", "agreements" or "files"'],
      [{ readOnly: 'yes' }, 'the portal session.readOnly: must be true or false'],
    ];
    for (const [body, message] of cases) {
      const res = await app.api('/portal-sessions', post(body));
      assert.is(res.status, 400, JSON.stringify(body));
      assert.is((await json(res)).message, message);
    }
    const unknown = await app.api('/portal-sessions', post({ ttl: 60 }));
    assert.is(unknown.status, 400);
    assert.match((await json(unknown)).message, /ttl/);
  });
});

test('1,000 live sessions an account: the next is 409 naming the limit, nothing stored; revoked and expired ones make room', async () => {
  const time = manualClock(new Date('2026-12-06T10:00:00Z'));
  await withPortal({ clock: time.clock, webhooks: { tick: NEVER } }, async (app) => {
    const made = [await app.portal.sessions.create('acct_a', { ttlSeconds: 60 })];
    while (made.length < 1_000) made.push(await app.portal.sessions.create('acct_a'));
    const refused = await app.api('/portal-sessions', post({}));
    assert.is(refused.status, 409);
    assert.is(
      (await json(refused)).message,
      'This account already has 1,000 live portal sessions, the most it may have: revoke some (DELETE /portal-sessions/{id}) or wait for them to expire.',
    );
    assert.is((await as(app, KEY_B, '/portal-sessions', post({}))).status, 201, 'another account is not held');

    assert.is((await app.api(`/portal-sessions/${made[1]!.id}`, { method: 'DELETE' })).status, 204);
    // Room for exactly one: had the refused session been stored, there would be none.
    await makeSession(app);
    assert.is((await app.api('/portal-sessions', post({}))).status, 409);
    try {
      await app.portal.sessions.create('acct_a');
      assert.unreachable('portal.sessions.create passed the limit');
    } catch (error) {
      assert.ok(isPortalError(error, 'PORTAL_SESSION_LIMIT'), String(error));
    }
    time.advance(60);
    await makeSession(app);
  });
});

test('the token is never logged, nor its secret, whatever the request did with it', async () => {
  const lines: string[] = [];
  const at = (level: string) => (object: object, msg?: string) => lines.push(JSON.stringify({ level, ...object, msg }));
  const logger: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  await withPortal({ logger, webhooks: { tick: NEVER } }, async (app) => {
    const made = await makeSession(app, { scopes: ['files'], readOnly: true });
    await as(app, made.token, '/files');
    await as(app, made.token, '/webhooks');
    await as(app, made.token, '/files', post({}));
    await app.api(`/portal-sessions/${made.id}`, { method: 'DELETE' });
    await as(app, made.token, '/files');
    const secret = made.token.split('.')[1]!;
    assert.ok(lines.length >= 5, 'requests were logged');
    assert.not.ok(
      lines.some((line) => line.includes(secret)),
      'the secret is in no log line',
    );
  });
});

test('portal.sessions.create: the same answer, its link a path without publicUrl and absolute with it', async () => {
  await withPortal({ ui: {}, webhooks: { tick: NEVER } }, async (app) => {
    const made = await app.portal.sessions.create('acct_a', { scopes: ['agreements'] });
    assert.is(made.url, `/portal/#session=${made.token}&scopes=agreements`);
    const reader = await app.portal.sessions.create('acct_a', { scopes: ['files'], readOnly: true });
    assert.is(reader.url, `/portal/#session=${reader.token}&scopes=files&readOnly=1`, 'the page hides its changes');
    assert.is((await as(app, made.token, '/agreements')).status, 200);
    await app.portal.sessions.revoke('acct_a', made.id);
    assert.is((await as(app, made.token, '/agreements')).status, 401);
  });
  await withPortal({ ui: {}, publicUrl: 'https://portal.example/v1', webhooks: { tick: NEVER } }, async (app) => {
    const made = await app.portal.sessions.create('acct_a');
    assert.is(made.url, `https://portal.example/portal/#session=${made.token}&scopes=webhooks,agreements,files`);
  });
  await withPortal({ webhooks: { tick: NEVER } }, async (app) => {
    assert.is((await app.portal.sessions.create('acct_a')).url, null, 'no page: no link');
  });
});

test.run();
