/**
 * The server side of `sql.bench.ts`, in its own process so the load does not share its event loop:
 *   node dist/bench/sql-server.js <memory|postgres|pglite> [schema]
 * Serves a portal on the given storage with one webhook, and prints `READY {port, webhookId}`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { sqlStorage } from '../adapters/sql/index.js';
import { createPortal, type Storage } from '../src/index.js';
import { POSTGRES_URL } from '../test/helpers/sql.js';
import { BENCH_SIGNING_KEYS } from './support/signing-keys.js';

const [kind = 'memory', schema = 'portal_bench'] = process.argv.slice(2);
const ACCOUNT = 'acct_bench';
const KEY = 'bench-key-0123456789abcdef';

let storage: Storage | undefined;
if (kind === 'postgres') {
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 10 });
  storage = sqlStorage({ client: pool, schema });
} else if (kind === 'pglite') {
  storage = sqlStorage({ client: await PGlite.create(), schema });
}

const portal = await createPortal({
  auth: { apiKeys: { [KEY]: ACCOUNT } },
  signingKeys: BENCH_SIGNING_KEYS,
  webhooks: { worker: false },
  ...(storage && { storage }),
});
const hook = await portal.webhooks.create(ACCOUNT, { type: 'customer-created', url: 'https://receiver.example/hook' });
const server = http.createServer(portal.handler).listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`READY ${JSON.stringify({ port, webhookId: hook.id, key: KEY })}\n`);
});
