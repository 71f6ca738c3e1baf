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
 * `poolMax` sizes the pool (pg's default: 10 connections).
 * The driver is imported only here, when asked for, so the adapters themselves need neither
 * package; a missing one is named in the error.
 */
export async function connectDatabase(url: string, options: { poolMax?: number } = {}): Promise<Database> {
  if (/^postgres(ql)?:\/\//i.test(url)) {
    const pg = await importPeer<typeof import('pg')>('pg', url);
    const Pool = pg.Pool ?? pg.default.Pool;
    const pool = new Pool({
      connectionString: url,
      ...(options.poolMax === undefined ? {} : { max: options.poolMax }),
    });
    // An idle connection the server drops is reported here; the pool replaces it on the next
    // checkout, and queries in flight reject on their own. Without a listener it would crash.
    pool.on('error', () => {});
    await reachable(pool, url);
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

/** How long the first connection may take before the start gives up on an address that does not answer. */
const FIRST_CONNECTION_MS = 10_000;

/**
 * One round trip before anything else: a server that is down, a wrong password or a database that
 * does not exist stops the start here with the address and the driver's own words, instead of
 * later as a retried request's "unavailable".
 */
async function reachable(pool: import('pg').Pool, url: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${FIRST_CONNECTION_MS / 1000} s`)),
      FIRST_CONNECTION_MS,
    );
  });
  try {
    await Promise.race([pool.query('SELECT 1'), timeout]);
  } catch (error) {
    // Not awaited: ending waits for a connection still being tried, up to the system's TCP timeout.
    void pool.end().catch(() => {});
    const code = (error as { code?: unknown }).code;
    const cause = `${(error as Error).message}${typeof code === 'string' ? ` (${code})` : ''}`;
    throw new Error(`Cannot connect to the database ${describeAddress(url)}: ${cause}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

/** `at host:port, database "name" as user "user"`, read from the URL with pg's defaults. */
function describeAddress(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `"${redact(url)}"`;
  }
  const host =
    parsed.searchParams.get('host') ?? (decodeURIComponent(parsed.hostname) || process.env.PGHOST || 'localhost');
  const port = parsed.searchParams.get('port') ?? (parsed.port || process.env.PGPORT || '5432');
  const database = decodeURIComponent(parsed.pathname.slice(1)) || process.env.PGDATABASE;
  const user = decodeURIComponent(parsed.username) || process.env.PGUSER || process.env.USER;
  return `at ${host}:${port}${database ? `, database "${database}"` : ''}${user ? ` as user "${user}"` : ''}`;
}

async function importPeer<T>(name: string, url: string): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch (error) {
    if (
      (error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' &&
      String((error as Error).message).includes(name)
    ) {
      throw new Error(
        `The database URL "${redact(url)}" needs the package "${name}", an optional peer dependency of customer-portal: npm install ${name}`,
        {
          cause: error,
        },
      );
    }
    throw error;
  }
}

/** The URL without its password, for messages. */
function redact(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@/]*@/, '//$1:***@');
}
