import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { KEY_B, json, rejects, withPortal } from '../helpers/server.js';

const ATOM = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/;

test('GET /webhooks/{id}: 200 with exactly the spec fields in their formats', async () => {
  const clock = () => new Date('2026-11-21T09:05:07.891Z');
  await withPortal({ clock }, async (app) => {
    const created = await app.portal.webhooks.create('acct_a', {
      type: 'customer-created',
      url: 'https://hooks.example/in',
    });
    const res = await app.api(`/webhooks/${created.id}`);
    assert.is(res.status, 200);
    assert.is(res.headers.get('content-type'), 'application/json; charset=utf-8');
    const body = await json(res);
    assert.equal(Object.keys(body).sort(), ['createdAt', 'id', 'secret', 'type', 'url']);
    assert.match(body.id, /^wbh_[0-9A-Za-z]{22}$/);
    assert.is(body.type, 'customer-created');
    assert.is(body.url, 'https://hooks.example/in');
    assert.match(body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.is(Buffer.from(body.secret.slice(6), 'base64').length, 32);
    assert.is(body.createdAt, '2026-11-21T09:05:07+00:00');
    assert.match(body.createdAt, ATOM);
    assert.equal(body, created);
  });
});

test("GET /webhooks/{id}: 404 for an unknown id, a malformed id, and another account's webhook", async () => {
  await withPortal(async (app) => {
    const ofB = await app.portal.webhooks.create('acct_b', { type: 'customer-created', url: 'https://b.example/h' });
    for (const id of ['wbh_0000000000000000000000', 'not-an-id', ofB.id]) {
      const res = await app.api(`/webhooks/${id}`);
      assert.is(res.status, 404, id);
      assert.equal(await json(res), { message: `No webhook ${id} in this account.` });
    }
  });
});

test('DELETE /webhooks/{id}: 204 with no body, then 404; another account cannot delete it', async () => {
  await withPortal(async (app) => {
    const created = await app.portal.webhooks.create('acct_a', {
      type: 'customer-created',
      url: 'https://a.example/h',
    });
    const asB = await app.api(`/webhooks/${created.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${KEY_B}` },
    });
    assert.is(asB.status, 404);
    assert.ok(await app.portal.webhooks.get('acct_a', created.id));
    const res = await app.api(`/webhooks/${created.id}`, { method: 'DELETE' });
    assert.is(res.status, 204);
    assert.is(await res.text(), '');
    assert.is(res.headers.get('content-type'), null);
    assert.is((await app.api(`/webhooks/${created.id}`)).status, 404);
    const again = await app.api(`/webhooks/${created.id}`, { method: 'DELETE' });
    assert.is(again.status, 404);
    assert.match((await json(again)).message, created.id);
  });
});

test('webhooks.create validates the type against eventTypes and the URL', async () => {
  await withPortal({ eventTypes: ['customer-created', 'invoice-paid'] }, async (app) => {
    const create = (input: unknown) => app.portal.webhooks.create('acct_a', input as never);
    assert.is((await create({ type: 'invoice-paid', url: 'http://r.example/x' })).type, 'invoice-paid');
    const cases: [unknown, RegExp][] = [
      [
        { type: 'agreement-created', url: 'https://r.example/' },
        /webhook\.type: must be one of: customer-created, invoice-paid/,
      ],
      [{ type: 'customer-created', url: 'ftp://r.example/' }, /webhook\.url: must use http or https/],
      [{ type: 'customer-created', url: 'https://user:pw@r.example/' }, /webhook\.url: must not carry credentials/],
      [{ type: 'customer-created', url: '/relative' }, /webhook\.url: must be an absolute URL/],
      [
        { type: 'customer-created', url: 'https://r.example/' + 'a'.repeat(2048) },
        /webhook\.url: must be at most 2048/,
      ],
      [{ type: 'customer-created' }, /webhook\.url/],
      [{ type: 'customer-created', url: 'https://r.example/', extra: 1 }, /webhook has an unknown field "extra"/],
      [null, /webhook/],
    ];
    for (const [input, pattern] of cases) {
      const error = await rejects(() => create(input), pattern);
      assert.is(error.status, 400, pattern.source);
    }
    await rejects(
      () => app.portal.webhooks.create('', { type: 'customer-created', url: 'https://r.example/' }),
      /accountId/,
    );
    assert.is((await app.portal.webhooks.list('acct_a')).length, 1, 'nothing stored by the refused calls');
  });
});

test('webhooks.get/list/delete: scoped to the account; get is null (never a throw) when absent', async () => {
  await withPortal(async (app) => {
    const first = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://a.example/1' });
    const second = await app.portal.webhooks.create('acct_a', {
      type: 'agreement-created',
      url: 'https://a.example/2',
    });
    const ofB = await app.portal.webhooks.create('acct_b', { type: 'customer-created', url: 'https://b.example/1' });
    assert.equal((await app.portal.webhooks.list('acct_a')).map((w) => w.id).sort(), [first.id, second.id].sort());
    assert.is(await app.portal.webhooks.get('acct_a', ofB.id), null);
    assert.is(await app.portal.webhooks.get('acct_a', 'garbage'), null);
    assert.is(await app.portal.webhooks.delete('acct_a', ofB.id), false);
    assert.is(await app.portal.webhooks.delete('acct_a', first.id), true);
    assert.equal(
      (await app.portal.webhooks.list('acct_a')).map((w) => w.id),
      [second.id],
    );
    assert.not.ok('accountId' in (await app.portal.webhooks.get('acct_a', second.id))!);
    assert.is.not(first.secret, second.secret);
  });
});

test.run();
