import { execFile } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { promisify } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import type { Logger } from '../../src/index.js';
import { MAX_DOCUMENT_BYTES } from '../../src/domain/inputs.js';
import { PNG_SIGNATURE, dataUrl, documentBytes, pngBytes, validFormData } from '../helpers/agreements.js';
import { SIGNING_KEY_1, linkPath, withParam } from '../helpers/download.js';
import { KEY_A, startPortal } from '../helpers/server.js';
import { NEVER, waitFor } from '../helpers/webhooks.js';

/** A pino-like logger that keeps every line as the JSON a real one would print. */
function capturingLogger() {
  const lines: string[] = [];
  const entries: Record<string, any>[] = [];
  const at = (level: string) => (object: object, msg?: string) => {
    const entry = { level, ...object, msg };
    entries.push(entry);
    lines.push(JSON.stringify(entry));
  };
  const logger: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  return { logger, lines, entries };
}

const WRONG_KEY = 'wrong-key-that-must-not-be-logged-7f3a';

test('one line per request and per webhook attempt, and never a key, a secret or a signature', async () => {
  const { logger, lines, entries } = capturingLogger();
  let failCalls = false;
  const transport = memoryTransport({ respond: () => (failCalls ? { statusCode: 503 } : 200) });
  const app = await startPortal({ logger, transport, signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } });
  const requestIds: string[] = [];
  const secrets: string[] = [KEY_A, WRONG_KEY, SIGNING_KEY_1];

  /** A request through the API (or to an absolute URL), its request id noted. */
  async function request(path: string, init: RequestInit = {}): Promise<Response> {
    const res = path.startsWith('http') ? await fetch(path, init) : await app.api(path, init);
    await res.arrayBuffer();
    requestIds.push(res.headers.get('x-request-id')!);
    return res;
  }

  try {
    // A webhook made over HTTP: its secret is in the answer, and must be nowhere in the log.
    const created = await app.api('/webhooks', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'customer-created', url: 'https://receiver.example/hook' }),
    });
    requestIds.push(created.headers.get('x-request-id')!);
    const hook: any = await created.json();
    assert.is(created.status, 201);
    secrets.push(hook.secret, hook.secret.slice('whsec_'.length));
    await request(`/webhooks/${hook.id}`);

    // Webhook attempts: one that succeeds, then one that fails and is retried by hand.
    await app.portal.events.publish('acct_a', 'customer-created', { customer: { id: 'cus_1' } });
    await app.portal.worker!.tick();
    failCalls = true;
    await app.portal.events.publish('acct_a', 'customer-created', { customer: { id: 'cus_2' } });
    await app.portal.worker!.tick();
    const [failed] = (await app.portal.webhooks.deliveries('acct_a', hook.id))!;
    await request(`/webhooks/${hook.id}/deliveries/${failed!.id}/redeliver`, { method: 'POST' });
    await app.portal.worker!.tick();
    assert.is(transport.calls.length, 3);
    for (const call of transport.calls) {
      const signature = call.headers['webhook-signature']!;
      secrets.push(signature, signature.slice('v1,'.length));
    }

    // Agreements: the signature images sent, and one signed later.
    const signerSignature = dataUrl('image/png', pngBytes(300));
    const form = validFormData();
    form.set('signerSignatureData', signerSignature);
    const agreementRes = await app.api('/agreements', { method: 'POST', body: form });
    requestIds.push(agreementRes.headers.get('x-request-id')!);
    const agreement: any = await agreementRes.json();
    assert.is(agreementRes.status, 201);
    await app.portal.agreements.sign('acct_a', agreement.id, agreement.signers[0].id, { signature: PNG_SIGNATURE });
    secrets.push(signerSignature.split(',')[1]!, PNG_SIGNATURE.split(',')[1]!);
    const tooBig = validFormData({ documents: [{ name: 'big.bin', bytes: documentBytes(MAX_DOCUMENT_BYTES + 1) }] });
    assert.is((await request('/agreements', { method: 'POST', body: tooBig })).status, 413);

    // A signed link, used, altered and asked for with a wrong key.
    const attachment = await app.portal.tickets.putAttachment('acct_a', {
      name: 'a.pdf',
      mime: 'application/pdf',
      body: 'bytes',
    });
    const linkRes = await app.api(linkPath(attachment));
    requestIds.push(linkRes.headers.get('x-request-id')!);
    const { link }: any = await linkRes.json();
    const linkSignature = new URL(link).searchParams.get('signature')!;
    secrets.push(linkSignature);
    assert.is((await request(link)).status, 200);
    assert.is((await request(withParam(link, 'expires', '9999999999'))).status, 403);
    assert.is((await request(link, { method: 'HEAD' })).status, 200);

    // Refusals: a wrong key, a malformed header, no route (with a signature in its query), a wrong method.
    assert.is((await request('/files', { headers: { authorization: `Bearer ${WRONG_KEY}` } })).status, 401);
    assert.is((await request('/files', { headers: { authorization: `Basic ${WRONG_KEY}` } })).status, 401);
    assert.is((await request(`/nowhere?signature=${linkSignature}`)).status, 404);
    assert.is((await request('/files', { method: 'DELETE' })).status, 405);

    // Every request logs once its response has gone; wait for the last ones.
    await waitFor(
      () => entries.filter((entry) => entry.msg === 'request').length >= requestIds.length,
      'a line for every request',
    );
    const requestLines = entries.filter((entry) => entry.msg === 'request');
    assert.is(requestLines.length, requestIds.length, 'one line per request');
    assert.equal(
      requestLines.map((entry) => entry.requestId).sort(),
      [...requestIds].sort(),
      'each line names its request',
    );
    for (const entry of requestLines) {
      assert.type(entry.method, 'string');
      assert.type(entry.route, 'string');
      assert.type(entry.status, 'number');
      assert.type(entry.durationMs, 'number');
      assert.ok(
        !entry.route.includes('?') && !entry.route.includes('wbh_'),
        `the route is the pattern, not the URL: ${entry.route}`,
      );
    }
    const upload = requestLines.find((entry) => entry.route === 'POST /agreements' && entry.status === 201);
    assert.is(upload?.accountId, 'acct_a', 'an authenticated request names its account');
    assert.ok(requestLines.some((entry) => entry.route === 'GET /downloads/:id' && entry.status === 403));

    const attemptLines = entries.filter((entry) => entry.msg === 'webhook attempt');
    assert.is(attemptLines.length, transport.calls.length, 'one line per webhook attempt');
    assert.equal(
      attemptLines.map((entry) => entry.statusCode),
      [200, 503, 503],
    );
    for (const entry of attemptLines) {
      assert.ok(entry.deliveryId.startsWith('whd_') && entry.webhookId === hook.id);
      assert.type(entry.durationMs, 'number');
    }

    const log = lines.join('\n');
    for (const secret of secrets) {
      assert.ok(secret.length >= 12, `a secret long enough to search for: ${secret}`);
      assert.not.ok(log.includes(secret), `the log holds a secret: ${secret.slice(0, 12)}…`);
    }
  } finally {
    await app.close();
  }
});

