import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createFastifyApp } from '../../examples/fastify.js';
import { EMBEDDED_OPTIONS, exampleStartsWithoutKey, exerciseEmbeddedPortal } from '../helpers/embedding.js';

test("examples/fastify.ts: uploads, downloads and the app's own routes through Fastify 5", async () => {
  const { app, portal } = await createFastifyApp(EMBEDDED_OPTIONS);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    await exerciseEmbeddedPortal(url, portal);
    const root = await fetch(`${url}/v1`);
    assert.is(root.status, 404);
    assert.ok(root.headers.get('x-request-id'), '/v1 itself reaches the portal too');
    const head = await fetch(`${url}/v1/files`, {
      method: 'HEAD',
      headers: { authorization: 'Bearer key-of-account-a' },
    });
    assert.is(head.status, 200, 'HEAD reaches the portal');
  } finally {
    await app.close();
  }
});

test('examples/fastify.ts: its server cuts off slow clients (headersTimeout, requestTimeout, keepAliveTimeout)', async () => {
  const { app } = await createFastifyApp(EMBEDDED_OPTIONS);
  try {
    await app.ready();
    assert.equal(
      [app.server.headersTimeout, app.server.requestTimeout, app.server.keepAliveTimeout],
      [10_000, 60_000, 5_000],
    );
  } finally {
    await app.close();
  }
});

test('node dist/examples/fastify.js without PORTAL_API_KEYS prints a generated key and serves with it', async () => {
  await exampleStartsWithoutKey('fastify');
});

test.run();
