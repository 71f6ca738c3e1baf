/**
 * Retention (`removeExpired` of src/domain/retention.ts): a generation's partitions dropped whole
 * once every record in them is past the host's `retention` (see partitions.ts), oldest first.
 *
 * - The log's partition of generation g goes once its latest delivery was made before the
 *   deliveries' time. Its deliveries were made with their events, so the generation's events tell
 *   when, learnt once it is closed (`until`); a delivery a recovery made later in it keeps the
 *   partition longer (`log_until`, learnt when a drop finds it).
 * - The events' partition of g goes once its latest event is past the events' time and the log's
 *   partition of g is gone or empty (a finished delivery that is kept keeps its event). An event a
 *   pending delivery names, or a delivery kept in the log's default partition, is copied to the
 *   events' default partition first: never dropped.
 * - The default partitions hold few rows (see partitions.ts); theirs go one by one, oldest first.
 *
 * A drop reads the partition under a lock of it alone, then holds the parent's ACCESS EXCLUSIVE lock
 * only to detach it, copy what is kept and drop it (see `drop`); waiting longer than DDL_LOCK_TIMEOUT
 * for any lock, the pass gives up and the next tick tries again. Instances take turns with the
 * rotation (partitions.ts, takeGenerationsTurn): the later finds the partition gone.
 */
import type { Storage } from '../../../src/ports.js';
import type { Db, Queryable } from '../client.js';
import type { Names } from '../schema.js';
import {
  DDL_LOCK_TIMEOUT,
  type Generation,
  type History,
  LOCK_NOT_AVAILABLE,
  attachedGenerations,
  partitionTable,
  takeGenerationsTurn,
} from './partitions.js';

/** A time as milliseconds, as the statements below answer it: NULL and -infinity are -Infinity. */
const msOf = (value: unknown) => (value === null || value === undefined ? -Infinity : Number(value));
const ms = (column: string) => `(extract(epoch FROM ${column}) * 1000)::float8`;

/** PostgreSQL's undefined_table: a partition another instance dropped since this pass looked. */
const UNDEFINED_TABLE = '42P01';

/** `read`'s answer, or `gone` when the partition it reads was dropped meanwhile. */
async function unlessDropped<T>(read: Promise<T>, gone: T): Promise<T> {
  try {
    return await read;
  } catch (error) {
    if ((error as { code?: string }).code === UNDEFINED_TABLE) return gone;
    throw error;
  }
}

