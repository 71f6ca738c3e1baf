import type pg from 'pg';
import type { Storage } from '../../../src/ports.js';
import type { SqlClient } from '../../../adapters/sql/index.js';
import { sqlStorage } from '../../../adapters/sql/index.js';
import type { StorageBackChannel } from '../../conformance/types.js';
import { giveBackSchema, sqlBackChannel, takeSchema } from '../../helpers/sql.js';

/** A database the SQL tests run on: PGlite always, the PostgreSQL server when it answers. */
export interface SqlBackend {
  name: string;
  client: SqlClient;
  /** Only on the server: a pool, for what needs several connections at once. */
  pool?: pg.Pool;
}

/**
 * Runs `body` with an opened storage on a schema of its own (`takeSchema`: an emptied one with the
 * tables as migrated, or a fresh one), given back afterwards, and the back-channel `db` that reads
 * that schema's tables in plain SQL.
 */
export function withSqlStorage(
  backend: SqlBackend,
  body: (storage: Storage, context: { schema: string; db: StorageBackChannel }) => Promise<void>,
) {
  return async () => {
    const schema = await takeSchema(backend.client);
    const storage = sqlStorage({ client: backend.client, schema });
    await storage.open!();
    try {
      await body(storage, { schema, db: sqlBackChannel(backend.client, schema) });
    } finally {
      await storage.close!();
      await giveBackSchema(backend.client, schema);
    }
  };
}

/** Rows of a table in `schema`, read directly: the back channel that does not trust the adapter. */
export async function rowsOf(
  client: SqlClient,
  schema: string,
  table: string,
  where = 'true',
): Promise<Record<string, unknown>[]> {
  return (await client.query(`SELECT * FROM "${schema}"."portal_${table}" WHERE ${where}`)).rows as Record<
    string,
    unknown
  >[];
}

export { agreementRecord, attachmentRecord, eventRecord } from '../../conformance/fixtures.js';
