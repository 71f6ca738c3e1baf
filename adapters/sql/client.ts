import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { PortalError, storageUnavailable } from '../../src/errors.js';

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

/**
 * Takes, in transaction `tx`, the advisory lock of `key` within `lockClass` (a 32-bit tag of what is
 * locked); it is released when the transaction ends. Another transaction asking for it waits.
 */
export async function lockWithin(tx: Queryable, lockClass: number, key: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1::int, hashtext($2::text))', [lockClass, key]);
}

/**
 * `replayable`: running the statement twice leaves the same state as running it once (an upsert, a
 * delete by id), so a try whose connection broke with no word from the server may be run again.
 */
interface Replay {
  replayable?: boolean;
  /**
   * For a write that is not replayable but can tell afterwards whether it took effect (rows with
   * ids it chose): after a try whose connection broke with no word from the server, reads what
   * became of it. Resolves the rows the write would have answered when it did take effect, or
   * `null` when it did not, and the write runs again. Without it, such a try is answered 503.
   */
  settle?: () => Promise<Row[] | null>;
}

/** How a transaction's statements are planned, and how it commits. */
export interface Planning {
  /**
   * With sequential and bitmap scans off (`SET LOCAL`): each table is read through an index, in the
   * index's order, whatever its statistics say, or said when a prepared statement's plan was cached
   * (a table just created, or analyzed in the middle of a burst). For a statement every step of
   * which is written to start from an index and stop after a few rows. JIT compilation is off too:
   * such a statement runs in a millisecond or two, and once the planner's estimate of the claim
   * passed `jit_above_cost` (PostgreSQL's default: on, at 100,000), compiling it took 147 ms of each
   * claim. And its plan is the generic one from the first run on (`plan_cache_mode`): left to
   * choose, PostgreSQL planned the fair claim with its parameters five times on every connection,
   * then kept doing so whenever it judged the generic plan dearer than those: 571-703 plans in
   * 3,254-3,430 claims of a two-worker fleet run, up to 25.7 ms each, against 34.
   */
  byIndex?: boolean;
  /**
   * Commits without waiting for the WAL to reach the disk (`synchronous_commit = off`). For a
   * transaction whose every effect, lost with the last fraction of a second of WAL in a crash of the
   * server, is done again by the next one, and whose result is made durable by the flushed commit
   * that follows it: the WAL is written in order, so a later commit that waits for its flush flushes
   * this one too. Other sessions see the commit at once either way.
   */
  unflushedCommit?: boolean;
}

/** The `SET LOCAL` statements of a `Planning`. */
const settingsOf = (planning: Planning | undefined): string[] => [
  ...(planning?.byIndex === true
    ? [
        'SET LOCAL enable_seqscan = off',
        'SET LOCAL enable_bitmapscan = off',
        'SET LOCAL jit = off',
        'SET LOCAL plan_cache_mode = force_generic_plan',
      ]
    : []),
  ...(planning?.unflushedCommit === true ? ['SET LOCAL synchronous_commit = off'] : []),
];

export interface Db {
  query(text: string, params?: unknown[], options?: Replay): Promise<Row[]>;
  /**
   * Runs `work` in one transaction: committed when it resolves, rolled back when it throws. On a
   * pool, `work` runs again when the connection breaks before COMMIT, or when a COMMIT that went
   * unanswered turns out not to have landed: it must do nothing but statements on `tx`.
   */
  transaction<T>(work: (tx: Queryable) => Promise<T>, planning?: Planning): Promise<T>;
}

/** A connection checked out of a `pg.Pool`: an `EventEmitter` reporting a connection the server ended. */
interface PooledClient extends SqlClient {
  release(error?: Error | boolean): void;
  on?(event: 'error', listener: (error: Error) => void): unknown;
  off?(event: 'error', listener: (error: Error) => void): unknown;
}

interface PoolLike extends SqlClient {
  connect(): Promise<PooledClient>;
  totalCount: number;
}

/** pg's query config form, which names a prepared statement. */
interface NamedQuery {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
}

interface TransactionLike extends SqlClient {
  transaction<T>(work: (tx: SqlClient) => Promise<T>): Promise<T>;
}

