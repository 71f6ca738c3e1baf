import path from 'node:path';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { sqlAdapters } from '../../adapters/sql/index.js';
import type { PortalOptions } from '../../src/index.js';
import { removeDir, tempDir } from './fs-dirs.js';
import { connectPostgres, dropSchema, freshSchema, openPglite } from './sql.js';

/** One adapter pair (storage and blobs) a portal-level test runs on, each time in a fresh place. */
export interface Backend {
  name: string;
  options(): Promise<{ options: PortalOptions; cleanup(): Promise<void> }>;
}

/**
 * memory, fs, PGlite, and PostgreSQL when it answers (its absence printed under `what`, never
 * skipped silently). `close` releases the shared clients once the suite is done.
 */
export async function openBackends(what: string): Promise<{ list: Backend[]; close(): Promise<void> }> {
  const pglite = await openPglite();
  const postgres = await connectPostgres();
  const list: Backend[] = [
    { name: 'memory', options: async () => ({ options: {}, cleanup: async () => {} }) },
    {
      name: 'fs',
      async options() {
        const dir = tempDir('backend');
        return {
          options: { storage: fsStorage({ dir }), blobs: fsBlobs({ dir: path.join(dir, 'blobs') }) },
          cleanup: async () => removeDir(dir),
        };
      },
    },
    {
      name: 'PGlite',
      async options() {
        const schema = freshSchema();
        return { options: sqlAdapters({ client: pglite, schema }), cleanup: () => dropSchema(pglite, schema) };
      },
    },
  ];
  if (postgres.pool) {
    const pool = postgres.pool;
    list.push({
      name: 'PostgreSQL',
      async options() {
        const schema = freshSchema();
        return { options: sqlAdapters({ client: pool, schema }), cleanup: () => dropSchema(pool, schema) };
      },
    });
  } else {
    console.log(`SKIP the PostgreSQL rows of ${what}: ${postgres.reason}`);
  }
  return {
    list,
    async close() {
      await pglite.close();
      await postgres.pool?.end();
    },
  };
}
