import { suite } from 'uvu';
import { blobStoreSuite } from '../../conformance/blobs.js';
import { storageSuite } from '../../conformance/storage.js';
import { connectPostgres, dropRunSchemas, openPglite, sqlBlobsFactory, sqlStorageFactory } from '../../helpers/sql.js';
import { blobTests } from './blobs.js';
import { concurrencyTests } from './concurrency.js';
import { skipping } from '../../helpers/skip.js';
import type { SqlBackend } from './context.js';
import { generationTests } from './generations.js';
import { noDriverTests } from './no-drivers.js';
import { outboxTests } from './outbox.js';
import { recordTests } from './records.js';
import { rebuildTests } from './rebuild.js';
import { ringTests } from './ring.js';
import { connectTests, setupTests } from './setup.js';

/**
 * The SQL adapter's suites on one backend: PGlite (embedded, always), or the PostgreSQL server when
 * it answers (its absence printed, never skipped silently). Each backend is a test file of its own
 * (`sql-pglite.test.ts`, `sql-postgres.test.ts`), so the two run side by side.
 */
export async function sqlSuites(which: 'PGlite' | 'PostgreSQL'): Promise<void> {
  let backend: SqlBackend;
  let close: () => Promise<void>;
  if (which === 'PGlite') {
    const pglite = await openPglite();
    backend = { name: 'PGlite', client: pglite };
    close = () => pglite.close();
  } else {
    // The PostgreSQL server when it answers within about two seconds (CI starts it).
    const postgres = await connectPostgres();
    if (!postgres.pool) {
      console.log(`SKIP every sql (PostgreSQL) suite: ${postgres.reason}`);
      return;
    }
    backend = { name: 'PostgreSQL', client: postgres.pool, pool: postgres.pool };
    close = () => postgres.pool.end();
  }

  storageSuite(sqlStorageFactory(`sql (${backend.name})`, backend.client));
  blobStoreSuite(sqlBlobsFactory(`sql (${backend.name})`, backend.client));

  const test = suite(`sql adapter (${backend.name})`);
  recordTests(test, backend);
  outboxTests(test, backend);
  generationTests(test, backend);
  ringTests(test, backend);
  rebuildTests(test, backend);
  blobTests(test, backend);
  setupTests(test, backend);
  const reason = `sql adapter (${backend.name}): these run on the PostgreSQL server only, with pg pools and clients of their own`;
  concurrencyTests(backend.pool ? test : skipping(test, reason));
  test.run();

  if (which === 'PGlite') {
    const other = suite('sql adapter: drivers');
    noDriverTests(other);
    connectTests(other);
    other.run();
  }

  const teardown = suite(`sql adapter (${backend.name}): teardown`);
  teardown('drops the schemas this run made and closes the client', async () => {
    await dropRunSchemas(backend.client);
    await close();
  });
  teardown.run();
}
