import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createPortal } from '../../src/index.js';
import { KEY_A, KEY_B, json, listen, rawRequest, rejects, withPortal } from '../helpers/server.js';

const REALM = 'Bearer realm="customer-portal"';

test('no Authorization header: 401 with the realm and a message saying what to send', async () => {
  await withPortal(async (app) => {
    const res = await fetch(`${app.url}/v1/files`);
    assert.is(res.status, 401);
    assert.is(res.headers.get('www-authenticate'), REALM);
    assert.match((await json(res)).message, 'Authorization: Bearer');
  });
});

test('a header that is not a bearer token: 401 naming the expected form', async () => {
  await withPortal(async (app) => {
    for (const header of [
      'Basic dXNlcjpwYXNz',
      'Bearer',
      'Bearer ',
      `Bearer${KEY_A}`,
      'Token abc',
      'Bearer a b',
      'Bearer ü',
      `Bearer ${KEY_A} x`,
    ]) {
      const res = await rawRequest(`${app.url}/v1/files`, { headers: { authorization: header } });
      assert.is(res.status, 401, header);
      assert.is(res.headers['www-authenticate'], REALM, header);
      assert.match(JSON.parse(res.body).message, 'Malformed Authorization header', header);
    }
  });
});

test('an unknown key: 401 with error="invalid_token"; the scheme is case-insensitive', async () => {
  await withPortal(async (app) => {
    const res = await app.api('/files', { headers: { authorization: 'Bearer not-a-key' } });
    assert.is(res.status, 401);
    assert.is(res.headers.get('www-authenticate'), `${REALM}, error="invalid_token"`);
    assert.equal(await json(res), { message: 'The API key is not valid.' });
    // A key that differs from a real one in its last character only is just as unknown.
    const near = await app.api('/files', { headers: { authorization: `Bearer ${KEY_A.slice(0, -1)}X` } });
    assert.is(near.status, 401);
    for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
      assert.is((await app.api('/files', { headers: { authorization: `${scheme} ${KEY_A}` } })).status, 200, scheme);
    }
    // Extra blanks around the key are not part of it.
    assert.is(
      (await rawRequest(`${app.url}/v1/files`, { headers: { authorization: `Bearer   ${KEY_A}` } })).status,
      200,
    );
  });
});

test('auth runs before the route: an unauthenticated request reveals nothing of a record', async () => {
  await withPortal(async (app) => {
    const webhook = await app.portal.webhooks.create('acct_a', {
      type: 'customer-created',
      url: 'https://r.example/h',
    });
    for (const init of [{ headers: { authorization: 'Bearer nope' } }, { headers: { authorization: '' } }]) {
      const res = await app.api(`/webhooks/${webhook.id}`, init);
      assert.is(res.status, 401);
      assert.not.match(await res.text(), webhook.secret!);
    }
  });
});

