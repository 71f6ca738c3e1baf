import { suite } from 'uvu';
import { blobStoreSuite } from '../conformance/blobs.js';
import { storageSuite } from '../conformance/storage.js';
import { connectPostgres, dropRunSchemas, openPglite, sqlBlobsFactory, sqlStorageFactory } from '../helpers/sql.js';
import { blobTests } from './sql/blobs.js';
import { concurrencyTests } from './sql/concurrency.js';
import { skipping } from '../helpers/skip.js';
import type { SqlBackend } from './sql/context.js';
import { noDriverTests } from './sql/no-drivers.js';
import { outboxTests } from './sql/outbox.js';
import { recordTests } from './sql/records.js';
import { connectTests, setupTests } from './sql/setup.js';

// PGlite always: an embedded PostgreSQL, no server needed.
const pglite = await openPglite();
const backends: SqlBackend[] = [{ name: 'PGlite', client: pglite }];

// The PostgreSQL server when it answers within about two seconds (CI starts it).
const postgres = await connectPostgres();
if (postgres.pool) backends.push({ name: 'PostgreSQL', client: postgres.pool, pool: postgres.pool });
else console.log(`SKIP every sql (PostgreSQL) suite: ${postgres.reason}`);

for (const backend of backends) {
  storageSuite(sqlStorageFactory(`sql (${backend.name})`, backend.client));
  blobStoreSuite(sqlBlobsFactory(`sql (${backend.name})`, backend.client));

  const test = suite(`sql adapter (${backend.name})`);
  recordTests(test, backend);
  outboxTests(test, backend);
  blobTests(test, backend);
  setupTests(test, backend);
  const reason = `sql adapter (${backend.name}): these run on the PostgreSQL server only, with pg pools and clients of their own`;
  concurrencyTests(backend.pool ? test : skipping(test, reason));
  test.run();
}

const other = suite('sql adapter: drivers');
noDriverTests(other);
connectTests(other);
other.run();

const teardown = suite('sql adapter: teardown');
teardown('drops the schemas this run made and closes the clients', async () => {
  for (const backend of backends) await dropRunSchemas(backend.client);
  await pglite.close();
  await postgres.pool?.end();
});
teardown.run();
