import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import net, { type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryStorage } from '../../adapters/memory/index.js';
import { createPortal } from '../../src/index.js';
import { createReadiness } from '../../src/domain/readiness.js';
import type { BlobStore, Storage } from '../../src/ports.js';
import { logLine, startNode } from '../helpers/process.js';
import { skipping } from '../helpers/skip.js';
import { POSTGRES_URL, connectPostgres } from '../helpers/sql.js';

const KEY = 'readiness-key-0123456789';
const auth = { auth: { apiKeys: [KEY] }, signingKeys: ['readiness-signing-key-0123456789abcdef'] };

test('portal.ready(): every check passes on a fresh portal, the worker running, nothing waiting', async () => {
  const portal = await createPortal(auth);
  try {
    const readiness = await portal.ready();
    assert.is(readiness.ok, true);
    assert.equal(
      { storage: readiness.checks.storage.ok, blobs: readiness.checks.blobs.ok, worker: readiness.checks.worker },
      { storage: true, blobs: true, worker: { ok: true, running: true, waiting: 0, lagMs: 0 } },
    );
    assert.type(readiness.checks.storage.durationMs, 'number');
  } finally {
    await portal.close();
  }
  const closed = await portal.ready();
  assert.is(closed.ok, false, 'a closed portal is not ready');
  assert.equal([closed.checks.worker.ok, closed.checks.worker.running], [false, false]);
});

test("portal.ready(): the deliveries waiting and how long the earliest has, by the portal's clock", async () => {
  let now = Date.parse('2026-11-26T10:00:00Z');
  const portal = await createPortal({ ...auth, clock: () => new Date(now), webhooks: { worker: false } });
  try {
    await portal.webhooks.create('acct', { type: 'customer-created', url: 'https://hooks.example/in' });
    await portal.events.publish('acct', 'customer-created', { customer: { id: 'cus_1' } });
    now += 5_000;
    await portal.events.publish('acct', 'customer-created', { customer: { id: 'cus_2' } });
    now += 25_000;
    const readiness = await portal.ready();
    assert.is(readiness.ok, true, 'no worker here by choice: ready');
    assert.equal(readiness.checks.worker, { ok: true, running: false, waiting: 2, lagMs: 30_000 });
  } finally {
    await portal.close();
  }
});

test('ready: a store that does not answer fails its check at the timeout, naming it; the others still report', async () => {
  const storage = memoryStorage();
  const hanging: Storage = { ...storage, deliveryQueue: () => new Promise(() => {}) };
  const blobs = memoryBlobs();
  const broken: BlobStore = { ...blobs, stat: () => Promise.reject(new Error('EACCES: permission denied, stat')) };
  const ready = createReadiness({
    storage: hanging,
    blobs: broken,
    clock: () => new Date(),
    workerRunning: () => true,
    timeoutMs: 50,
  });
  const readiness = await ready();
  assert.is(readiness.ok, false);
  assert.equal(readiness.checks.storage.ok, false);
  assert.is(readiness.checks.storage.error, 'no answer within 50 ms');
  assert.is(readiness.checks.blobs.error, 'EACCES: permission denied, stat');
  assert.equal(readiness.checks.worker, { ok: true, running: true, waiting: null, lagMs: null });
});

const script = path.resolve(fileURLToPath(import.meta.url), '../../../examples/standalone.js');

async function boot(env: Record<string, string>) {
  const server = startNode(script, { PORT: '0', HOST: '127.0.0.1', PORTAL_API_KEYS: KEY, ...env });
  const listening = logLine(await server.waitFor((line) => logLine(line)?.msg === 'listening', 30_000));
  return { server, root: String(listening!.url).replace(/\/v1$/, '') };
}