export function isPool(client: SqlClient): client is PoolLike {
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
export function wrapClient(client: SqlClient, who: string, prepare = true, waitForDatabaseMs = 10_000): Db {
  if (client === null || typeof client !== 'object' || typeof client.query !== 'function') {
    throw new TypeError(`${who}: \`client\` must have a query(text, params) method (a pg.Pool or a PGlite instance)`);
  }
  if (typeof waitForDatabaseMs !== 'number' || !(waitForDatabaseMs >= 0)) {
    throw new TypeError(`${who}: \`waitForDatabaseMs\` must be a number of milliseconds, 0 or more`);
  }
  const db = isPool(client)
    ? poolDb(client, prepare, waitForDatabaseMs)
    : hasTransaction(client)
      ? transactionDb(client)
      : singleConnectionDb(client);
  return {
    query: (text, params, options) => db.query(text, params, options).catch(rethrowAsRecordExists),
    transaction: (work, planning) => db.transaction(work, planning).catch(rethrowAsRecordExists),
  };
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

/**
 * Errors after which the statement certainly did not take effect: the connection was refused or
 * not yet accepted (server down, starting, shutting down, full), or the server ended the session
 * under it (`57P01`/`57P02`: the statement is aborted and its transaction rolled back; a commit
 * that completed is reported as such before the session ends).
 */
const NOT_APPLIED = new Set(['ECONNREFUSED', 'ENOENT', '57P01', '57P02', '57P03', '53300', '08001', '08004']);
/** The connection broke with no word from the server: whatever was in flight may or may not have taken effect. */
const CONNECTION_LOST = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', '08000', '08003', '08006']);

function failure(error: unknown): 'not-applied' | 'lost' | null {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && NOT_APPLIED.has(code)) return 'not-applied';
  if (typeof code === 'string' && CONNECTION_LOST.has(code)) return 'lost';
  // node-postgres reports a socket closed under a query, or a client it could not use, by message only.
  if (typeof message === 'string' && /Connection terminated|not queryable/.test(message)) return 'lost';
  return null;
}

/**
 * A unique violation (SQLSTATE 23505) as the catalogue's `RECORD_EXISTS`, as every adapter reports an
 * insert of an id it holds; the key comes from the server's detail, `Key (id)=(wbh_…) already exists.`
 */
function rethrowAsRecordExists(error: unknown): never {
  const { code, detail } = error as { code?: unknown; detail?: unknown };
  if (code !== '23505') throw error;
  const key = typeof detail === 'string' ? /\)=\((.*)\) already exists/.exec(detail)?.[1] : undefined;
  const exists = new PortalError('RECORD_EXISTS', key ?? 'unknown');
  exists.cause = error;
  throw exists;
}

/** A statement that reads only: running it again is harmless whatever happened to the first try. */
const READ_ONLY = /^\s*SELECT\b/i;

const MAY_HAVE_APPLIED =
  'The database connection was lost while the change was being saved: it may or may not have been applied';

/**
 * Runs `attempt`, and again while the database is unreachable, for up to `waitMs`: a restart or a
 * failover then costs the request a wait instead of an error. Pauses double from 50 ms to 1 s, the
 * last one cut short so that a try falls at the deadline: an unreachable database is given the
 * whole wait, however long each try took. `replayable` says whether a try that
 * failed may be run again (by default every one may); one that may have taken effect is not, and
 * is answered 503 at once. `unsettled` says whether, at the deadline, an earlier try may still
 * have taken effect.
 */
async function untilReachable<T>(
  waitMs: number,
  attempt: () => Promise<T>,
  replayable: (kind: 'not-applied' | 'lost') => boolean = () => true,
  unsettled: () => boolean = () => false,
): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (let pause = 50; ; pause = Math.min(pause * 2, 1000)) {
    try {
      return await attempt();
    } catch (error) {
      const kind = failure(error);
      if (kind === null) throw error;
      if (!replayable(kind)) throw storageUnavailable(MAY_HAVE_APPLIED, { cause: error });
      const left = deadline - Date.now();
      if (left <= 0) {
        const message = unsettled()
          ? MAY_HAVE_APPLIED
          : 'The database is unavailable; nothing was changed, try again shortly';
        throw storageUnavailable(message, { cause: error });
      }
      await sleep(Math.min(pause, left));
    }
  }
}

/**
 * Opens a transaction, sets its planning, and learns its id, in one round trip: the id is what
 * `txid_status` is asked about if COMMIT goes unanswered.
 */
const begin = (planning: Planning | undefined) =>
  ['BEGIN', ...settingsOf(planning), 'SELECT txid_current()::text AS xid'].join('; ');

