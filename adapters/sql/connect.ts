import type { BlobStore, Storage } from '../../src/ports.js';
import type { SqlClient } from './client.js';
import type { SqlOptions } from './schema.js';
import { sqlBlobs } from './sql-blobs.js';
import { sqlStorage } from './sql-storage.js';

export interface SqlAdaptersOptions extends SqlOptions {
  client: SqlClient;
  /** Dates the blobs written; default the system clock. */
  clock?: () => Date;
}

/** Both adapters on one client and schema: `createPortal({ ...sqlAdapters({ client }) })`. */
export function sqlAdapters(options: SqlAdaptersOptions): { storage: Storage; blobs: BlobStore } {
  return { storage: sqlStorage(options), blobs: sqlBlobs(options) };
}

/** A client this module made, and how to end it: its maker owns it, not the adapters. */
export interface Database {
  client: SqlClient;
  close(): Promise<void>;
}

/**
 * A client for a `DATABASE_URL`: `postgres://…` or `postgresql://…` makes a `pg.Pool`;
 * `pglite:memory` an in-memory PGlite, `pglite:<directory>` a PGlite kept in that directory.
 * The driver is imported only here, when asked for, so the adapters themselves need neither
 * package; a missing one is named in the error.
 */
export async function connectDatabase(url: string): Promise<Database> {
  if (/^postgres(ql)?:\/\//i.test(url)) {
    const pg = await importPeer<typeof import('pg')>('pg', url);
    const Pool = pg.Pool ?? pg.default.Pool;
    const pool = new Pool({ connectionString: url });
    // An idle connection the server drops is reported here; the pool replaces it on the next
    // checkout, and queries in flight reject on their own. Without a listener it would crash.
    pool.on('error', () => {});
    return { client: pool, close: () => pool.end() };
  }
  if (url.startsWith('pglite:')) {
    const { PGlite } = await importPeer<typeof import('@electric-sql/pglite')>('@electric-sql/pglite', url);
    const location = url.slice('pglite:'.length);
    const db = location === 'memory' || location === '' ? new PGlite() : new PGlite(location);
    await db.waitReady;
    return { client: db, close: () => db.close() };
  }
  throw new TypeError(`Database URL must start with postgres://, postgresql:// or pglite: (got "${redact(url)}")`);
}

async function importPeer<T>(name: string, url: string): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' && String((error as Error).message).includes(name)) {
      throw new Error(
        `The database URL "${redact(url)}" needs the package "${name}", an optional peer dependency of customer-portal: npm install ${name}`,
        { cause: error },
      );
    }
    throw error;
  }
}

/** The URL without its password, for messages. */
function redact(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@/]*@/, '//$1:***@');
}