test('an upload the client cuts off is logged once, with its request id, and stores nothing', async () => {
  const { logger, entries } = capturingLogger();
  const app = await startPortal({ logger, signingKeys: [SIGNING_KEY_1], webhooks: { worker: false } });
  try {
    const { port } = new URL(app.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    const boundary = 'cut-off-boundary';
    socket.write(
      [
        'POST /v1/files HTTP/1.1',
        'Host: 127.0.0.1',
        `Authorization: Bearer ${KEY_A}`,
        'X-Request-Id: cut-upload-1',
        `Content-Type: multipart/form-data; boundary=${boundary}`,
        'Content-Length: 1000000',
        '',
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="half.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
      ].join('\r\n') + 'x'.repeat(64 * 1024),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.destroy();
    const lines = () => entries.filter((entry) => entry.requestId === 'cut-upload-1');
    for (let i = 0; i < 100 && lines().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(
      lines().map(({ level, msg, route, bodyComplete }) => ({ level, msg, route, bodyComplete })),
      [{ level: 'warn', msg: 'request aborted by the client', route: 'POST /files', bodyComplete: false }],
    );
    assert.equal(((await (await app.api('/files')).json()) as { data: unknown[] }).data, [], 'nothing stored');
  } finally {
    await app.close();
  }
});

test('without a logger, a missing signingKeys is a process warning, given once', async () => {
  // In a process of its own: the warning is given once a process, and this one has made portals.
  const child = `
    const { createPortal } = await import(${JSON.stringify(new URL('../../src/index.js', import.meta.url).href)});
    const warnings = [];
    process.on('warning', (warning) => warnings.push({ code: warning.code, message: warning.message }));
    for (let i = 0; i < 2; i++) await (await createPortal({ auth: { apiKeys: ['a-key-of-the-child-0123'] }, webhooks: { worker: false } })).close();
    await new Promise((resolve) => setImmediate(resolve));
    console.log(JSON.stringify(warnings.filter((warning) => warning.code === 'CUSTOMER_PORTAL_CONFIG')));
  `;
  const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', child]);
  const ours = JSON.parse(stdout.trim().split('\n').at(-1)!) as { message: string }[];
  assert.is(ours.length, 1);
  assert.match(ours[0]!.message, /signingKeys is not set: download links and signing links .* stop working on restart/);
  assert.match(stderr, '[CUSTOMER_PORTAL_CONFIG] Warning: signingKeys is not set', 'printed by Node on stderr');
});

test.run();
