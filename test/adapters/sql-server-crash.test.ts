import { execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqlStorage } from '../../adapters/sql/index.js';
import { at, attempt, eventRecord, webhookRecord } from '../conformance/fixtures.js';
import { skipping } from '../helpers/skip.js';

/*
 * A crash of the database itself: a PostgreSQL server on a cluster of its own (initdb, then
 * `pg_ctl stop -m immediate`: no shutdown checkpoint, so recovery runs and resets every unlogged
 * table), and a process holding PGlite killed with SIGKILL. The queue's slots are unlogged
 * (adapters/sql/outbox/ring.ts): what they held must come back from the publishes' notes
 * (rebuild.ts), each delivery once, and nothing else be lost.
 */

const PGLITE_CHILD = fileURLToPath(new URL('../helpers/pglite-crash-child.js', import.meta.url));

test("PGlite: a process killed with SIGKILL; on reopening, the next claim makes the slots' deliveries again under their ids, and the failure keeps its attempt", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'portal-pglite-crash-'));
  try {
    const child = spawn(process.execPath, [PGLITE_CHILD, path.join(dir, 'data')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8');
    const printed = await new Promise<{ made: string[]; failed: string }>((resolve, reject) => {
      child.stdout.on('data', (chunk: string) => {
        out += chunk;
        if (out.includes('\n')) resolve(JSON.parse(out));
      });
      child.once('exit', (code) => reject(new Error(`the child ended first (${code}): ${out}`)));
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;

    const db = new PGlite(path.join(dir, 'data'));
    try {
      const queued = await db.query<{ id: string }>('SELECT id FROM portal_queue');
      assert.equal(
        queued.rows.map((row) => row.id),
        [printed.failed],
        'recovery left the kept partition alone',
      );
      const storage = sqlStorage({ client: db });
      await storage.open!();
      const claimed = await storage.claimDeliveries({ now: at(4), leaseUntil: at(100), limit: 10, owner: 'w2' });
      assert.equal(claimed.map((one) => one.delivery.id).sort(), [...printed.made].sort());
      assert.is(claimed.find((one) => one.delivery.id === printed.failed)?.delivery.attemptCount, 1);
      await storage.close!();
    } finally {
      await db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The newest PostgreSQL server binaries of Debian's layout, or why there are none. */
function serverBinaries(): { bin: string } | { reason: string } {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return { reason: `no PostgreSQL server binaries in ${root}` };
  const versions = readdirSync(root)
    .filter((name) => existsSync(path.join(root, name, 'bin/initdb')))
    .sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) return { reason: `no initdb under ${root}` };
  return { bin: path.join(root, versions[0]!, 'bin') };
}

/** A free TCP port on the loopback interface. */
const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

const found = serverBinaries();
// initdb and the server refuse to run as root: as the postgres user then, when there is one.
const asRoot = process.getuid?.() === 0;
const postgresUser = (() => {
  if (!asRoot) return null;
  try {
    return {
      uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
      gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })),
    };
  } catch {
    return undefined;
  }
})();
const reason =
  'reason' in found
    ? found.reason
    : postgresUser === undefined
      ? 'running as root, and no postgres user to run a server as'
      : null;

(reason === null ? test : skipping(test, reason!))(
  'PostgreSQL: a crash of the server empties the unlogged slots; the next claim makes their deliveries again, each once, and a failure keeps its attempt',
  async () => {
    const { bin } = found as { bin: string };
    // As root, under /tmp: the postgres user cannot reach a directory private to this run.
    const dir = mkdtempSync(path.join(asRoot ? '/tmp' : tmpdir(), 'portal-crash-'));
    const data = path.join(dir, 'data');
    const run = (tool: string, args: string[]) =>
      execFileSync(
        asRoot ? 'runuser' : path.join(bin, tool),
        asRoot ? ['-u', 'postgres', '--', path.join(bin, tool), ...args] : args,
        {
          stdio: 'pipe',
        },
      );
    if (postgresUser) chownSync(dir, postgresUser.uid, postgresUser.gid);
    const port = await freePort();
    const serverOptions = `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c autovacuum=off`;
    const start = () => run('pg_ctl', ['-D', data, '-w', '-l', path.join(dir, 'log'), '-o', serverOptions, 'start']);
    run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    start();
    const pool = new pg.Pool({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres', max: 4 });
    pool.on('error', () => {});
    try {
      const storage = sqlStorage({ client: pool });
      await storage.open!();
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const published = [];
      for (let i = 0; i < 20; i++)
        published.push(...(await storage.publishEvents([eventRecord({ createdAt: at(1), data: { i } })])));
      // Ten claimed: four recorded as succeeded, one failed (due again at 3 s), five in flight.
      const claimed = await storage.claimDeliveries({ now: at(2), leaseUntil: at(100), limit: 10, owner: 'w' });
      assert.is(claimed.length, 10);
      const succeeded = claimed.slice(0, 4).map((one) => one.delivery.id);
      for (const id of succeeded)
        await storage.recordAttempt({
          id,
          owner: 'w',
          attempt: attempt(200, 2),
          outcome: { status: 'succeeded', nextAttemptAt: null },
        });
      const failed = claimed[4]!.delivery.id;
      await storage.recordAttempt({
        id: failed,
        owner: 'w',
        attempt: attempt(500, 2),
        outcome: { status: 'pending', nextAttemptAt: at(3) },
      });

      run('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']);
      start();
      // Read on a connection of its own: the pool's were cut by the crash, as an application's are.
      const reader = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
      await reader.connect();
      try {
        const { rows } = await reader.query('SELECT count(*)::int AS n FROM portal_queue');
        assert.is((rows[0] as { n: number }).n, 1, 'recovery left the kept partition alone: the failure');
      } finally {
        await reader.end();
      }

      // The first claim after the restart (its turn of the ring) makes the lost ones again.
      const after = await storage.claimDeliveries({ now: at(4), leaseUntil: at(100), limit: 100, owner: 'w2' });
      const ids = after.map((one) => one.delivery.id);
      assert.is(new Set(ids).size, ids.length, 'none twice');
      assert.equal(
        ids.sort(),
        published
          .map((delivery) => delivery.id)
          .filter((id) => !succeeded.includes(id))
          .sort(),
        'every delivery not recorded as succeeded, under its id',
      );
      assert.is(after.find((one) => one.delivery.id === failed)?.delivery.attemptCount, 1);
      for (const id of succeeded) assert.is((await storage.getDelivery('acct_a', id))?.status, 'succeeded');
      await storage.close!();
    } finally {
      await pool.end();
      try {
        run('pg_ctl', ['-D', data, '-m', 'fast', 'stop']);
      } catch {}
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test.run();
