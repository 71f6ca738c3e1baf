import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createPortal, type Logger } from '../../src/index.js';
import { KEY_A, json, listen, rawRequest, rejects, startPortal, withPortal } from '../helpers/server.js';
import { waitFor } from '../helpers/webhooks.js';

const JSON_TYPE = 'application/json; charset=utf-8';

test('an unknown path under the base path is a 404 with a JSON message', async () => {
  await withPortal(async (app) => {
    const res = await app.api('/nothing-here');
    assert.is(res.status, 404);
    assert.is(res.headers.get('content-type'), JSON_TYPE);
    const body = await json(res);
    assert.equal(Object.keys(body), ['message']);
    assert.match(body.message, 'GET /v1/nothing-here');
  });
});

test('a path outside the base path is a 404 without next, and calls next with it', async () => {
  const portal = await createPortal({ auth: { apiKeys: [KEY_A] } });
  let fellThrough = 0;
  const withNext = await listen((req, res) =>
    portal.handler(req, res, () => {
      fellThrough++;
      res.writeHead(299).end('app route');
    }),
  );
  const withoutNext = await listen(portal.handler);
  try {
    for (const path of ['/other', '/v10/webhooks', '/v1x', '/']) {
      const res = await fetch(withNext.url + path);
      assert.is(res.status, 299, path);
      assert.is(await res.text(), 'app route');
      assert.is((await fetch(withoutNext.url + path)).status, 404, path);
    }
    assert.is(fellThrough, 4);
    const inside = await fetch(withNext.url + '/v1/files', { headers: { authorization: `Bearer ${KEY_A}` } });
    assert.is(inside.status, 200);
    assert.is(fellThrough, 4);
  } finally {
    await withNext.close();
    await withoutNext.close();
    await portal.close();
  }
});

test('a known path with the wrong method is a 405 listing the allowed methods', async () => {
  await withPortal(async (app) => {
    const res = await app.api('/webhooks/wbh_abc', { method: 'PUT' });
    assert.is(res.status, 405);
    assert.is(res.headers.get('allow'), 'GET, HEAD, PATCH, DELETE');
    assert.match((await json(res)).message, 'PUT');
    const files = await app.api('/files', { method: 'PUT' });
    assert.is(files.status, 405);
    assert.is(files.headers.get('allow'), 'GET, HEAD, POST');
  });
});

