import { type Db, type Queryable, lockWithin } from './client.js';
import type { Names } from './schema.js';

/** One step of a component's schema, applied once, in order, and recorded. */
export interface Migration {
  version: number;
  name: string;
  /** The statements, given the qualified table names; run in the migrating transaction. */
  statements(names: Names): string[];
}

/** First key of the advisory lock: 'cpor' in ASCII, so it is unlikely to meet a host's own locks. */
const LOCK_CLASS = 0x63706f72;

/**
 * Brings `component` (storage or blobs) up to its last migration, in one transaction under a
 * transaction-scoped advisory lock keyed by the schema: a second instance starting at the same time
 * waits for the first to commit, then finds nothing left to do. DDL in PostgreSQL is transactional,
 * so a failed migration leaves the previous version whole.
 */
export async function migrate(
  db: Db,
  names: Names,
  component: string,
  migrations: readonly Migration[],
): Promise<void> {
  await db.transaction(async (tx) => {
    await lockWithin(tx, LOCK_CLASS, names.schema);
    await tx.query(`CREATE SCHEMA IF NOT EXISTS ${names.quotedSchema}`);
    await tx.query(
      `CREATE TABLE IF NOT EXISTS ${names.table('migrations')} (
        component text NOT NULL,
        version integer NOT NULL,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (component, version)
      )`,
    );
    const applied = await appliedVersions(tx, names, component);
    const newest = Math.max(0, ...applied);
    const latest = migrations.at(-1)?.version ?? 0;
    if (newest > latest) {
      throw new Error(
        `The ${component} tables in schema "${names.schema}" are at version ${newest}, newer than this ` +
          `customer-portal knows (${latest}): upgrade customer-portal, or use another schema`,
      );
    }
    // Every version not yet recorded, in order: not only those above the newest, so that a version
    // released out of order (a lower number that landed after a higher one) still runs once.
    for (const migration of migrations) {
      if (applied.has(migration.version)) continue;
      for (const statement of migration.statements(names)) await tx.query(statement);
      await tx.query(
        `INSERT INTO ${names.table('migrations')} (component, version, name) VALUES ($1::text, $2::int, $3::text)`,
        [component, migration.version, migration.name],
      );
    }
  });
}

async function appliedVersions(tx: Queryable, names: Names, component: string): Promise<Set<number>> {
  const rows = await tx.query(`SELECT version FROM ${names.table('migrations')} WHERE component = $1::text`, [
    component,
  ]);
  return new Set(rows.map((row) => Number(row.version)));
}
