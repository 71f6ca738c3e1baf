import type { RequestListener } from 'node:http';
import { test } from 'uvu';
import { createExpressApp } from '../../examples/express.js';
import { EMBEDDED_OPTIONS, exampleStartsWithoutKey, exerciseEmbeddedPortal } from '../helpers/embedding.js';
import { listen } from '../helpers/server.js';

test('examples/express.ts: uploads, downloads and the app\'s own routes through Express 5', async () => {
  const { app, portal } = await createExpressApp(EMBEDDED_OPTIONS);
  const running = await listen(app as unknown as RequestListener);
  try {
    await exerciseEmbeddedPortal(running.url, portal);
  } finally {
    await running.close();
    await portal.close();
  }
});

test('node dist/examples/express.js without PORTAL_API_KEYS prints a generated key and serves with it', async () => {
  await exampleStartsWithoutKey('express');
});

test.run();
