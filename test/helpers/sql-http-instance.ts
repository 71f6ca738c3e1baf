/**
 * A portal serving HTTP on the PostgreSQL server, in its own process, for tests of what instances
 * sharing one database do together:
 *   node dist/test/helpers/sql-http-instance.js <schema>
 * SQL adapters on the schema given, no webhook worker, listening on 127.0.0.1 port 0. Sends
 * `{ url }` over IPC once it listens; ends when the IPC channel closes, or is killed by the test.
 */
import pg from 'pg';
import { sqlAdapters } from '../../adapters/sql/index.js';
import { createPortal } from '../../src/index.js';
import { listen } from './server.js';
import { POSTGRES_URL } from './sql.js';

const [schema] = process.argv.slice(2);
if (schema === undefined) throw new Error('usage: sql-http-instance.js <schema>');

const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
pool.on('error', () => {});
const portal = await createPortal({
  ...sqlAdapters({ client: pool, schema }),
  auth: { apiKeys: { 'key-of-account-a': 'acct_a' } },
  signingKeys: ['a-signing-key-shared-by-every-instance-0123456789'],
  webhooks: { worker: false },
});
const running = await listen(portal.handler);
process.on('disconnect', () => {
  void running
    .close()
    .then(() => portal.close())
    .then(() => pool.end())
    .finally(() => process.exit(0));
});
process.send!({ url: running.url });
