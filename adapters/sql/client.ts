import { createHash } from 'node:crypto';

/**
 * What the SQL adapters are handed: anything that runs one parameterized statement. A `pg.Pool`,
 * a `pg.Client` and a PGlite instance all fit. Two more methods are used when present:
 * - `transaction(fn)` (PGlite): runs `fn` in one transaction on its single connection;
 * - `connect()` resolving a client with `release()` (`pg.Pool`): a transaction checks out one
 *   connection, because `BEGIN` sent through the pool could land on a different one than `COMMIT`.
 * Anything else is treated as a single connection: the adapter then runs one statement or
 * transaction at a time on it, so that no statement of one request lands inside another's
 * transaction.
 */
export interface SqlClient {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** A row as a driver returns it: column name to value. Values are narrowed where they are read. */
export type Row = Record<string, unknown>;

/** Runs statements; inside `Db.transaction` every call belongs to that transaction. */
export interface Queryable {
  query(text: string, params?: unknown[]): Promise<Row[]>;
}

export interface Db extends Queryable {
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T>;
}

interface PoolLike extends SqlClient {
  connect(): Promise<SqlClient & { release(error?: Error | boolean): void }>;
  totalCount: number;
}

/** pg's query config form, which names a prepared statement. */
interface NamedQuery {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
}

interface TransactionLike extends SqlClient {
  transaction<T>(work: (tx: SqlClient) => Promise<T>): Promise<T>;
}

function isPool(client: SqlClient): client is PoolLike {
  const candidate = client as Partial<PoolLike>;
  // pg.Client has connect() too, but it opens the connection instead of checking one out.
  return typeof candidate.connect === 'function' && typeof candidate.totalCount === 'number';
}

function hasTransaction(client: SqlClient): client is TransactionLike {
  return typeof (client as Partial<TransactionLike>).transaction === 'function';
}

const rowsOf = async (pending: Promise<{ rows: unknown[] }>) => (await pending).rows as Row[];

/**
 * Wraps what the adapter was handed. Validation happens here, once, not on the request path.
 * `prepare`: on a pool, send each statement as a named prepared statement (pg's `{ name, text,
 * values }`), parsed and planned once per connection instead of on every call.
 */
export function wrapClient(client: SqlClient, who: string, prepare = true): Db {
  if (client === null || typeof client !== 'object' || typeof client.query !== 'function') {
    throw new TypeError(`${who}: \`client\` must have a query(text, params) method (a pg.Pool or a PGlite instance)`);
  }
  if (isPool(client)) return poolDb(client, prepare);
  if (hasTransaction(client)) return transactionDb(client);
  return singleConnectionDb(client);
}

/** Statement names by text: the adapters' statements are built once, so this stays small. */
const statementNames = new Map<string, string>();

function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = 'customer_portal_' + createHash('sha256').update(text).digest('hex').slice(0, 24);
    statementNames.set(text, name);
  }
  return name;
}

function poolDb(pool: PoolLike, prepare: boolean): Db {
  type Run = (text: string, params?: unknown[]) => Promise<Row[]>;
  const runOn = (target: SqlClient): Run =>
    prepare
      ? (text, params) =>
          // Statements without parameters (DDL of the migrations, the sweep) run once: not worth a name.
          params === undefined || params.length === 0
            ? rowsOf(target.query(text, params))
            : rowsOf((target as unknown as NamedQuery).query({ name: statementName(text), text, values: params }))
      : (text, params) => rowsOf(target.query(text, params));
  return {
    query: runOn(pool),
    async transaction(work) {
      const connection = await pool.connect();
      let broken: Error | undefined;
      try {
        await connection.query('BEGIN');
        const result = await work({ query: runOn(connection) });
        await connection.query('COMMIT');
        return result;
      } catch (error) {
        await connection.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
        throw error;
      } finally {
        // A connection whose rollback failed is in an unknown state: the pool discards it.
        connection.release(broken ?? false);
      }
    },
  };
}

function transactionDb(client: TransactionLike): Db {
  return {
    query: (text, params) => rowsOf(client.query(text, params)),
    transaction: (work) => client.transaction((tx) => work({ query: (text, params) => rowsOf(tx.query(text, params)) })),
  };
}

function singleConnectionDb(client: SqlClient): Db {
  let queue: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(run: () => Promise<T>): Promise<T> => {
    const result = queue.then(run);
    queue = result.catch(() => {});
    return result;
  };
  const direct: Queryable = { query: (text, params) => rowsOf(client.query(text, params)) };
  return {
    query: (text, params) => exclusive(() => direct.query(text, params)),
    transaction: (work) =>
      exclusive(async () => {
        await client.query('BEGIN');
        try {
          const result = await work(direct);
          await client.query('COMMIT');
          return result;
        } catch (error) {
          await client.query('ROLLBACK').catch(() => {});
          throw error;
        }
      }),
  };
}
