import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import type { SqlClient } from '../../adapters/sql/index.js';
import { sqlBlobs, sqlStorage } from '../../adapters/sql/index.js';
import type { Storage } from '../../src/ports.js';
import type {
  DeliveryRecord,
  EventRecord,
  IdempotencyRecord,
  PortalSessionRecord,
  WebhookHealthRecord,
  WebhookRecord,
} from '../../src/records.js';
import type { BlobStoreFactory, StorageBackChannel, StorageFactory } from '../conformance/types.js';
import { namespacedBlobsFactory } from './blob-factory.js';

/** The local PostgreSQL server the SQL tests use when it answers (CI starts it). */
export const POSTGRES_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** One id per test run: every schema made by this run starts with it, so runs never meet. */
const RUN = `cp_test_${randomBytes(4).toString('hex')}`;
let schemas = 0;

/** A schema name no other test or run uses. */
export const freshSchema = () => `${RUN}_${++schemas}`;

/**
 * Resolves once another session waits for a lock `holder` holds (polled every 5 ms), so that a test
 * commits the holder's change only after the statement it races has read the row and reached it.
 * Rejects after `timeoutMs`: a statement that never waited did not meet the race the test is for.
 */
export async function untilBlockedBy(holder: pg.PoolClient, timeoutMs = 5_000): Promise<void> {
  const [{ pid }] = (await holder.query('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await holder.query(
      'SELECT 1 FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)) LIMIT 1',
      [pid],
    );
    if (rows.length > 0) return;
    if (Date.now() > deadline) throw new Error(`no session waited for backend ${pid} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A pool on the server, or why there is none: unreachable within about two seconds. */
export async function connectPostgres(
  options: pg.PoolConfig = {},
): Promise<{ pool: pg.Pool; reason?: undefined } | { pool?: undefined; reason: string }> {
  const pool = new pg.Pool({
    connectionString: POSTGRES_URL,
    connectionTimeoutMillis: 2000,
    allowExitOnIdle: true,
    ...options,
  });
  pool.on('error', () => {});
  try {
    await pool.query('SELECT 1');
    return { pool };
  } catch (error) {
    await pool.end().catch(() => {});
    return {
      reason: `PostgreSQL at ${POSTGRES_URL} cannot be reached (${(error as Error).message || (error as Error).name})`,
    };
  }
}

/**
 * An in-memory PGlite. Under `npm test` it starts from the data directory the runner made once for
 * the run (`CP_TEST_PGLITE_DATA`, a fresh cluster, gzipped): loading it costs a third of an initdb.
 */
export async function openPglite(): Promise<PGlite> {
  const data = process.env.CP_TEST_PGLITE_DATA;
  const db =
    data !== undefined && existsSync(data) ? new PGlite({ loadDataDir: new Blob([readFileSync(data)]) }) : new PGlite();
  await db.waitReady;
  return db;
}

export async function dropSchema(client: SqlClient, schema: string): Promise<void> {
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

/** Drops every schema this run made on `client` (the ones a failed test left behind too). */
export async function dropRunSchemas(client: SqlClient): Promise<void> {
  const { rows } = await client.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE $1`, [`${RUN}\\_%`]);
  for (const row of rows as { nspname: string }[]) await dropSchema(client, row.nspname);
}

/**
 * Migrated schemas tests gave back, emptied, for the next test to take: a schema made and migrated
 * costs hundreds of milliseconds of the database's time (PGlite: 160 ms of this process's CPU), one
 * emptied and reopened about ten. A schema whose shape a test changed (a table, a column, an index, a
 * migration record, a partition) is dropped instead of kept. The generations stay as migrated: a
 * test that started one made a partition, and its schema is dropped.
 *
 * Under the runner (`scripts/test.mjs`), which gives the run a database of its own and sets
 * `CP_TEST_SHARED_SCHEMAS`, spares on the PostgreSQL server are shared by every process of the run:
 * a spare is a schema named `cp_spare_…`, and a test takes one by renaming it to a name of its own
 * (two processes after the same spare: the second finds it gone and tries the next). PGlite's data
 * directory, made once for the run, holds spares of its own (`prepareSpares`). Elsewhere a process
 * keeps its spares to itself, so a database shared with other work is left as found.
 */
const SPARE = 'cp_spare_';
const sharedSpares = process.env.CP_TEST_SHARED_SCHEMAS === '1';
const spares = new WeakMap<SqlClient, string[]>();
/** The shape of a schema freshly migrated with each set of components, by client. */
const pristine = new WeakMap<SqlClient, Map<string, Promise<string>>>();

/** A server's pool, as opposed to PGlite (one per process, with spares found in its data directory). */
const onServer = (client: SqlClient) => !(client instanceof PGlite);

/** A schema for one test: one given back by an earlier test, emptied and migrated, or a fresh name. */
export async function takeSchema(client: SqlClient): Promise<string> {
  const local = spares.get(client)?.pop();
  if (local !== undefined) return local;
  if (sharedSpares || !onServer(client)) {
    const { rows } = await client.query(
      `SELECT nspname FROM pg_namespace WHERE nspname LIKE '${SPARE.replaceAll('_', '\\_')}%' ORDER BY random() LIMIT 4`,
    );
    for (const { nspname } of rows as { nspname: string }[]) {
      const schema = freshSchema();
      try {
        await client.query(`ALTER SCHEMA "${nspname}" RENAME TO "${schema}"`);
        return schema;
      } catch (error) {
        // Taken by another process since the list was read.
        if ((error as { code?: string }).code !== '3F000') throw error;
      }
    }
  }
  return freshSchema();
}

/** Ends a test's use of `schema`: emptied and kept for the next `takeSchema` when its shape is untouched, else dropped. */
export async function giveBackSchema(client: SqlClient, schema: string): Promise<void> {
  const components = await componentsOf(client, schema);
  if (
    components !== null &&
    (await shapeOf(client, schema)).replaceAll(schema, '') === (await pristineShape(client, components))
  ) {
    const { rows } = await client.query(
      `SELECT tablename FROM pg_tables WHERE schemaname = $1::text
        AND tablename NOT IN ('portal_migrations', 'portal_generations', 'portal_queue_ring', 'portal_queue_intact')`,
      [schema],
    );
    const tables = (rows as { tablename: string }[]).map(({ tablename }) => `"${schema}"."${tablename}"`);
    // One statement: the foreign keys between the tables are checked at its end, when all are empty.
    // The ring as migrated: slot 0 current from now, the others empty, its slots intact.
    const ring = components.split(',').includes('storage')
      ? `, ring AS (UPDATE "${schema}".portal_queue_ring SET state = CASE WHEN slot = 0 THEN 'current' ELSE 'empty' END,
          opened_at = CASE WHEN slot = 0 THEN now() END, closed_at = NULL),
        intact AS (INSERT INTO "${schema}".portal_queue_intact VALUES (true) ON CONFLICT DO NOTHING)`
      : '';
    await client.query(
      `WITH ${tables.map((table, i) => `d${i} AS (DELETE FROM ${table})`).join(', ')}${ring} SELECT 1`,
    );
    if (sharedSpares && onServer(client)) {
      await client.query(`ALTER SCHEMA "${schema}" RENAME TO "${SPARE}${randomBytes(6).toString('hex')}"`);
      return;
    }
    let list = spares.get(client);
    if (list === undefined) spares.set(client, (list = []));
    list.push(schema);
    return;
  }
  await dropSchema(client, schema);
}

/**
 * @public the test runner (scripts/test.mjs) calls it from the compiled file.
 *
 * Makes `count` spares with the storage and blob tables on `client` (PGlite, before its data
 * directory is saved for the run), and notes their shape in the run's directory for every process
 * to compare against.
 */
export async function prepareSpares(client: SqlClient, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const schema = `${SPARE}${randomBytes(6).toString('hex')}`;
    for (const store of [sqlStorage({ client, schema }), sqlBlobs({ client, schema })]) {
      await store.open!();
      await store.close!();
    }
    await pristineShape(client, 'blobs,storage');
  }
}

