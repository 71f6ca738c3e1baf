import type pg from 'pg';
import type { Storage } from '../../src/ports.js';
import type { SqlClient } from '../../adapters/sql/index.js';
import { sqlStorage } from '../../adapters/sql/index.js';
import { dropSchema, freshSchema } from '../helpers/sql.js';

/** A database the SQL tests run on: PGlite always, the PostgreSQL server when it answers. */
export interface SqlBackend {
  name: string;
  client: SqlClient;
  /** Only on the server: a pool, for what needs several connections at once. */
  pool?: pg.Pool;
}

/** Runs `body` with an opened storage on a fresh schema, dropped afterwards. */
export function withSqlStorage(backend: SqlBackend, body: (storage: Storage, schema: string) => Promise<void>) {
  return async () => {
    const schema = freshSchema();
    const storage = sqlStorage({ client: backend.client, schema });
    await storage.open!();
    try {
      await body(storage, schema);
    } finally {
      await storage.close!();
      await dropSchema(backend.client, schema);
    }
  };
}

/** Rows of a table in `schema`, read directly: the back channel that does not trust the adapter. */
export async function rowsOf(client: SqlClient, schema: string, table: string, where = 'true'): Promise<Record<string, unknown>[]> {
  return (await client.query(`SELECT * FROM "${schema}"."portal_${table}" WHERE ${where}`)).rows as Record<string, unknown>[];
}

export { agreementRecord, attachmentRecord, eventRecord } from '../conformance/fixtures.js';