test('standalone: /healthz and /readyz answer without a key, outside the API; HEAD too, other methods 405', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-readyz-'));
  const { server, root } = await boot({ DATA_DIR: dataDir });
  try {
    const health = await fetch(`${root}/healthz`);
    assert.is(health.status, 200);
    assert.equal(await health.json(), { ok: true });
    assert.is(health.headers.get('cache-control'), 'no-store');
    const ready = await fetch(`${root}/readyz`);
    assert.is(ready.status, 200);
    const body = (await ready.json()) as { ok: boolean; checks: Record<string, { ok: boolean }> };
    assert.equal(
      body,
      { ok: true, checks: { storage: { ok: true }, blobs: { ok: true }, worker: { ok: true, running: true } } },
      'whether each check passed, and no more',
    );
    assert.is((await fetch(`${root}/readyz`, { method: 'HEAD' })).status, 200);
    assert.is((await fetch(`${root}/readyz`, { method: 'POST' })).status, 405);
    assert.is((await fetch(`${root}/v1/healthz`)).status, 404, 'not a route of the API');
    assert.is((await fetch(`${root}/metrics`)).status, 404, 'no /metrics without METRICS=1');
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('standalone with METRICS=1: /metrics in the Prometheus text format, with the request and queue metrics', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-metrics-'));
  const { server, root } = await boot({ DATA_DIR: dataDir, METRICS: '1' });
  try {
    assert.is((await fetch(`${root}/v1/webhooks`, { headers: { authorization: `Bearer ${KEY}` } })).status, 200);
    const res = await fetch(`${root}/metrics`);
    assert.is(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', 'text/plain');
    const text = await res.text();
    assert.match(text, /http_server_request_duration_count\{[^}]*http_route="\/v1\/webhooks"[^}]*\} 1/);
    assert.match(text, /customer_portal_webhook_queue_depth(\{[^}]*\})? 0/);
    assert.match(text, /customer_portal_webhook_queue_oldest_age(\{[^}]*\})? 0/);
    assert.match(text, 'service_name="customer-portal"');
    assert.not.match(text, KEY);
  } finally {
    server.child.kill('SIGTERM');
    assert.is(await server.exited, 0);
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('standalone with METRICS_TOKEN: /metrics needs it as a bearer; without it, a warning at start says /metrics is open', async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-metrics-'));
  try {
    const guarded = await boot({ DATA_DIR: dataDir, METRICS: '1', METRICS_TOKEN: 'scrape-token-0123456789' });
    try {
      for (const authorization of [undefined, 'Bearer wrong-token', `Bearer ${KEY}`]) {
        const res = await fetch(`${guarded.root}/metrics`, {
          headers: authorization === undefined ? {} : { authorization },
        });
        assert.is(res.status, 401, String(authorization));
        assert.match(((await res.json()) as { message: string }).message, /METRICS_TOKEN/);
      }
      const res = await fetch(`${guarded.root}/metrics`, {
        headers: { authorization: 'Bearer scrape-token-0123456789' },
      });
      assert.is(res.status, 200);
      assert.not.ok(guarded.server.errorLines.some((line) => line.includes('without METRICS_TOKEN')));
    } finally {
      guarded.server.child.kill('SIGTERM');
      assert.is(await guarded.server.exited, 0);
    }
    const open = await boot({ DATA_DIR: dataDir, METRICS: '1' });
    try {
      assert.ok(open.server.errorLines.some((line) => line.includes('METRICS=1 without METRICS_TOKEN')));
    } finally {
      open.server.child.kill('SIGTERM');
      assert.is(await open.server.exited, 0);
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

/** A TCP proxy to PostgreSQL that can be cut (every connection reset, new ones refused) and restored. */
async function cuttableProxy(target: URL) {
  const sockets = new Set<Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    async cut() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      });
    },
    async restore() {
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}

const postgres = await connectPostgres();
const onPostgres = postgres.pool ? test : skipping(test, postgres.reason!);

onPostgres(
  'standalone on PostgreSQL: /readyz turns 503 while the database is unreachable, naming it, and 200 once it is back',
  async () => {
    const pool = postgres.pool!;
    const database = `cp_readyz_${randomBytes(4).toString('hex')}`;
    await pool.query(`CREATE DATABASE ${database}`);
    const dataDir = await mkdtemp(path.join(tmpdir(), 'portal-readyz-'));
    const url = new URL(POSTGRES_URL);
    const proxy = await cuttableProxy(url);
    let server: ReturnType<typeof startNode> | undefined;
    try {
      const databaseUrl = `postgres://${url.username}@127.0.0.1:${proxy.port}/${database}`;
      const booted = await boot({
        DATA_DIR: dataDir,
        DATABASE_URL: databaseUrl,
        DATABASE_POOL_MAX: '2',
        PORTAL_SIGNING_KEYS: auth.signingKeys[0]!,
      });
      server = booted.server;
      // DATABASE_POOL_MAX: twenty requests at once hold two connections at most.
      const statuses = await Promise.all(
        Array.from({ length: 20 }, () =>
          fetch(`${booted.root}/v1/files`, { headers: { authorization: `Bearer ${KEY}` } }).then((res) => res.status),
        ),
      );
      assert.ok(statuses.every((status) => status === 200));
      const [{ connections }] = (
        await pool.query(`SELECT count(*)::int AS connections FROM pg_stat_activity WHERE datname = $1`, [database])
      ).rows as [{ connections: number }];
      assert.ok(connections >= 1 && connections <= 2, `${connections} connections`);
      const readyz = async () => {
        const res = await fetch(`${booted.root}/readyz`);
        return {
          status: res.status,
          body: (await res.json()) as { ok: boolean; checks: Record<string, { ok: boolean; error?: string }> },
        };
      };
      assert.is((await readyz()).status, 200);

      await proxy.cut();
      await new Promise((resolve) => setTimeout(resolve, 1_100)); // past the kept answer
      const down = await readyz();
      assert.is(down.status, 503);
      assert.equal(down.body.checks.storage, { ok: false }, 'no driver error in the answer');
      const logged = server.errorLines.map(logLine).find((line) => line?.msg === 'not ready: a check failed');
      assert.ok(logged, 'the cause is logged');
      assert.match(JSON.stringify(logged!.checks), 'no answer within 2000 ms');
      assert.is((await fetch(`${booted.root}/healthz`)).status, 200, 'the process still serves: alive, not ready');

      await proxy.restore();
      let back = await readyz();
      for (let i = 0; i < 50 && back.status !== 200; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        back = await readyz();
      }
      assert.is(back.status, 200);
      assert.is(back.body.ok, true);
    } finally {
      server?.child.kill('SIGTERM');
      await server?.exited;
      await proxy.close();
      await pool.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {});
      await pool.end();
      await rm(dataDir, { recursive: true, force: true });
    }
  },
);

test.run();