test('apiKeys as a list: every key acts for the account "default"', async () => {
  const portal = await createPortal({ auth: { apiKeys: ['key-one-0123456789', 'key-two-0123456789'] } });
  const running = await listen(portal.handler);
  try {
    const webhook = await portal.webhooks.create('default', { type: 'customer-created', url: 'https://r.example/h' });
    for (const key of ['key-one-0123456789', 'key-two-0123456789']) {
      const res = await fetch(`${running.url}/v1/webhooks/${webhook.id}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      assert.is(res.status, 200, key);
    }
  } finally {
    await running.close();
    await portal.close();
  }
});

test('apiKeys as a map: each key acts for its own account', async () => {
  await withPortal(async (app) => {
    const ofA = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://a.example/h' });
    const ofB = await app.portal.webhooks.create('acct_b', { type: 'customer-created', url: 'https://b.example/h' });
    assert.is((await app.api(`/webhooks/${ofA.id}`)).status, 200);
    assert.is((await app.api(`/webhooks/${ofB.id}`)).status, 404);
    const asB = { headers: { authorization: `Bearer ${KEY_B}` } };
    assert.is((await app.api(`/webhooks/${ofB.id}`, asB)).status, 200);
    assert.is((await app.api(`/webhooks/${ofA.id}`, asB)).status, 404);
  });
});

test('an auth function decides the account; answers and misses are cached; concurrent asks share one call', async () => {
  const asked: string[] = [];
  const portal = await createPortal({
    auth: async (token) => {
      asked.push(token);
      await new Promise((resolve) => setTimeout(resolve, 20));
      return token === 'fn-key' ? { accountId: 'acct_fn' } : null;
    },
  });
  const running = await listen(portal.handler);
  const get = (key: string) => fetch(`${running.url}/v1/files`, { headers: { authorization: `Bearer ${key}` } });
  try {
    const first = await Promise.all([get('fn-key'), get('fn-key'), get('fn-key')]);
    assert.equal(
      first.map((res) => res.status),
      [200, 200, 200],
    );
    assert.equal(asked, ['fn-key']);
    assert.is((await get('fn-key')).status, 200);
    assert.is((await get('other')).status, 401);
    assert.is((await get('other')).status, 401);
    assert.equal(asked, ['fn-key', 'other']);
    const webhook = await portal.webhooks.create('acct_fn', { type: 'customer-created', url: 'https://r.example/h' });
    const res = await fetch(`${running.url}/v1/webhooks/${webhook.id}`, {
      headers: { authorization: 'Bearer fn-key' },
    });
    assert.is(res.status, 200);
  } finally {
    await running.close();
    await portal.close();
  }
});

test('an auth function that throws or answers a bad shape is a 500, and is asked again next time', async () => {
  let calls = 0;
  const portal = await createPortal({
    auth: (async () => {
      calls++;
      if (calls === 1) throw new Error('identity service down');
      return { accountId: 42 };
    }) as never,
  });
  const running = await listen(portal.handler);
  const get = () => fetch(`${running.url}/v1/files`, { headers: { authorization: 'Bearer k' } });
  try {
    assert.is((await get()).status, 500);
    assert.is((await get()).status, 500);
    assert.is(calls, 2);
  } finally {
    await running.close();
    await portal.close();
  }
});

test('without auth, PORTAL_API_KEYS is used; without either, createPortal refuses to start', async () => {
  const saved = process.env.PORTAL_API_KEYS;
  try {
    process.env.PORTAL_API_KEYS = ' env-key-one-0123456789 , env-key-two-0123456789,';
    const portal = await createPortal();
    const running = await listen(portal.handler);
    for (const key of ['env-key-one-0123456789', 'env-key-two-0123456789']) {
      assert.is((await fetch(`${running.url}/v1/files`, { headers: { authorization: `Bearer ${key}` } })).status, 200);
    }
    assert.is((await fetch(`${running.url}/v1/files`, { headers: { authorization: 'Bearer env' } })).status, 401);
    await running.close();
    await portal.close();
    delete process.env.PORTAL_API_KEYS;
    await rejects(() => createPortal(), /PORTAL_API_KEYS/);
    await rejects(() => createPortal({ auth: { apiKeys: [] } }), /at least one key/);
    await rejects(() => createPortal({ auth: { apiKeys: ['has space in the key'] } }), /token68/);
  } finally {
    if (saved === undefined) delete process.env.PORTAL_API_KEYS;
    else process.env.PORTAL_API_KEYS = saved;
  }
});

test("API keys are checked at start: a string of at least 16 characters, with the library's own message", async () => {
  // What `apiKeys: [process.env.API_KEY!]` gives when the variable is unset.
  await rejects(
    () => createPortal({ auth: { apiKeys: [undefined as unknown as string] } }),
    /the key is undefined, not a string/,
  );
  await rejects(
    () => createPortal({ auth: { apiKeys: [42 as unknown as string] } }),
    /the key is number, not a string/,
  );
  await rejects(
    () => createPortal({ auth: { apiKeys: ['long-enough-key-0123', 'short-key'] } }),
    /key 2 of 2 has 9 characters; an API key needs at least 16/,
  );
  await rejects(() => createPortal({ auth: { apiKeys: { 'short-key': 'acct_a' } } }), /at least 16/);
  await rejects(
    () => createPortal({ auth: { apiKeys: undefined as never } }),
    /auth\.apiKeys must be a list of keys or a map/,
  );
  const error = (await createPortal({ auth: { apiKeys: ['short-key'] } }).catch((caught: unknown) => caught)) as Error;
  assert.not.match(error.message, 'short-key', 'the message never quotes the key');
  const portal = await createPortal({ auth: { apiKeys: ['exactly-16-chars'] } });
  await portal.close();
});

test.run();
