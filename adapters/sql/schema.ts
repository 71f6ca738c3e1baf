/** Every table the adapters create starts with this, so they sit beside a host's own tables. */
const TABLE_PREFIX = 'portal_';

/** Lower case only: an unquoted reference in a hand-written query then finds the same schema. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export interface SqlOptions {
  /**
   * The PostgreSQL schema holding the adapter's tables (default `public`); created when missing.
   * Lower-case letters, digits and `_`, at most 63 characters. Different schemas on one database
   * are fully separate portals.
   */
  schema?: string;
  /**
   * On a `pg.Pool`, send statements as named prepared statements, parsed and planned once per
   * connection (default `true`). Set `false` behind a pooler that cannot keep them (PgBouncer in
   * transaction mode before 1.21).
   */
  preparedStatements?: boolean;
  /**
   * On a `pg.Pool`, how long a statement waits for a database that refuses connections or is
   * restarting, trying again with backoff, before its request is answered 503 (default 10 000 ms;
   * `0` answers at once). A statement that may already have taken effect when its connection
   * broke is never run again: that request is answered 503 at once.
   */
  waitForDatabaseMs?: number;
}

/** A schema name checked once, and the qualified, quoted table names built from it. */
export interface Names {
  schema: string;
  /** `"schema"` */
  quotedSchema: string;
  /** `"schema"."portal_<name>"` */
  table(name: string): string;
}

export function resolveNames(options: SqlOptions, who: string): Names {
  const schema = options.schema ?? 'public';
  if (typeof schema !== 'string' || !SCHEMA_NAME.test(schema)) {
    throw new TypeError(
      `${who}: schema ${JSON.stringify(schema)} must be 1–63 lower-case letters, digits or underscores, not starting with a digit`,
    );
  }
  const quotedSchema = `"${schema}"`;
  return { schema, quotedSchema, table: (name) => `${quotedSchema}."${TABLE_PREFIX}${name}"` };
}

/** A timestamptz column as an ATOM string, computed by the server: no driver's date parsing involved. */
export const atomOf = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')`;
