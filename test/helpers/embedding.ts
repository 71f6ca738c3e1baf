import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as assert from 'uvu/assert';
import type { Portal, PortalOptions } from '../../src/index.js';
import { documentBytes, sha256, validFormData } from './agreements.js';
import { SIGNING_KEY_1, linkPath } from './download.js';
import { startNode } from './process.js';
import { KEY_A, KEY_B } from './server.js';

/** What the embedding examples are started with in their tests. */
export const EMBEDDED_OPTIONS: PortalOptions = {
  auth: { apiKeys: { [KEY_A]: 'acct_a', [KEY_B]: 'acct_b' } },
  signingKeys: [SIGNING_KEY_1],
  webhooks: { worker: false },
};

const auth = { authorization: `Bearer ${KEY_A}` };

/**
 * Drives an app that embeds the portal, at `url` (no trailing slash): an agreement upload, a
 * download through a link, the app's own `GET /health`, and a path that belongs to neither.
 */
export async function exerciseEmbeddedPortal(url: string, portal: Portal): Promise<void> {
  // An agreement upload: multipart, streamed through the framework untouched.
  const document = documentBytes(1024 * 1024 + 17, 3);
  const form = validFormData({
    documents: [
      { name: 'lease.pdf', bytes: document },
      { name: 'annex.pdf', bytes: documentBytes(10, 4) },
    ],
  });
  const created = await fetch(`${url}/v1/agreements`, { method: 'POST', headers: auth, body: form });
  const agreement: any = await created.json();
  assert.is(created.status, 201, JSON.stringify(agreement));
  assert.is(created.headers.get('location'), `${url}/v1/agreements/${agreement.id}`);
  assert.is(agreement.documents[0].fileSize, document.length);
  assert.is(agreement.documents[0].fileHash, sha256(document), 'every byte arrived, in order');
  const fetched = await fetch(`${url}/v1/agreements/${agreement.id}`, { headers: auth });
  assert.equal(await fetched.json(), agreement);
  const refused = await fetch(`${url}/v1/agreements`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ name: 'x' }),
  });
  assert.is(refused.status, 415, 'the portal, not the framework, judges the body');

  // A JSON body reaches the portal unread too (a framework's JSON parser would have drained it).
  const hook = await fetch(`${url}/v1/webhooks`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'customer-created', url: 'https://receiver.example/hook' }),
  });
  assert.is(hook.status, 201, await hook.clone().text());
  assert.is(((await hook.json()) as any).url, 'https://receiver.example/hook');

  // A download through a signed link.
  const bytes = documentBytes(300_000, 9);
  const attachment = await portal.tickets.putAttachment('acct_a', {
    name: 'Résumé.pdf',
    mime: 'application/pdf',
    body: bytes,
  });
  const linkRes = await fetch(`${url}/v1${linkPath(attachment)}`, { headers: auth });
  const { link }: any = await linkRes.json();
  assert.is(linkRes.status, 200);
  assert.ok(link.startsWith(`${url}/v1/downloads/`), link);
  const download = await fetch(link);
  assert.is(download.status, 200);
  assert.is(download.headers.get('content-type'), 'application/pdf');
  assert.match(download.headers.get('content-disposition') ?? '', /filename\*=UTF-8''R%C3%A9sum%C3%A9\.pdf/);
  assert.ok(Buffer.from(await download.arrayBuffer()).equals(bytes), 'the downloaded bytes are the stored ones');
  const part = await fetch(link, { headers: { range: 'bytes=10-19' } });
  assert.is(part.status, 206);
  assert.ok(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(10, 20)));

  // The app's own route, and what belongs to neither.
  const health = await fetch(`${url}/health`);
  assert.is(health.status, 200);
  assert.equal(await health.json(), { ok: true });
  assert.is(health.headers.get('x-request-id'), null, 'the portal did not answer it');
  const outside = await fetch(`${url}/elsewhere`);
  assert.is(outside.status, 404);
  assert.is(outside.headers.get('x-request-id'), null, "a path outside /v1 is the app's to answer");
  const inside = await fetch(`${url}/v1/elsewhere`, { headers: auth });
  assert.is(inside.status, 404);
  assert.ok(inside.headers.get('x-request-id'), "a path under /v1 is the portal's");
  assert.match(((await inside.json()) as any).message, /No route matches GET \/v1\/elsewhere/);
  const anonymous = await fetch(`${url}/v1/files`);
  assert.is(anonymous.status, 401);
  assert.is(anonymous.headers.get('www-authenticate'), 'Bearer realm="customer-portal"');
}

/**
 * Starts an example app (`dist/examples/<name>.js`) as a user would, with no `PORTAL_API_KEYS`: it
 * prints a generated key and serves with it.
 */
export async function exampleStartsWithoutKey(name: 'express' | 'fastify'): Promise<void> {
  const script = path.resolve(fileURLToPath(import.meta.url), `../../../examples/${name}.js`);
  const app = startNode(script, { PORT: '0', HOST: '127.0.0.1', PORTAL_API_KEYS: '' });
  try {
    const key = (await app.waitFor((line) => line.startsWith('API key: '))).slice('API key: '.length);
    assert.match(key, /^[A-Za-z0-9_-]{43}$/);
    const banner = await app.waitFor((line) => / app on http:\/\//.test(line));
    const url = /(http:\/\/[^ ]+)/.exec(banner)![1]!;
    assert.is((await fetch(`${url}/v1/files`, { headers: { authorization: `Bearer ${key}` } })).status, 200);
    assert.is(
      (await fetch(`${url}/v1/files`, { headers: { authorization: 'Bearer some-other-key-0123' } })).status,
      401,
    );
  } finally {
    app.child.kill('SIGTERM');
    await app.exited;
  }
}
