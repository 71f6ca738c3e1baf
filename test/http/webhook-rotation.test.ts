import { Webhook } from 'standardwebhooks';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { HttpError, verifyWebhook } from '../../src/index.js';
import { KEY_B, json, rejects, withPortal } from '../helpers/server.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';

const rotate = (body?: string, type = 'application/json') =>
  body === undefined ? { method: 'POST' } : { method: 'POST', headers: { 'content-type': type }, body };

const accepts = (secret: string, call: { body: string; headers: Record<string, string> }) => {
  try {
    new Webhook(secret).verify(call.body, call.headers);
    return true;
  } catch {
    return false;
  }
};

test('POST /webhooks/{id}/rotate-secret with no body: 200 with the new secret; calls carry both signatures for 24 h, then one', async () => {
  const time = manualClock();
  const transport = memoryTransport();
  await withPortal({ clock: time.clock, transport, webhooks: { tick: NEVER } }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    const res = await app.api(`/webhooks/${hook.id}/rotate-secret`, rotate());
    assert.is(res.status, 200);
    const rotated = await json(res);
    assert.equal(Object.keys(rotated), ['id', 'type', 'url', 'secret', 'createdAt'], 'the Webhook shape, nothing more');
    assert.equal({ ...rotated, secret: hook.secret }, hook);
    assert.match(rotated.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.is.not(rotated.secret, hook.secret);
    assert.equal(await json(await app.api(`/webhooks/${hook.id}`)), rotated, 'GET shows the new secret alone');

    // Both secrets verify a call during the grace, whichever a receiver holds.
    await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
    await app.portal.worker!.tick();
    const during = transport.calls.at(-1)!;
    assert.ok(accepts(hook.secret!, during) && accepts(rotated.secret!, during), 'standardwebhooks with either secret');
    // The default grace is 24 h: a second before its end both still sign, at its end only the new one.
    time.advance(24 * 3600 - 1);
    await app.portal.events.publish('acct_a', 'customer-created', { n: 2 });
    await app.portal.worker!.tick();
    const last = transport.calls.at(-1)!;
    assert.is(last.headers['webhook-signature']!.split(' ').length, 2);
    assert.ok(verifyWebhook(hook.secret!, last.headers, last.body, { now: time.now }));
    time.advance(1);
    await app.portal.events.publish('acct_a', 'customer-created', { n: 3 });
    await app.portal.worker!.tick();
    const after = transport.calls.at(-1)!;
    assert.is(after.headers['webhook-signature']!.split(' ').length, 1);
    assert.ok(verifyWebhook([hook.secret, rotated.secret], after.headers, after.body, { now: time.now }));
    assert.throws(
      () => verifyWebhook(hook.secret!, after.headers, after.body, { now: time.now }),
      /No webhook-signature matches/,
    );
  });
});

test('POST …/rotate-secret with {"graceMs"}: that grace; portal.webhooks.rotateSecret is the same operation', async () => {
  const time = manualClock();
  const transport = memoryTransport();
  await withPortal({ clock: time.clock, transport, webhooks: { tick: NEVER } }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    const first = await json(await app.api(`/webhooks/${hook.id}/rotate-secret`, rotate('{"graceMs":120000}')));
    // Rotated again within the grace: the calls are signed with the newest secret and the one it replaced.
    const second = (await app.portal.webhooks.rotateSecret('acct_a', hook.id, { graceMs: 60_000 }))!;
    assert.is.not(second.secret, first.secret);
    await app.portal.events.publish('acct_a', 'customer-created', {});
    await app.portal.worker!.tick();
    const call = transport.calls.at(-1)!;
    assert.equal(
      [hook.secret, first.secret, second.secret].map((secret) => accepts(secret, call)),
      [false, true, true],
    );
    time.advance(60);
    await app.portal.events.publish('acct_a', 'customer-created', {});
    await app.portal.worker!.tick();
    assert.equal(
      [first.secret, second.secret].map((secret) => accepts(secret, transport.calls.at(-1)!)),
      [false, true],
    );
    // The longest grace is accepted; 0 is none.
    assert.is((await app.api(`/webhooks/${hook.id}/rotate-secret`, rotate('{"graceMs":604800000}'))).status, 200);
    const atOnce = await json(await app.api(`/webhooks/${hook.id}/rotate-secret`, rotate('{"graceMs":0}')));
    await app.portal.events.publish('acct_a', 'customer-created', {});
    await app.portal.worker!.tick();
    assert.is(transport.calls.at(-1)!.headers['webhook-signature']!.split(' ').length, 1);
    assert.ok(accepts(atOnce.secret, transport.calls.at(-1)!));
  });
});