export function createRetention(db: Db, names: Names): Pick<Storage, 'removeExpired'> {
  const { table } = names;
  const partition = (history: History, gen: Generation) => partitionTable(names, history, gen);
  // The closed generations with a partition still attached (one whose partitions went stays a row).
  const attached = (history: History) =>
    `to_regclass(format('%I.%I', ${`'${names.schema}'`}, 'portal_${history}_g' || gen)) IS NOT NULL`;
  const closed = `SELECT gen, ${ms('until')} AS until, ${ms('log_until')} AS log_until, until IS NULL AS unknown
    FROM ${table('generations')}
    WHERE gen < (SELECT max(gen) FROM ${table('generations')}) AND (${attached('events')} OR ${attached('deliveries')})
    ORDER BY gen`;
  // A closed generation's latest event (-infinity: none), learnt once by a scan of its partition.
  const learnUntil = (gen: number) => `UPDATE ${table('generations')}
    SET until = coalesce((SELECT max(created_at) FROM ${partition('events', gen)}), '-infinity')
    WHERE gen = ${gen}
    RETURNING ${ms('until')} AS until`;
  // A later record than was learnt, found by a drop: of its events (`until`) or of its log (`log_until`).
  const learnt = (column: 'until' | 'log_until') =>
    `UPDATE ${table('generations')} SET ${column} = to_timestamp($2::float8 / 1000) WHERE gen = $1::int`;
  // What a default partition keeps past its time goes a row at a time, oldest first, each once across
  // instances (SKIP LOCKED). A pending row in the log is one a release before the queue stored, for
  // the claim to adopt.
  const logStragglers = `WITH doomed AS (
      SELECT id FROM ${partition('deliveries', 'default')}
      WHERE status <> 'pending' AND created_at < $1::timestamptz
      ORDER BY created_at LIMIT $2::int
      FOR UPDATE SKIP LOCKED
    ), gone AS (DELETE FROM ${partition('deliveries', 'default')} AS d USING doomed WHERE d.id = doomed.id RETURNING 1)
    SELECT count(*)::int AS removed FROM gone`;
  const eventStragglers = `WITH doomed AS (
      SELECT e.id FROM ${partition('events', 'default')} AS e
      WHERE e.created_at < $1::timestamptz
        AND NOT EXISTS (SELECT 1 FROM ${table('queue')} AS q WHERE q.event_id = e.id)
        AND NOT EXISTS (SELECT 1 FROM ${table('delivery_queue')} AS q WHERE q.event_id = e.id)
        AND NOT EXISTS (SELECT 1 FROM ${table('deliveries')} AS d WHERE d.event_id = e.id)
      ORDER BY e.created_at LIMIT $2::int
      FOR UPDATE SKIP LOCKED
    ), gone AS (DELETE FROM ${partition('events', 'default')} AS e USING doomed WHERE e.id = doomed.id RETURNING 1)
    SELECT count(*)::int AS removed FROM gone`;
  const anyIn = (name: string) => `SELECT EXISTS (SELECT 1 FROM ${name}) AS any`;

  /**
   * Drops the partition of `gen` when its latest record was made before `cutoff` (ms): resolves how
   * many records went, the latest one's time when it is too recent, `kept` when (events) the log's
   * partition of `gen` holds a delivery, or nothing when a lock was not had or the partition is gone.
   *
   * The partition is read (counted, its latest record found: one scan) under a SHARE lock of it
   * alone, which stops what would be stored in it (a delivery of its generation finished now) and
   * nothing else: publishes, claims and records of other generations go on. The parent's ACCESS
   * EXCLUSIVE lock, which every one of them waits for, is then held only to detach the partition,
   * copy the events the queue still names (read from the queue, not the partition: see
   * keepNamedEvents) and drop it. An events partition is dropped with the log's parent locked too
   * (SHARE: no delivery is logged meanwhile), so that a delivery recorded as the pass looked cannot
   * land in the log's partition of `gen` after it was found empty, naming an event that goes.
   */
  async function drop(
    history: History,
    gen: number,
    cutoff: number,
  ): Promise<{ removed: number } | { newest: number } | 'kept' | null> {
    const parent = table(history);
    const part = partition(history, gen);
    try {
      return await db.transaction(async (tx) => {
        await tx.query(DDL_LOCK_TIMEOUT);
        await takeGenerationsTurn(tx, names);
        if (!(await attachedGenerations(tx, names, history)).has(gen)) return null;
        await tx.query(`LOCK TABLE ${part} IN SHARE MODE`);
        const [seen] = await tx.query(`SELECT count(*)::int AS count, ${ms('max(created_at)')} AS newest FROM ${part}`);
        const newest = msOf(seen!.newest);
        if (newest >= cutoff) return { newest };
        // The log before the events, in the order a claim locks them (it logs the deliveries of
        // disabled webhooks before it joins the events): the other order deadlocks with a claim.
        if (history === 'events') await tx.query(`LOCK TABLE ONLY ${table('deliveries')} IN SHARE MODE`);
        await tx.query(`LOCK TABLE ONLY ${parent} IN ACCESS EXCLUSIVE MODE`);
        if (history === 'events') {
          const logs = await attachedGenerations(tx, names, 'deliveries');
          if (logs.has(gen) && (await hasRows(tx, partition('deliveries', gen)))) return 'kept';
        }
        await tx.query(`ALTER TABLE ${parent} DETACH PARTITION ${part}`);
        const kept = history === 'events' ? await keepNamedEvents(tx, part, gen) : 0;
        await tx.query(`DROP TABLE ${part}`);
        return { removed: Number(seen!.count) - kept };
      });
    } catch (error) {
      // A lock not had in time; or the partition dropped since it was found attached, by an
      // instance of a release that drops without taking the turn.
      const code = (error as { code?: string }).code;
      if (code === LOCK_NOT_AVAILABLE || code === UNDEFINED_TABLE) return null;
      throw error;
    }
  }

  /**
   * The events of a detached partition of generation `gen` that a pending delivery, or a delivery
   * in the log's default partition, names: copied to the parent, which has no partition for their
   * generation now, so into its default one. Found from the deliveries of that generation (each
   * carries its event's), each event then read by its id: the work grows with the queue, not with
   * the generation, under the parent's lock (no claim or recovery reads the events meanwhile).
   */
  async function keepNamedEvents(tx: Queryable, part: string, gen: number): Promise<number> {
    const [row] = await tx.query(
      `WITH named AS (
        SELECT DISTINCT n.event_id FROM (
          SELECT q.event_id FROM ${table('queue')} AS q WHERE q.event_gen = $1::int
          UNION ALL
          -- Queued by an instance of the release before the ring, not adopted yet.
          SELECT q.event_id FROM ${table('delivery_queue')} AS q WHERE q.event_gen = $1::int
          UNION ALL
          SELECT d.event_id FROM ${partition('deliveries', 'default')} AS d WHERE d.event_gen = $1::int
        ) AS n
      ), kept AS (
        INSERT INTO ${table('events')}
        SELECT e.* FROM named CROSS JOIN LATERAL (SELECT * FROM ${part} AS p WHERE p.id = named.event_id) AS e
        RETURNING 1
      ) SELECT count(*)::int AS kept FROM kept`,
      [gen],
    );
    return Number(row!.kept);
  }

  const hasRows = async (on: Queryable, name: string) => (await on.query(anyIn(name)))[0]!.any === true;

  /**
   * Rows of a default partition past their time, when it holds any: the rest of a pass's `limit`.
   * Events under the events' parent locked EXCLUSIVE: a recovery (which holds it ROW SHARE) that
   * read an event here is waited for, and its deliveries then name the event.
   */
  async function stragglers(history: History, statement: string, at: string, limit: number): Promise<number> {
    if (limit <= 0 || !(await hasRows(db, partition(history, 'default')))) return 0;
    try {
      return await db.transaction(async (tx) => {
        await tx.query(DDL_LOCK_TIMEOUT);
        if (history === 'events') await tx.query(`LOCK TABLE ONLY ${table('events')} IN EXCLUSIVE MODE`);
        return Number((await tx.query(statement, [at, limit]))[0]!.removed);
      });
    } catch (error) {
      if ((error as { code?: string }).code === LOCK_NOT_AVAILABLE) return 0;
      throw error;
    }
  }

  return {
    async removeExpired(before, limit) {
      const removed = { deliveries: 0, events: 0 };
      if (before.deliveries === null && before.events === null) return removed;
      const generations = await db.query(closed);
      if (generations.length > 0) {
        const logs = await attachedGenerations(db, names, 'deliveries');
        const events = await attachedGenerations(db, names, 'events');
        for (const generation of generations) {
          if (generation.unknown !== true || !events.has(Number(generation.gen))) continue;
          const [row] = await unlessDropped(db.query(learnUntil(Number(generation.gen)), [], { replayable: true }), []);
          if (row !== undefined) generation.until = row.until;
        }
        if (before.deliveries !== null) {
          const cutoff = Date.parse(before.deliveries);
          for (const generation of generations) {
            const gen = Number(generation.gen);
            if (!logs.has(gen)) continue;
            if (Math.max(msOf(generation.until), msOf(generation.log_until)) >= cutoff) break;
            const outcome = await drop('deliveries', gen, cutoff);
            if (outcome === null || outcome === 'kept') break;
            if ('newest' in outcome) {
              await db.query(learnt('log_until'), [gen, outcome.newest], { replayable: true });
              break;
            }
            logs.delete(gen);
            removed.deliveries += outcome.removed;
            if (removed.deliveries >= limit) break;
          }
        }
        if (before.events !== null) {
          const cutoff = Date.parse(before.events);
          for (const generation of generations) {
            const gen = Number(generation.gen);
            if (!events.has(gen)) continue;
            if (msOf(generation.until) >= cutoff) break;
            // Its finished deliveries are kept: so are the events they name.
            if (logs.has(gen) && (await unlessDropped(hasRows(db, partition('deliveries', gen)), false))) continue;
            const outcome = await drop('events', gen, cutoff);
            if (outcome === 'kept') continue;
            if (outcome === null) break;
            if ('newest' in outcome) {
              // Stored after its latest was learnt (a publish as the generation closed).
              await db.query(learnt('until'), [gen, outcome.newest], { replayable: true });
              break;
            }
            removed.events += outcome.removed;
            if (removed.events >= limit) break;
          }
        }
      }
      if (before.deliveries !== null)
        removed.deliveries += await stragglers(
          'deliveries',
          logStragglers,
          before.deliveries,
          limit - removed.deliveries,
        );
      if (before.events !== null)
        removed.events += await stragglers('events', eventStragglers, before.events, limit - removed.events);
      return removed;
    },
  };
}
