import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SIGNER, validFormData } from '../helpers/agreements.js';
import { openBackends } from '../helpers/backends.js';
import { withPortal, type TestPortal } from '../helpers/server.js';
import { NEVER } from '../helpers/webhooks.js';

/**
 * NUL and the other control characters (C0, DEL, C1) in every text input: refused with 400 on every
 * adapter, and in a path id answered as that route answers an unknown or malformed id. A `\u0000`
 * must never reach PostgreSQL, whose text type cannot hold it (it answered 500 with a stack).
 */
const { list: backends, close } = await openBackends('control-characters');

/** NUL, the other C0 characters a client can send, DEL and a C1 character. */
const CONTROLS = ['\u0000', '\u0001', '\t', '\n', '\r', '\u001b', '\u007f', '\u0085', '\u009f'];

/** What every adapter must answer: each request with its status and error text, in order. */
async function answers(app: TestPortal, captured: string[]): Promise<string[]> {
  const out: string[] = [];
  const note = async (what: string, response: Promise<Response>) => {
    const r = await response;
    const text = await r.text();
    out.push(`${what} → ${r.status}`);
    if (r.status >= 500) captured.push(`${what}: ${text}`);
  };
  const webhook = await app.portal.webhooks.create('acct_a', {
    type: 'customer-created',
    url: 'https://hooks.example.com/a',
  });
  for (const c of CONTROLS) {
    const id = encodeURIComponent(`wbh_a${c}b`);
    const shown = JSON.stringify(c);
    await note(`GET /webhooks/${shown}`, app.api(`/webhooks/${id}`));
    await note(`DELETE /webhooks/${shown}`, app.api(`/webhooks/${id}`, { method: 'DELETE' }));
    await note(`GET /webhooks/${shown}/deliveries`, app.api(`/webhooks/${id}/deliveries`));
    await note(
      `POST redeliver ${shown} in delivery id`,
      app.api(`/webhooks/${webhook.id}/deliveries/${encodeURIComponent(`whd_a${c}`)}/redeliver`, { method: 'POST' }),
    );
    await note(
      `POST redeliver ${shown} in webhook id`,
      app.api(`/webhooks/${id}/deliveries/whd_abc/redeliver`, { method: 'POST' }),
    );
    await note(`GET /agreements/${shown}`, app.api(`/agreements/${encodeURIComponent(`agr_a${c}`)}`));
    await note(
      `GET ticket download link ${shown}`,
      app.api(`/tickets/tck_1/message/tcm_1/attachment/${encodeURIComponent(`tca_a${c}`)}/download`),
    );
    await note(`GET /files?directoryId=${shown}`, app.api(`/files?directoryId=${encodeURIComponent(`fsd_a${c}`)}`));
    const post = (body: unknown) =>
      app.api('/webhooks', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    await note(
      `POST /webhooks url with ${shown}`,
      post({ type: 'customer-created', url: `https://hooks.example.com/a${c}b` }),
    );
    await note(
      `POST /webhooks url host with ${shown}`,
      post({ type: 'customer-created', url: `https://hooks.exa${c}mple.com/` }),
    );
    for (const field of ['name', 'signerName'] as const) {
      const form = validFormData();
      form.set(field, `Lease${c}2026`);
      await note(`POST /agreements ${field} with ${shown}`, app.api('/agreements', { method: 'POST', body: form }));
    }
    for (const field of ['firstName', 'lastName', 'email'] as const) {
      const form = validFormData({
        signers: [{ ...SIGNER, [field]: field === 'email' ? `bo${c}@example.com` : `Bo${c}` }],
      });
      await note(
        `POST /agreements signer ${field} with ${shown}`,
        app.api('/agreements', { method: 'POST', body: form }),
      );
    }
  }
  return out;
}

/** The same inputs through the in-process API: a 400 PortalError each, never a database error. */
async function inProcess(app: TestPortal): Promise<string[]> {
  const out: string[] = [];
  const { portal } = app;
  const outcome = async (what: string, run: () => Promise<unknown>) => {
    try {
      const value = await run();
      out.push(`${what} → ${value === null ? 'null' : value === false ? 'false' : 'ok'}`);
    } catch (error) {
      const status = (error as { status?: number }).status;
      out.push(`${what} → ${status ?? `thrown ${(error as Error).message}`}`);
    }
  };
  for (const c of ['\u0000', '\n', '\u0085']) {
    const shown = JSON.stringify(c);
    await outcome(`files.createDirectory name ${shown}`, () =>
      portal.files.createDirectory('acct_a', { name: `dir${c}` }),
    );
    await outcome(`files.put name ${shown}`, () =>
      portal.files.put('acct_a', { name: `f${c}.txt`, mime: 'text/plain', body: Buffer.from('x') }),
    );
    await outcome(`tickets.putAttachment name ${shown}`, () =>
      portal.tickets.putAttachment('acct_a', { name: `a${c}.pdf`, mime: 'application/pdf', body: Buffer.from('x') }),
    );
    await outcome(`files.get ${shown}`, () => portal.files.get('acct_a', `fsf_a${c}`));
    await outcome(`files.delete ${shown}`, () => portal.files.delete('acct_a', `fsf_a${c}`));
    await outcome(`tickets.getAttachment ${shown}`, () => portal.tickets.getAttachment('acct_a', `tca_a${c}`));
    await outcome(`tickets.deleteAttachment ${shown}`, () => portal.tickets.deleteAttachment('acct_a', `tca_a${c}`));
    await outcome(`agreements.get ${shown}`, () => portal.agreements.get('acct_a', `agr_a${c}`));
    await outcome(`webhooks.get ${shown}`, () => portal.webhooks.get('acct_a', `wbh_a${c}`));
    await outcome(`webhooks.list account ${shown}`, () => portal.webhooks.list(`acct${c}`));
    await outcome(`webhooks.create account ${shown}`, () =>
      portal.webhooks.create(`acct${c}`, { type: 'customer-created', url: 'https://hooks.example.com/' }),
    );
    await outcome(`events.publish account ${shown}`, () => portal.events.publish(`acct${c}`, 'customer-created', {}));
  }
  return out;
}

const results = new Map<string, { http: string[]; inProcess: string[] }>();
const test = suite('control characters');

for (const backend of backends) {
  test(`${backend.name}: no 5xx, no control character stored, and a 400 or 404 for each`, async () => {
    const { options, cleanup } = await backend.options();
    const errors: string[] = [];
    const logger = { debug() {}, info() {}, warn() {}, error: (object: object) => errors.push(JSON.stringify(object)) };
    try {
      await withPortal({ ...options, logger, webhooks: { tick: NEVER } }, async (app) => {
        const captured: string[] = [];
        const http = await answers(app, captured);
        const direct = await inProcess(app);
        assert.equal(captured, [], 'no 5xx');
        assert.equal(errors, [], 'no error logged');
        for (const line of http) assert.match(line, / → (400|404)$/, line);
        for (const line of direct) assert.match(line, / → (400|null|false)$/, line);
        // Nothing with a control character was stored.
        const webhooks = await app.portal.webhooks.list('acct_a');
        assert.is(webhooks.length, 1, 'only the webhook made by the test');
        assert.equal(await app.portal.files.list('acct_a'), []);
        results.set(backend.name, { http, inProcess: direct });
      });
    } finally {
      await cleanup();
    }
  });
}

test('every adapter answers every request alike', () => {
  const [first, ...rest] = [...results.entries()];
  assert.ok(first !== undefined && rest.length >= 2, 'memory, fs and PGlite at least');
  for (const [name, result] of rest) {
    assert.equal(result.http, first![1].http, `${name} against ${first![0]} over HTTP`);
    assert.equal(result.inProcess, first![1].inProcess, `${name} against ${first![0]} in process`);
  }
  // The route's own answer to a malformed id: 400 where the route table lists one (DESIGN §5), else
  // 404, as for an id that names nothing (docs/http-api.md, "Malformed ids").
  const http = first![1].http;
  const status = (prefix: string) => http.filter((line) => line.startsWith(prefix)).map((line) => line.split(' → ')[1]);
  assert.ok(status('GET /webhooks/').every((s) => s === '404'));
  assert.ok(status('GET /agreements/').every((s) => s === '404'));
  assert.ok(status('GET ticket download link').every((s) => s === '400'));
  assert.ok(status('POST /webhooks url').every((s) => s === '400'));
  assert.ok(status('POST /agreements').every((s) => s === '400'));
});

test.after(async () => {
  await close();
});

test.run();
