/**
 * The portal on `sqlStorage` over a `pg.Pool` of `POOL_SIZE`, for the PostgreSQL path of `sql.bench.ts`:
 *   node dist/bench/servers/portal-sql.js <schema>
 * The schema holds the fixture's records already (the bench fills it once for both contenders).
 */
import http from 'node:http';
import pg from 'pg';
import { sqlStorage } from '../../adapters/sql/index.js';
import { createPortal } from '../../src/index.js';
import { POSTGRES_URL } from '../../test/helpers/sql.js';
import { ACCOUNT, KEY, POOL_SIZE, announce } from './fixture.js';
import { BENCH_SIGNING_KEYS } from '../support/signing-keys.js';

const schema = process.argv[2]!;
const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: POOL_SIZE });
const portal = await createPortal({
  auth: { apiKeys: { [KEY]: ACCOUNT } },
  signingKeys: BENCH_SIGNING_KEYS,
  webhooks: { worker: false },
  storage: sqlStorage({ client: pool, schema }),
});
const server = http.createServer(portal.handler).listen(0, '127.0.0.1', () => announce(server));