/** The components migrated into `schema` (`storage`, `blobs`), or `null` when it has no migration table. */
async function componentsOf(client: SqlClient, schema: string): Promise<string | null> {
  const exists = await client.query(
    `SELECT 1 FROM pg_tables WHERE schemaname = $1::text AND tablename = 'portal_migrations'`,
    [schema],
  );
  if (exists.rows.length === 0) return null;
  const found = await client.query(
    `SELECT string_agg(DISTINCT component, ',' ORDER BY component) AS components FROM "${schema}".portal_migrations`,
  );
  return (found.rows[0] as { components: string | null }).components ?? null;
}

/** What a schema holds, as one text: its relations' columns and types, and its migration records. */
async function shapeOf(client: SqlClient, schema: string): Promise<string> {
  const { rows } = await client.query(
    `SELECT
      (SELECT string_agg(c.relname || '.' || a.attname || ':' || a.atttypid::text || ':' || a.attnotnull::text, ','
          ORDER BY c.relname, a.attnum)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE n.nspname = $1::text)
      || '|' || (SELECT string_agg(component || ':' || version::text, ',' ORDER BY component, version)
        FROM "${schema}".portal_migrations) AS shape`,
    [schema],
  );
  return (rows[0] as { shape: string }).shape;
}

/**
 * The shape of a schema freshly migrated with `components` (a comma-separated list) on `client`:
 * read from the run's directory when a process of the run noted it there, else made, migrated,
 * read and dropped once per client.
 */