function poolDb(pool: PoolLike, prepare: boolean, waitMs: number): Db {
  type Run = (text: string, params?: unknown[]) => Promise<Row[]>;
  const runOn = (target: SqlClient): Run =>
    prepare
      ? (text, params) =>
          // Statements without parameters (DDL of the migrations, the sweep) run once: not worth a name.
          params === undefined || params.length === 0
            ? rowsOf(target.query(text, params))
            : rowsOf((target as unknown as NamedQuery).query({ name: statementName(text), text, values: params }))
      : (text, params) => rowsOf(target.query(text, params));
  const direct = runOn(pool);

  /** Whether transaction `xid` committed: true, false (aborted: it never will), or null while the server cannot tell yet. */
  async function committed(xid: string): Promise<boolean | null> {
    const [row] = await rowsOf(pool.query('SELECT txid_status($1::bigint) AS status', [xid]));
    const status = row?.status;
    if (status === 'committed') return true;
    if (status === 'aborted') return false;
    if (status === 'in progress') return null;
    // Too old to be known, which a transaction seconds old cannot be.
    throw new Error(`txid_status(${xid}) answered ${String(status)}`);
  }

  /** A write with `settle`: a lost try is settled by asking what became of it, then answered or run again. */
  function settledQuery(
    text: string,
    params: unknown[] | undefined,
    settle: () => Promise<Row[] | null>,
  ): Promise<Row[]> {
    let unsettled = false;
    return untilReachable(
      waitMs,
      async () => {
        if (unsettled) {
          const rows = await settle();
          if (rows !== null) return rows;
          unsettled = false;
        }
        try {
          return await direct(text, params);
        } catch (error) {
          if (failure(error) === 'lost') unsettled = true;
          throw error;
        }
      },
      () => true,
      () => unsettled,
    );
  }

  return {
    query: (text, params, options) =>
      options?.settle !== undefined
        ? settledQuery(text, params, options.settle)
        : untilReachable(
            waitMs,
            () => direct(text, params),
            (kind) => kind === 'not-applied' || options?.replayable === true || READ_ONLY.test(text),
          ),
    transaction<T>(work: (tx: Queryable) => Promise<T>, planning?: Planning): Promise<T> {
      // Every broken try may run again: one broken before COMMIT was sent was rolled back by the
      // server, and one whose COMMIT went unanswered is first settled by asking the server what
      // became of its transaction id.
      let committing = false;
      let unanswered: { xid: string; result: T } | null = null;
      const deadline = Date.now() + waitMs;
      return untilReachable(
        waitMs,
        async () => {
          while (unanswered !== null) {
            const outcome = await committed(unanswered.xid);
            if (outcome === true) return unanswered.result;
            if (outcome === false) unanswered = null;
            // Still open on a session the server has not noticed is gone: only the deadline settles it.
            else if (Date.now() > deadline) throw storageUnavailable(MAY_HAVE_APPLIED);
            else await sleep(50);
          }
          committing = false;
          const connection = await pool.connect();
          let broken: Error | undefined;
          // The server ending the session between two statements is reported as an 'error' event
          // on the checked-out connection, which would crash the process unheard; the next
          // statement on it fails and says so.
          const lostBetweenStatements = (error: Error) => (broken = error);
          connection.on?.('error', lostBetweenStatements);
          let xid: string | undefined;
          let result: T | undefined;
          try {
            const opened = (await connection.query(begin(planning))) as unknown as { rows: Row[] }[];
            xid = String(opened.at(-1)?.rows[0]?.xid);
            result = await work({ query: runOn(connection) });
            committing = true;
            await connection.query('COMMIT');
            return result;
          } catch (error) {
            if (committing && failure(error) === 'lost') unanswered = { xid: xid!, result: result as T };
            await connection.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
            throw error;
          } finally {
            connection.off?.('error', lostBetweenStatements);
            // A connection whose rollback failed, or that the server ended, is discarded by the pool.
            connection.release(broken ?? false);
          }
        },
        undefined,
        () => unanswered !== null,
      );
    },
  };
}

function transactionDb(client: TransactionLike): Db {
  return {
    query: (text, params) => rowsOf(client.query(text, params)),
    transaction: (work, planning) =>
      client.transaction(async (tx) => {
        // One statement a query: PGlite's query takes no more.
        for (const setting of settingsOf(planning)) await tx.query(setting);
        return work({ query: (text, params) => rowsOf(tx.query(text, params)) });
      }),
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
    transaction: (work, planning) =>
      exclusive(async () => {
        await client.query(['BEGIN', ...settingsOf(planning)].join('; '));
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
