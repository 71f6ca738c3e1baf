import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { createPortal } from '../../src/index.js';
import { PNG_SIGNATURE, simplePdf, validFormData } from '../helpers/agreements.js';
import { makePki, pdfsig, pkiMissing } from '../helpers/pki.js';
import { logLine, startNode, type Started } from '../helpers/process.js';
import { startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/notifier.js';
import { startSmtpSink } from '../helpers/smtp-sink.js';

const STANDALONE_KEY = 'standalone-key-0123456789';
const script = path.resolve(fileURLToPath(import.meta.url), '../../../examples/standalone.js');

async function boot(env: Record<string, string>) {
  const server = startNode(script, { PORT: '0', HOST: '127.0.0.1', ...env });
  const listening = logLine(await server.waitFor((line) => logLine(line)?.msg === 'listening'));
  return { server, url: String(listening!.url) };
}

async function stop(server: Started) {
  server.child.kill('SIGTERM');
  return server.exited;
}

test('with no key configured it makes one, prints it, keeps it in the data directory, and serves with it', async () => {
  const root = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  // A data directory the server makes itself: 0700, whatever the umask.
  const dataDir = path.join(root, 'data');
  try {
    const first = await boot({ DATA_DIR: dataDir, PORTAL_API_KEYS: '' });
    const keyLine = await first.server.waitFor((line) => line.startsWith('API key: '));
    const key = keyLine.slice('API key: '.length);
    assert.match(key, /^[A-Za-z0-9_-]{43}$/);
    assert.is((await readFile(path.join(dataDir, 'api-key'), 'utf8')).trim(), key);
    assert.is((await stat(path.join(dataDir, 'api-key'))).mode & 0o777, 0o600);
    const ok = await fetch(`${first.url}/files`, {
      headers: { authorization: `Bearer ${key}`, 'x-request-id': 'standalone-1' },
    });
    assert.is(ok.status, 200);
    assert.is((await fetch(`${first.url}/files`)).status, 401);
    const logged = logLine(await first.server.waitFor((line) => logLine(line)?.requestId === 'standalone-1'));
    assert.equal(
      { level: logged!.level, method: logged!.method, route: logged!.route, status: logged!.status },
      { level: 'info', method: 'GET', route: 'GET /files', status: 200 },
    );
    assert.not.match(first.server.lines.filter((line) => !line.startsWith('API key: ')).join('\n'), key);
    const created = await fetch(`${first.url}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'customer-created', url: 'https://hooks.example.com/in' }),
    });
    assert.is(created.status, 201);
    // The customer portal page is on at /portal.
    const page = await fetch(first.url.replace(/\/v1$/, '/portal/'));
    assert.is(page.status, 200);
    assert.match(await page.text(), /<title>Customer portal<\/title>/);
    assert.is(await stop(first.server), 0);
    // Nothing in the data directory is readable by another local user: the record log holds every webhook secret.
    const mode = async (entry: string) => ((await stat(path.join(dataDir, entry))).mode & 0o777).toString(8);
    assert.is(await mode('.'), '700', 'the data directory');
    assert.is(await mode('blobs'), '700', 'the blob directory');
    for (const file of ['api-key', 'signing-key', 'records.log']) assert.is(await mode(file), '600', file);

    const second = await boot({ DATA_DIR: dataDir, PORTAL_API_KEYS: '' });
    assert.is(
      await second.server.waitFor((line) => line.startsWith('API key: ')),
      keyLine,
      'the same key on every start',
    );
    assert.is(await stop(second.server), 0);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('PORTAL_API_KEYS and PUBLIC_URL are honoured; no key is printed then', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  try {
    const { server, url } = await boot({
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: 'env-key-one-0123456789,env-key-two-0123456789',
    });
    for (const key of ['env-key-one-0123456789', 'env-key-two-0123456789']) {
      assert.is((await fetch(`${url}/files`, { headers: { authorization: `Bearer ${key}` } })).status, 200);
    }
    assert.not.ok(server.lines.some((line) => line.startsWith('API key:')));
    assert.is(await stop(server), 0);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test("TRUST_PROXY=1: the audit trail records X-Forwarded-For's last address; without it, the proxy's own", async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  try {
    for (const [env, ip] of [
      [{ TRUST_PROXY: '1' }, '203.0.113.7'],
      [{}, '127.0.0.1'],
    ] as const) {
      const { server, url } = await boot({ DATA_DIR: dataDir, PORTAL_API_KEYS: STANDALONE_KEY, ...env });
      const headers = { authorization: `Bearer ${STANDALONE_KEY}`, 'x-forwarded-for': '198.51.100.1, 203.0.113.7' };
      const created = await fetch(`${url}/agreements`, { method: 'POST', headers, body: validFormData() });
      assert.is(created.status, 201, await created.clone().text());
      const { id } = (await created.json()) as { id: string };
      const audit = (await (await fetch(`${url}/agreements/${id}/audit`, { headers })).json()) as {
        data: { ip: string }[];
      };
      assert.is(audit.data[0]!.ip, ip, JSON.stringify(env));
      assert.is(await stop(server), 0);
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('a SIGTERM with an idle keep-alive connection open stops promptly and cleanly', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  const { Agent } = await import('node:http');
  const agent = new Agent({ keepAlive: true });
  try {
    const { server, url } = await boot({ DATA_DIR: dataDir, PORTAL_API_KEYS: STANDALONE_KEY });
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      request(`${url}/files`, { agent, headers: { authorization: `Bearer ${STANDALONE_KEY}` } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      })
        .on('error', reject)
        .end();
    });
    assert.is(status, 200);
    const started = Date.now();
    server.child.kill('SIGTERM');
    assert.is(await server.exited, 0);
    assert.ok(Date.now() - started < 5_000, 'the idle socket does not hold the stop for the 10 s grace period');
    assert.ok(server.lines.some((line) => logLine(line)?.msg === 'stopped'));
  } finally {
    agent.destroy();
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('data survives a restart and a kill -9: webhooks, files, attachments, pending deliveries', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  const signingKey = 'standalone-signing-key-0123456789abcdef';
  try {
    const seed = await createPortal({
      storage: fsStorage({ dir: dataDir }),
      blobs: fsBlobs({ dir: path.join(dataDir, 'blobs') }),
      auth: { apiKeys: [STANDALONE_KEY] },
      signingKeys: [signingKey],
      webhooks: { worker: false },
    });
    const webhook = await seed.webhooks.create('default', {
      type: 'customer-created',
      url: 'https://hooks.invalid/in',
    });
    const directory = await seed.files.createDirectory('default', { name: 'Kept' });
    const file = await seed.files.put('default', {
      name: 'kept.txt',
      mime: 'text/plain',
      directoryId: directory.id,
      body: 'file bytes',
    });
    const attachment = await seed.tickets.putAttachment('default', {
      name: 'note.txt',
      mime: 'text/plain',
      body: 'attachment bytes',
    });
    await seed.events.publish('default', 'customer-created', { customer: { id: 'cus_1' } });
    await seed.close();

    const env = { DATA_DIR: dataDir, PORTAL_API_KEYS: STANDALONE_KEY, PORTAL_SIGNING_KEYS: signingKey };
    const auth = { headers: { authorization: `Bearer ${STANDALONE_KEY}` } };
    const check = async (url: string) => {
      assert.is((await fetch(`${url}/webhooks/${webhook.id}`, auth)).status, 200);
      const root = (await (await fetch(`${url}/files`, auth)).json()) as { data: { id: string }[] };
      assert.equal(
        root.data.map((entry) => entry.id),
        [directory.id],
      );
      const inner = (await (await fetch(`${url}/files?directoryId=${directory.id}`, auth)).json()) as {
        data: { id: string; size: number }[];
      };
      assert.equal(
        inner.data.map((entry) => [entry.id, entry.size]),
        [[file.id, 10]],
      );
      const linkPath = `/tickets/${attachment.ticketId}/message/${attachment.messageId}/attachment/${attachment.id}/download`;
      const { link } = (await (await fetch(`${url}${linkPath}`, auth)).json()) as { link: string };
      assert.is(await (await fetch(link)).text(), 'attachment bytes');
      const log = (await (await fetch(`${url}/webhooks/${webhook.id}/deliveries`, auth)).json()) as {
        data: { status: string }[];
      };
      assert.is(log.data.length, 1);
      assert.is(log.data[0]!.status, 'pending', 'an undeliverable call stays pending for its retries');
    };

    const first = await boot(env);
    await check(first.url);
    first.server.child.kill('SIGKILL');
    await first.server.exited;
    const second = await boot(env);
    await check(second.url);
    assert.is(await stop(second.server), 0);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('with DATABASE_URL the SQL adapters hold the data, across a restart (PGlite in a directory)', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  try {
    const env = {
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: STANDALONE_KEY,
      DATABASE_URL: `pglite:${path.join(dataDir, 'pg')}`,
    };
    const auth = { authorization: `Bearer ${STANDALONE_KEY}` };
    const first = await boot(env);
    assert.ok(first.server.lines.some((line) => logLine(line)?.storage === 'sql'));
    const created = await fetch(`${first.url}/webhooks`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'customer-created', url: 'https://hooks.invalid/in' }),
    });
    assert.is(created.status, 201);
    const { id } = (await created.json()) as { id: string };
    assert.is(await stop(first.server), 0);
    const second = await boot(env);
    assert.is((await fetch(`${second.url}/webhooks/${id}`, { headers: auth })).status, 200);
    assert.is(await stop(second.server), 0);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('SMTP_URL and MAIL_FROM: a shouldIdentify signer gets the link and a code by mail, and the code signs in; one without the other stops the start', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  const sink = await startSmtpSink();
  try {
    const half = startNode(script, {
      PORT: '0',
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: STANDALONE_KEY,
      SMTP_URL: sink.url,
    });
    assert.match((await failedStart(half)).message, /SMTP_URL and MAIL_FROM go together/);

    const { server, url } = await boot({
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: STANDALONE_KEY,
      SMTP_URL: sink.url,
      MAIL_FROM: 'signing@acme.example',
    });
    const headers = { authorization: `Bearer ${STANDALONE_KEY}` };
    const form = validFormData({
      signers: [{ firstName: 'Ida', lastName: 'Stone', email: 'ida@example.com', shouldIdentify: true }],
    });
    const agreement = (await (await fetch(`${url}/agreements`, { method: 'POST', headers, body: form })).json()) as {
      id: string;
      signers: { id: string }[];
    };
    const made = await fetch(`${url}/agreements/${agreement.id}/signers/${agreement.signers[0]!.id}/signing-link`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ send: true }),
    });
    assert.is(made.status, 201);
    const { link } = (await made.json()) as { link: string };
    await until(() => sink.received.length === 1, 'the invitation');
    assert.ok(sink.received[0]!.text.includes(link));
    const bearer = { authorization: `Bearer ${new URL(link).hash.slice(1)}`, 'content-type': 'application/json' };
    assert.is((await fetch(`${url}/signing/identify/email-code`, { method: 'POST', headers: bearer })).status, 202);
    await until(() => sink.received.length === 2, 'the code');
    const code = /\b(\d{6})\b/.exec(sink.received[1]!.text)![1];
    assert.is(
      (await fetch(`${url}/signing/identify`, { method: 'POST', headers: bearer, body: JSON.stringify({ code }) }))
        .status,
      200,
    );
    assert.not.ok(
      [...server.lines, ...server.errorLines].some((line) => line.includes(code!)),
      'the code is in no log line',
    );
    assert.is(await stop(server), 0);
  } finally {
    await sink.close();
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('PORTAL_SEALING_P12, PORTAL_SEALING_PASSWORD: a signed PDF gets a sealed copy pdfsig accepts; a password without the file stops the start', async () => {
  const missing = pkiMissing();
  if (missing !== null) return void console.log(`  skipped: ${missing}`);
  const pki = makePki();
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  try {
    const half = startNode(script, {
      PORT: '0',
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: STANDALONE_KEY,
      PORTAL_SEALING_PASSWORD: 'x',
    });
    assert.match((await failedStart(half)).message, /need PORTAL_SEALING_P12/);
    const p12 = path.join(pki.dir, 'seal.p12');
    const { server, url } = await boot({
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: STANDALONE_KEY,
      PORTAL_SEALING_P12: p12,
      PORTAL_SEALING_PASSWORD: pki.password,
    });
    const headers = { authorization: `Bearer ${STANDALONE_KEY}` };
    const form = validFormData({
      documents: [{ name: 'lease.pdf', bytes: await simplePdf('A lease, sealed by the standalone server') }],
    });
    const agreement = (await (await fetch(`${url}/agreements`, { method: 'POST', headers, body: form })).json()) as {
      id: string;
      signers: { id: string }[];
      documents: { id: string }[];
    };
    const made = await fetch(`${url}/agreements/${agreement.id}/signers/${agreement.signers[0]!.id}/signing-link`, {
      method: 'POST',
      headers,
    });
    const token = new URL(((await made.json()) as { link: string }).link).hash.slice(1);
    const signed = await fetch(`${url}/signing/sign`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ signature: PNG_SIGNATURE }),
    });
    assert.is(signed.status, 200);
    const copyUrl = `${url}/agreements/${agreement.id}/documents/${agreement.documents[0]!.id}/signed`;
    await until(async () => (await fetch(copyUrl, { headers })).status === 200, 'the sealed copy', 15_000);
    const { link } = (await (await fetch(copyUrl, { headers })).json()) as { link: string };
    const copy = Buffer.from(await (await fetch(link)).arrayBuffer());
    assert.match(pdfsig(pki, copy), /Signature is Valid\.[\s\S]*Certificate is Trusted\./);
    assert.is(await stop(server), 0);
  } finally {
    pki.close();
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('PORTAL_DESTINATIONS: a webhook may name a broker of those listed, and an unknown one stops the start', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  try {
    const { server, url } = await boot({
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: STANDALONE_KEY,
      PORTAL_DESTINATIONS: 'redis,nats',
    });
    const create = (hookUrl: string) =>
      fetch(`${url}/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${STANDALONE_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'customer-created', url: hookUrl }),
      });
    const made = await create('redis://default:pw@broker.example:6379/events');
    assert.is(made.status, 201);
    assert.is(((await made.json()) as { url: string }).url, 'redis://default:***@broker.example:6379/events');
    const refused = await create('amqp://broker.example/?exchange=x');
    assert.is(refused.status, 400);
    assert.match(
      ((await refused.json()) as { message: string }).message,
      /must use one of the schemes http, https, redis, rediss, nats/,
    );
    assert.is(await stop(server), 0);
    const bogus = startNode(script, {
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: STANDALONE_KEY,
      PORTAL_DESTINATIONS: 'kafka',
    });
    assert.is(await bogus.exited, 1);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('a bad PORT stops the start with a clear error', async () => {
  const server = startNode(script, { PORT: 'eighty', PORTAL_API_KEYS: STANDALONE_KEY });
  assert.is(await server.exited, 1);
});

test('a port in use: the JSON "failed to start" line and exit 1, with nothing printed or created first', async () => {
  const parent = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  const dataDir = path.join(parent, 'data');
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = taken.address() as AddressInfo;
    const server = startNode(script, { PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, PORTAL_API_KEYS: '' });
    assert.is(await server.exited, 1);
    assert.equal(server.lines, [], 'no API key printed');
    const failure = server.errorLines.map(logLine).find((line) => line?.msg === 'failed to start');
    assert.ok(failure, `a JSON "failed to start" line on stderr; got:\n${server.errorLines.join('\n')}`);
    assert.match(JSON.stringify(failure!.err), 'EADDRINUSE');
    // Node's own warnings (Node 22 warns of NO_COLOR beside FORCE_COLOR) aside, the JSON line is all.
    const ours = server.errorLines.filter((line) => !/^\(node:\d+\) |^\(Use `node --trace-warnings/.test(line));
    assert.is(ours.length, 1, `no raw stack besides the JSON line; got:\n${server.errorLines.join('\n')}`);
    assert.not.ok(existsSync(dataDir), 'the data directory is not created');
  } finally {
    taken.close();
    await rm(parent, { recursive: true, force: true });
  }
});

/** The JSON "failed to start" line of a server that exited 1. */
async function failedStart(server: Started) {
  assert.is(await server.exited, 1);
  const failure = server.errorLines.map(logLine).find((line) => line?.msg === 'failed to start');
  assert.ok(failure, `a JSON "failed to start" line on stderr; got:\n${server.errorLines.join('\n')}`);
  return failure!.err as { message: string; causes: string[] };
}

test('a DATA_DIR another server holds: exit 1 naming the lock file and its holder, and no API key printed', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  try {
    const first = await boot({ DATA_DIR: dataDir, PORTAL_API_KEYS: '' });
    await first.server.waitFor((line) => line.startsWith('API key: '));
    const second = startNode(script, { PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, PORTAL_API_KEYS: '' });
    const err = await failedStart(second);
    assert.ok(err.message.includes(path.join(dataDir, 'storage.lock')), err.message);
    assert.ok(err.message.includes(`process ${first.server.child.pid} on `), err.message);
    assert.equal(second.lines, [], 'nothing on stdout: no API key for a server that never served');
    assert.is(await stop(first.server), 0);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test("an unreachable DATABASE_URL: exit 1 at once, naming the host, port, database and the driver's error", async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address() as AddressInfo;
  await new Promise((resolve) => closed.close(resolve));
  try {
    const started = Date.now();
    const server = startNode(script, {
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: '',
      DATABASE_URL: `postgres://portal:hunter2@127.0.0.1:${port}/records`,
    });
    const err = await failedStart(server);
    assert.ok(Date.now() - started < 8_000, 'no retries for ten seconds first');
    assert.match(err.message, `at 127.0.0.1:${port}, database "records" as user "portal"`);
    assert.match(err.message, 'ECONNREFUSED');
    assert.not.match(JSON.stringify(err), 'hunter2');
    assert.equal(server.lines, [], 'no API key printed');
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('operational events are logged: a receiver answering 410 Gone disables its webhook, said once at warn', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  const receiver = await startReceiver();
  receiver.script([], { status: 410 });
  try {
    const { server, url } = await boot({
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: STANDALONE_KEY,
      PORTAL_ALLOW_PRIVATE_NETWORKS: '1',
    });
    const created = await fetch(`${url}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${STANDALONE_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'customer-created', url: `${receiver.url}/gone` }),
    });
    const webhook = (await created.json()) as { id: string };
    assert.is(
      (
        await fetch(`${url}/webhooks/${webhook.id}/test`, {
          method: 'POST',
          headers: { authorization: `Bearer ${STANDALONE_KEY}` },
        })
      ).status,
      202,
    );
    const said = () => server.errorLines.map(logLine).filter((line) => line?.msg === 'webhook disabled');
    for (let i = 0; i < 100 && said().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(
      said().map((line) => [line!.level, line!.webhookId, line!.reason]),
      [['warn', webhook.id, 'gone']],
    );
    assert.is(await stop(server), 0);
  } finally {
    await receiver.close();
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('DATABASE_POOL_MAX that is not a whole number from 1 to 1000 stops the start, naming it', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  try {
    const server = startNode(script, {
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      PORTAL_API_KEYS: STANDALONE_KEY,
      DATABASE_URL: 'pglite:memory',
      DATABASE_POOL_MAX: 'many',
    });
    assert.match(
      (await failedStart(server)).message,
      'DATABASE_POOL_MAX must be a whole number from 1 to 1000, got "many"',
    );
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('PORTAL_ALLOW_PRIVATE_NETWORKS=1: a warning at start, and a receiver on loopback gets the calls', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-standalone-'));
  const receiver = await startReceiver();
  const auth = { authorization: `Bearer ${STANDALONE_KEY}` };
  try {
    for (const allow of ['', '1']) {
      const { server, url } = await boot({
        DATA_DIR: dataDir,
        PORTAL_API_KEYS: STANDALONE_KEY,
        PORTAL_ALLOW_PRIVATE_NETWORKS: allow,
      });
      const warned = server.errorLines
        .map(logLine)
        .some((line) => line?.level === 'warn' && String(line.msg).includes('PORTAL_ALLOW_PRIVATE_NETWORKS'));
      assert.is(warned, allow === '1');
      const created = await fetch(`${url}/webhooks`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'agreement-created', url: receiver.url }),
      });
      assert.is(created.status, 201);
      const webhook = (await created.json()) as { id: string };
      assert.is(
        (await fetch(`${url}/agreements`, { method: 'POST', headers: auth, body: validFormData() })).status,
        201,
      );
      const attempted = async () => {
        const log = (await (await fetch(`${url}/webhooks/${webhook.id}/deliveries`, { headers: auth })).json()) as {
          data: { attempts: { statusCode: number | null; error: string | null }[] }[];
        };
        return log.data[0]?.attempts[0];
      };
      let attempt = await attempted();
      for (let i = 0; attempt === undefined && i < 200; i++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        attempt = await attempted();
      }
      if (allow === '1') assert.is(attempt?.statusCode, 200, JSON.stringify(attempt));
      else assert.match(String(attempt?.error), /private|loopback|refused/i);
      await fetch(`${url}/webhooks/${webhook.id}`, { method: 'DELETE', headers: auth });
      assert.is(await stop(server), 0);
    }
    assert.is(receiver.received.length, 1, 'only the server that allows it calls the receiver');
  } finally {
    await receiver.close();
    await rm(dataDir, { recursive: true, force: true });
  }
});

test.run();