function pristineShape(client: SqlClient, components: string): Promise<string> {
  let shapes = pristine.get(client);
  if (shapes === undefined) pristine.set(client, (shapes = new Map()));
  let shape = shapes.get(components);
  if (shape === undefined) shapes.set(components, (shape = noted(client, components)));
  return shape;
}

async function noted(client: SqlClient, components: string): Promise<string> {
  const runDir = process.env.CP_TEST_RUN_DIR;
  const file =
    runDir === undefined
      ? undefined
      : path.join(runDir, `shape-${onServer(client) ? 'server' : 'pglite'}-${components}.txt`);
  if (file !== undefined && existsSync(file)) return readFileSync(file, 'utf8');
  const shape = await migratedShape(client, components);
  if (file !== undefined) {
    writeFileSync(`${file}.${process.pid}`, shape);
    renameSync(`${file}.${process.pid}`, file);
  }
  return shape;
}

/** The shape of a schema made now and migrated with `components`, then dropped. */
async function migratedShape(client: SqlClient, components: string): Promise<string> {
  const schema = freshSchema();
  try {
    for (const store of [
      components.split(',').includes('storage') ? sqlStorage({ client, schema }) : null,
      components.split(',').includes('blobs') ? sqlBlobs({ client, schema }) : null,
    ]) {
      if (store === null) continue;
      await store.open!();
      await store.close!();
    }
    // A name of its own in every relation name is the schema's, not its shape: compared without it.
    return (await shapeOf(client, schema)).replaceAll(schema, '');
  } finally {
    await dropSchema(client, schema);
  }
}

const schemaOf = new WeakMap<object, string>();

/** A timestamptz column as ATOM, computed by the server, under the record's (camelCase) key. */
const atom = (column: string, key: string) =>
  `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"') AS "${key}"`;

/**
 * The back-channel to the tables in `schema`: plain SQL written here, column by column, so no read
 * of the adapter's (statement or row reader) stands between a test and what the tables hold.
 */