test('every response carries nosniff, no-store and a request id; a valid client id is echoed', async () => {
  await withPortal(async (app) => {
    for (const path of ['/files', '/nowhere', '/webhooks/wbh_missing']) {
      const res = await app.api(path);
      assert.is(res.headers.get('x-content-type-options'), 'nosniff', path);
      assert.is(res.headers.get('cache-control'), 'no-store', path);
      assert.match(res.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/, path);
    }
    const echoed = await app.api('/files', { headers: { 'x-request-id': 'trace.01:AB-cd_9' } });
    assert.is(echoed.headers.get('x-request-id'), 'trace.01:AB-cd_9');
    for (const bad of ['has space', 'x'.repeat(201), 'semi;colon']) {
      const res = await app.api('/files', { headers: { 'x-request-id': bad } });
      assert.is.not(res.headers.get('x-request-id'), bad);
      assert.match(res.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
    }
    const limit = 'a'.repeat(200);
    assert.is((await app.api('/files', { headers: { 'x-request-id': limit } })).headers.get('x-request-id'), limit);
  });
});

test('an unexpected fault is a plain 500, logged with the request id and no stack in the body', async () => {
  const logged: { object: Record<string, unknown>; message?: string }[] = [];
  const logger: Logger = {
    debug() {},
    info() {},
    warn() {},
    error: (object, message) => logged.push({ object: object as Record<string, unknown>, message }),
  };
  const app = await startPortal({ logger });
  app.portal.webhooks.get = async () => {
    throw new Error('disk on fire');
  };
  const storageFailing = await startPortal({
    logger,
    storage: {
      ...(await import('../../adapters/memory/index.js')).memoryStorage(),
      getWebhook: async () => {
        throw new Error('disk on fire');
      },
    },
  });
  try {
    const res = await storageFailing.api('/webhooks/wbh_x', { headers: { 'x-request-id': 'req-500' } });
    assert.is(res.status, 500);
    const text = await res.text();
    assert.equal(JSON.parse(text), { message: 'Internal error' });
    assert.not.match(text, 'disk on fire');
    const entry = logged.find((line) => line.object.requestId === 'req-500');
    assert.ok(entry, 'the fault is logged with the request id');
    assert.match(JSON.stringify(entry!.object.err), 'disk on fire');
  } finally {
    await app.close();
    await storageFailing.close();
  }
});

test('with a logger, one line per request names route, status and account but never the key', async () => {
  const lines: Record<string, unknown>[] = [];
  const logger: Logger = {
    debug() {},
    info: (object) => lines.push(object as Record<string, unknown>),
    warn() {},
    error() {},
  };
  await withPortal({ logger }, async (app) => {
    await (await app.api('/files', { headers: { 'x-request-id': 'log-1' } })).arrayBuffer();
    await (
      await app.api('/files', { headers: { 'x-request-id': 'log-2', authorization: 'Bearer wrong-key' } })
    ).arrayBuffer();
    // A request's line is written once its response has closed, which may come after the client has the answer.
    await waitFor(
      () => ['log-1', 'log-2'].every((id) => lines.some((line) => line.requestId === id)),
      'both request lines',
    );
    const ok = lines.find((line) => line.requestId === 'log-1');
    assert.equal(
      { method: ok?.method, route: ok?.route, status: ok?.status, accountId: ok?.accountId },
      { method: 'GET', route: 'GET /files', status: 200, accountId: 'acct_a' },
    );
    assert.type(ok?.durationMs, 'number');
    assert.is(lines.find((line) => line.requestId === 'log-2')?.status, 401);
    assert.not.match(JSON.stringify(lines), KEY_A);
    assert.not.match(JSON.stringify(lines), 'wrong-key');
  });
});

test('a path that is not valid percent-encoding is a 400', async () => {
  await withPortal(async (app) => {
    const res = await rawRequest(`${app.url}/v1/webhooks/%E0%A4%A`, { headers: { authorization: `Bearer ${KEY_A}` } });
    assert.is(res.status, 400);
    assert.match(JSON.parse(res.body).message, 'percent-encoding');
  });
});

test('HEAD of a JSON route answers the headers of GET and no body', async () => {
  await withPortal(async (app) => {
    const get = await app.api('/files');
    const head = await rawRequest(`${app.url}/v1/files`, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${KEY_A}` },
    });
    assert.is(head.status, 200);
    assert.is(head.body, '');
    assert.is(head.headers['content-length'], get.headers.get('content-length'));
  });
});

test('basePath and publicUrl are normalized; a bad publicUrl is refused at creation', async () => {
  const portal = await createPortal({ auth: { apiKeys: [KEY_A] }, basePath: 'api/v1/' });
  const running = await listen(portal.handler);
  try {
    const res = await fetch(`${running.url}/api/v1/files`, { headers: { authorization: `Bearer ${KEY_A}` } });
    assert.is(res.status, 200);
    assert.is((await fetch(`${running.url}/v1/files`)).status, 404);
  } finally {
    await running.close();
    await portal.close();
  }
  await rejects(() => createPortal({ auth: { apiKeys: [KEY_A] }, publicUrl: 'not a url' }), /publicUrl/);
  await rejects(() => createPortal({ auth: { apiKeys: [KEY_A] }, publicUrl: 'ftp://x.example/v1' }), /publicUrl/);
});

test('an unknown query parameter is a 400 naming it and the ones the route takes; nothing is read or changed', async () => {
  await withPortal(async (app) => {
    const directory = await app.portal.files.createDirectory('acct_a', { name: 'Contracts' });
    await app.portal.files.put('acct_a', { name: 'a.txt', mime: 'text/plain', directoryId: directory.id, body: 'a' });
    const cases: [string, RequestInit, string][] = [
      [`/files?dir=${directory.id}`, {}, 'Unknown query parameter "dir": this route takes directoryId.'],
      [
        `/files?directoryId=${directory.id}&sort=name`,
        {},
        'Unknown query parameter "sort": this route takes directoryId.',
      ],
      ['/agreements?limit=5&curser=x', {}, 'Unknown query parameter "curser": this route takes limit, cursor.'],
      ['/webhooks/wbh_nothere?verbose=1', {}, 'Unknown query parameter "verbose": this route takes none.'],
      [
        '/directories?directoryId=x',
        { method: 'POST', body: JSON.stringify({ name: 'Other' }) },
        'Unknown query parameter "directoryId": this route takes none.',
      ],
    ];
    for (const [path, init, message] of cases) {
      const res = await app.api(path, init);
      assert.is(res.status, 400, path);
      assert.equal(await json(res), { message }, path);
    }
    assert.equal(
      (await app.portal.files.list('acct_a')).map((entry) => entry.name),
      ['Contracts'],
      'no directory was made',
    );
    // The parameters a route takes still work, and an unauthenticated request is a 401 first.
    assert.is((await app.api(`/files?directoryId=${directory.id}`)).status, 200);
    assert.is((await app.api('/files?dir=x', { headers: { authorization: '' } })).status, 401);
  });
});

test.run();
