import type { RequestListener } from 'node:http';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createExpressApp, serveExpressApp } from '../../examples/express.js';
import { EMBEDDED_OPTIONS, exampleStartsWithoutKey, exerciseEmbeddedPortal } from '../helpers/embedding.js';
import { listen } from '../helpers/server.js';

test("examples/express.ts: uploads, downloads and the app's own routes through Express 5", async () => {
  const { app, portal } = await createExpressApp(EMBEDDED_OPTIONS);
  const running = await listen(app as unknown as RequestListener);
  try {
    await exerciseEmbeddedPortal(running.url, portal);
  } finally {
    await running.close();
    await portal.close();
  }
});

test('examples/express.ts: the server it listens on cuts off slow clients (headersTimeout, requestTimeout, keepAliveTimeout)', async () => {
  const { app, portal } = await createExpressApp(EMBEDDED_OPTIONS);
  const server = await serveExpressApp(app, 0, '127.0.0.1');
  try {
    assert.equal([server.headersTimeout, server.requestTimeout, server.keepAliveTimeout], [10_000, 60_000, 5_000]);
    const { port } = server.address() as { port: number };
    assert.is((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await portal.close();
  }
});

test('node dist/examples/express.js without PORTAL_API_KEYS prints a generated key and serves with it', async () => {
  await exampleStartsWithoutKey('express');
});

test.run();