export function sqlBackChannel(client: SqlClient, schema: string): StorageBackChannel {
  const one = async (table: string, columns: string, id: string) => {
    const { rows } = await client.query(`SELECT ${columns} FROM "${schema}".portal_${table} WHERE id = $1::text`, [id]);
    return (rows[0] ?? null) as Record<string, unknown> | null;
  };
  return {
    async event(id) {
      const row = await one(
        'events',
        `id, account_id AS "accountId", type, ${atom('created_at', 'createdAt')}, data::text AS data, ordering_key AS "orderingKey"`,
        id,
      );
      if (row === null) return null;
      const { orderingKey, ...rest } = row;
      const event = { ...rest, data: rest.data === null ? null : JSON.parse(rest.data as string) } as EventRecord;
      return orderingKey === null ? event : { ...event, orderingKey: orderingKey as string };
    },
    async delivery(id) {
      const columns = `id, account_id AS "accountId", webhook_id AS "webhookId", event_id AS "eventId", event_type AS "eventType", status, attempts::text AS attempts, attempt_count AS "attemptCount",
        ${atom('next_attempt_at', 'nextAttemptAt')}, ${atom('created_at', 'createdAt')}, lease_owner AS "leaseOwner", ${atom('lease_until', 'leaseUntil')}, redeliver_queued AS "redeliverQueued", ordering_key AS "orderingKey"`;
      // Pending in the queue, finished in the log.
      const row = (await one('queue', columns, id)) ?? (await one('deliveries', columns, id));
      return row && ({ ...row, attempts: JSON.parse(row.attempts as string) } as DeliveryRecord);
    },
    async webhook(id) {
      const columns = `id, account_id AS "accountId", type, url, secret, ${atom('created_at', 'createdAt')},
        previous_secret AS "previousSecret", ${atom('previous_secret_until', 'previousSecretUntil')}, filter::text AS filter,
        rate_limit AS "rateLimit"`;
      const row = await one('webhooks', columns, id);
      if (row === null) return null;
      // The rotation fields, the filter and the rate limit are left out of a record that has none, as every store leaves them out.
      const { previousSecret, previousSecretUntil, filter, rateLimit, ...rest } = row;
      const rotated = previousSecret === null ? rest : { ...rest, previousSecret, previousSecretUntil };
      const filtered = filter === null ? rotated : { ...rotated, filter: JSON.parse(filter as string) };
      return (rateLimit === null ? filtered : { ...filtered, rateLimit }) as unknown as WebhookRecord;
    },
    async idempotencyKey(accountId, key) {
      const { rows } = await client.query(
        `SELECT account_id, key, status, token, fingerprint, answer_status, answer_body, answer_location,
          ${atom('created_at', 'createdAt')}, ${atom('expires_at', 'expiresAt')}
        FROM "${schema}".portal_idempotency_keys WHERE account_id = $1::text AND key = $2::text AND status = 'completed'`,
        [accountId, key],
      );
      const row = rows[0] as Record<string, any> | undefined;
      if (row === undefined) return null;
      return {
        accountId: row.account_id,
        key: row.key,
        status: row.status,
        token: row.token,
        fingerprint: row.fingerprint,
        answer: { status: row.answer_status, body: row.answer_body, location: row.answer_location },
        createdAt: row.createdAt,
        expiresAt: row.expiresAt,
      } as IdempotencyRecord;
    },
    async health(webhookId) {
      const { rows } = await client.query(
        `SELECT webhook_id AS id, account_id AS "accountId", consecutive_failures AS "consecutiveFailures",
          ${atom('failing_since', 'failingSince')}, ${atom('last_success_at', 'lastSuccessAt')}, ${atom('last_attempt_at', 'lastAttemptAt')},
          ${atom('disabled_at', 'disabledAt')}, disabled_reason AS "disabledReason", ${atom('held_until', 'heldUntil')},
          in_flight_limit AS "inFlightLimit"
        FROM "${schema}".portal_webhook_health WHERE webhook_id = $1::text`,
        [webhookId],
      );
      return (rows[0] ?? null) as WebhookHealthRecord | null;
    },
    async session(id) {
      const columns = `id, account_id AS "accountId", secret_hash AS "secretHash", scopes, read_only AS "readOnly",
        ${atom('created_at', 'createdAt')}, ${atom('expires_at', 'expiresAt')}, ${atom('revoked_at', 'revokedAt')}`;
      return (await one('sessions', columns, id)) as PortalSessionRecord | null;
    },
  };
}

/** Conformance factories: each store on a schema of its own (`takeSchema`), given back when destroyed. */
export function sqlStorageFactory(name: string, client: SqlClient): StorageFactory {
  const open = async (schema: string) => {
    const storage = sqlStorage({ client, schema });
    await storage.open!();
    schemaOf.set(storage, schema);
    return storage;
  };
  return {
    name,
    create: async () => open(await takeSchema(client)),
    async destroy(storage: Storage) {
      await storage.close!();
      await giveBackSchema(client, schemaOf.get(storage)!);
    },
    async reopen(storage: Storage) {
      await storage.close!();
      return open(schemaOf.get(storage)!);
    },
    db: (storage: Storage) => sqlBackChannel(client, schemaOf.get(storage)!),
  };
}

export function sqlBlobsFactory(name: string, client: SqlClient): BlobStoreFactory {
  return namespacedBlobsFactory(name, {
    fresh: () => takeSchema(client),
    async open(schema, clock) {
      const blobs = sqlBlobs({ client, schema, clock });
      await blobs.open!();
      return blobs;
    },
    drop: (schema) => giveBackSchema(client, schema),
  });
}
