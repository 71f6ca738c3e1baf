import type { RequestListener } from 'node:http';
import express from 'express';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createFastifyApp } from '../../examples/fastify.js';
import { createPortal, type Portal, type PortalOptions } from '../../src/index.js';
import { SIGNING_KEY_1, linkPath } from '../helpers/download.js';
import { KEY_A, listen } from '../helpers/server.js';

const OPTIONS: PortalOptions = {
  auth: { apiKeys: { [KEY_A]: 'acct_a' } },
  signingKeys: [SIGNING_KEY_1],
  webhooks: { worker: false },
};
const auth = { authorization: `Bearer ${KEY_A}` };

/**
 * Against the API root `api` (the mount path included): the `Location` of a new webhook and a
 * download link both start with `expected`, and following each one works.
 */
async function absoluteUrlsFollowTheMount(api: string, expected: string, portal: Portal): Promise<void> {
  const created = await fetch(`${api}/webhooks`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'customer-created', url: 'https://hooks.example.com/in' }),
  });
  assert.is(created.status, 201);
  const { id } = (await created.json()) as { id: string };
  assert.is(created.headers.get('location'), `${expected}/webhooks/${id}`);
  assert.is(
    (await fetch(created.headers.get('location')!, { headers: auth })).status,
    200,
    'the Location can be followed',
  );

  const attachment = await portal.tickets.putAttachment('acct_a', {
    name: 'note.txt',
    mime: 'text/plain',
    body: 'mounted bytes',
  });
  const answer = await fetch(`${api}${linkPath(attachment)}`, { headers: auth });
  const { link } = (await answer.json()) as { link: string };
  assert.ok(link.startsWith(`${expected}/downloads/`), link);
  const download = await fetch(link);
  assert.is(download.status, 200, 'the link can be followed');
  assert.is(await download.text(), 'mounted bytes');
}

/** Runs `body` against an Express app that mounts a portal made with `options` under `/api`. */
async function withExpressUnderApi(
  options: PortalOptions,
  body: (url: string, portal: Portal) => Promise<void>,
): Promise<void> {
  const portal = await createPortal(options);
  const app = express();
  app.use('/api', portal.handler);
  const running = await listen(app as unknown as RequestListener);
  try {
    await body(running.url, portal);
  } finally {
    await running.close();
    await portal.close();
  }
}

test('Express, app.use("/api", portal.handler): Location headers and download links carry /api', () =>
  withExpressUnderApi(OPTIONS, (url, portal) => absoluteUrlsFollowTheMount(`${url}/api/v1`, `${url}/api/v1`, portal)));

test('Express under /api with publicUrl set: publicUrl wins', () =>
  withExpressUnderApi({ ...OPTIONS, publicUrl: 'https://portal.example.com/api/v1' }, async (url) => {
    const created = await fetch(`${url}/api/v1/webhooks`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'customer-created', url: 'https://hooks.example.com/in' }),
    });
    assert.match(created.headers.get('location')!, /^https:\/\/portal\.example\.com\/api\/v1\/webhooks\/wbh_/);
  }));

test('Fastify (examples/fastify.ts) with basePath "/api/v1": Location headers and download links carry /api', async () => {
  const { app, portal } = await createFastifyApp({ ...OPTIONS, basePath: '/api/v1' });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    await absoluteUrlsFollowTheMount(`${url}/api/v1`, `${url}/api/v1`, portal);
  } finally {
    await app.close();
  }
});

test.run();