test('POST …/rotate-secret refuses a bad graceMs with a 400 naming it, and changes nothing', async () => {
  await withPortal(async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    const bad: [string, RegExp][] = [
      ['{"graceMs":1.5}', /^rotation\.graceMs: must be a whole number of milliseconds$/],
      ['{"graceMs":-1}', /^rotation\.graceMs: must be 0 or more$/],
      ['{"graceMs":604800001}', /^rotation\.graceMs: must be at most 604800000 \(7 days\)$/],
      ['{"graceMs":1e400}', /^rotation\.graceMs: must be a whole number/],
      ['{"graceMs":"60000"}', /^rotation\.graceMs: must be a number of milliseconds$/],
      ['{"graceMs":null}', /^rotation\.graceMs: must be a number/],
      ['{"graceMs":1000,"secret":"whsec_x"}', /^rotation has an unknown field "secret"\.$/],
      ['60000', /^rotation: must be an object such as \{"graceMs": 3600000\}$/],
      ['[60000]', /^rotation/],
      ['{"graceMs":', /not valid JSON/],
    ];
    for (const [body, message] of bad) {
      const res = await app.api(`/webhooks/${hook.id}/rotate-secret`, rotate(body));
      assert.is(res.status, 400, body);
      assert.match((await json(res)).message, message, body);
    }
    assert.is(
      (await app.api(`/webhooks/${hook.id}/rotate-secret`, rotate('graceMs=1', 'application/x-www-form-urlencoded')))
        .status,
      415,
    );
    const thrown = await rejects(
      () => app.portal.webhooks.rotateSecret('acct_a', hook.id, { graceMs: -5 }),
      /graceMs: must be 0 or more/,
    );
    assert.instance(thrown, HttpError);
    assert.is(thrown.status, 400);
    assert.equal(await app.portal.webhooks.get('acct_a', hook.id), hook, 'the secret is unchanged');
  });
});

test("POST …/rotate-secret: 404 for an unknown or malformed id and for another account's webhook, which keeps its secret", async () => {
  await withPortal(async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    const asB = await app.api(`/webhooks/${hook.id}/rotate-secret`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_B}` },
    });
    assert.is(asB.status, 404);
    assert.equal(await json(asB), { message: `No webhook ${hook.id} in this account.` });
    assert.is((await app.api('/webhooks/wbh_missing/rotate-secret', rotate())).status, 404);
    assert.is((await app.api('/webhooks/nope/rotate-secret', rotate('{}'))).status, 404);
    assert.is(await app.portal.webhooks.rotateSecret('acct_b', hook.id), null);
    assert.equal(await app.portal.webhooks.get('acct_a', hook.id), hook);
    assert.is((await app.api(`/webhooks/${hook.id}/rotate-secret`)).status, 405, 'GET is not a rotation');
  });
});

test('POST …/rotate-secret is an extension route: off with extensions: false', async () => {
  await withPortal({ extensions: false }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    assert.is((await app.api(`/webhooks/${hook.id}/rotate-secret`, rotate())).status, 404);
    assert.ok(await app.portal.webhooks.rotateSecret('acct_a', hook.id), 'the programmatic twin stays');
  });
});

test.run();
