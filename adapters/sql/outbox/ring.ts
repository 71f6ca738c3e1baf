/**
 * The ring: the queue (`portal_queue`, the deliveries still to make, `isClaimable` and the rest of
 * src/rules/deliveries.ts read from it) and the calls counted since their hour was last written
 * (`portal_call_counts`) are kept in a ring of partitions, one current, each emptied by TRUNCATE
 * once it is done with, so that what a delivery's lease and record leave behind is removed with
 * the partition's file instead of waiting for VACUUM, which a long transaction holds back.
 *
 * - A delivery is stored in the slot current when it is queued, and stays there while its calls
 *   are made; its counts go to the current slot of `portal_call_counts`, appended, never updated.
 * - Every `SLOT_SPAN_MS` the next slot becomes current (`rotate`), once it is empty.
 * - A slot closed `SLOT_SPAN_MS` ago or more is retired (`retire`): its counts are added to their
 *   hours in `portal_webhook_call_stats` and their partition truncated, under a lock of that
 *   partition alone; then what is still pending in its queue partition (a retry, a delivery held by
 *   its key or its webhook, a backlog, a call still in flight) moves once to the kept partition,
 *   where it stays until it finishes, and that partition is truncated.
 * - A delivery moved while its call is in flight is recorded where it is found: the record, the
 *   give-back and the redeliver find a delivery by id, whatever its partition.
 *
 * The slots are UNLOGGED (migration 29): a delivery's insert, lease and delete there write no WAL.
 * What a slot holds is only ever what a publish made and no attempt has touched: an unkeyed
 * delivery not yet tried. Every other delivery goes to the kept partition, which is logged: a keyed
 * one (its place behind its key), one whose attempt is recorded and stays pending (a retry, a
 * redeliver queued during its call), one redelivered, recovered or adopted. Each publish notes what
 * it put in a slot in `portal_queue_made`, logged and partitioned by slot as the queue is: one row
 * a statement, the events' and webhooks' ids, truncated with the slot. A crash of the database
 * server empties the unlogged tables; `portal_queue_intact`, unlogged too, then has lost its row, and
 * the next turn has the deliveries those notes name made again (rebuild.ts).
 *
 * Retirement waits at most `LOCK_TIMEOUT` for its locks (a claim or a record using the slot, a
 * dump reading the table), and not at all while a VACUUM of the slot runs: otherwise it gives up,
 * tries again after a backoff, and the ring stops turning meanwhile, the current slot taking
 * everything as a plain table would. Two slots: every statement that reads or changes the queue
 * through its parent pays for each partition (docs/scaling.md, "The queue in a ring").
 */
import type { Db, Queryable } from '../client.js';
import type { Names } from '../schema.js';
import { LOCK_NOT_AVAILABLE } from './partitions.js';

/** The slots of the ring: partitions 0 … RING_SLOTS - 1. */
const RING_SLOTS = 2;
/** The partition of deliveries that outlived their slot, or were never a slot's: logged. */
export const KEPT_SLOT = -1;
/** How long a slot is current, and how long a closed one waits before it is retired. */
const SLOT_SPAN_MS = 10_000;
/** How often one instance looks at the ring, by the clock its claims are given. */
const TURN_EVERY_MS = 1_000;
/** Deliveries moved a statement when a retired slot holds many (a backlog), before the last lock. */
const MOVE_BATCH = 1_000;
/**
 * A closed slot that still holds more than MOVE_BATCH deliveries (a backlog being drained) waits
 * this long before it is retired: drained meanwhile, its deliveries need not move.
 */
const BACKLOG_WAIT_MS = 3 * SLOT_SPAN_MS;
const LOCK_TIMEOUT = `SET LOCAL lock_timeout = '100ms'`;
/**
 * Sets a retirement's transaction: LOCK_TIMEOUT, and a commit that does not wait for its WAL to be
 * flushed, since the claims queued behind the lock wait for the commit. A retirement is atomic and
 * its own undoing: lost in a crash, its slot is still closed and full, and the next turn does it
 * again; a transaction that saw it and committed flushed it with its own commit.
 */
async function retiring(tx: Queryable): Promise<void> {
  await tx.query(LOCK_TIMEOUT);
  await tx.query('SET LOCAL synchronous_commit = off');
}
/** The longest a slot whose retirement gave up waits before the next try. */
const MAX_BACKOFF_MS = 60_000;

/** The name (without schema) of a partition of the queue or of the counts. */
const slotPartition = (table: 'queue' | 'call_counts' | 'queue_made', slot: number) =>
  `portal_${table}_${slot === KEPT_SLOT ? 'kept' : slot}`;

/** The same partition, qualified and quoted. */
const partitionOf = ({ quotedSchema }: Names, table: 'queue' | 'call_counts' | 'queue_made', slot: number) =>
  `${quotedSchema}."${slotPartition(table, slot)}"`;

/**
 * The slot new rows go to: an uncorrelated subquery, evaluated once a statement. With no slot
 * current (the ring's rows changed by hand), `otherwise`: the queue's kept partition, or for the
 * counts, which have none, slot 0.
 */
export const currentSlot = ({ table }: Names, otherwise = KEPT_SLOT) =>
  `(SELECT coalesce(min(slot), ${otherwise}) FROM ${table('queue_ring')} WHERE state = 'current')`;

/**
 * Where a publish puts a new delivery, given the SQL expression of its ordering key: the current
 * slot, or the kept partition for a keyed one, whose place behind its key must outlive a crash.
 */
export const publishedSlot = (names: Names, orderingKey: string) =>
  `CASE WHEN ${orderingKey} IS NULL THEN ${currentSlot(names)} ELSE ${KEPT_SLOT} END`;

/**
 * Notes, in the slot's `portal_queue_made`, the deliveries a statement put in a slot: `source`, a
 * CTE of the rows it stored (event_id, webhook_id, event_gen, slot); a row a slot and generation.
 */
export const noteMade = ({ table }: Names, source: string) =>
  `INSERT INTO ${table('queue_made')} (slot, event_gen, event_ids, webhook_ids)
    SELECT s.slot, s.event_gen, array_agg(s.event_id), array_agg(s.webhook_id) FROM ${source} AS s
    WHERE s.slot <> ${KEPT_SLOT}
    GROUP BY s.slot, s.event_gen`;

/** The kept partition of the queue, qualified and quoted: logged, as the slots are not. */
export const keptPartition = (names: Names) => partitionOf(names, 'queue', KEPT_SLOT);

/** A queued delivery's columns, as a move copies them. */
const QUEUED =
  'id, account_id, webhook_id, event_id, status, attempts, attempt_count, next_attempt_at, created_at, event_type, ordering_key, lease_owner, lease_until, redeliver_queued, seq, event_gen, paced';

/** Moves the deliveries of `source` (a CTE or table with the queue's columns) into the kept partition, as they stand. */
export const intoKept = ({ table }: Names, source: string) =>
  `INSERT INTO ${table('queue')} (${QUEUED}, slot) SELECT ${QUEUED}, ${KEPT_SLOT} FROM ${source}`;

interface Slot {
  slot: number;
  state: 'current' | 'closed' | 'empty';
  openedMs: number | null;
  closedMs: number | null;
}

/**
 * Whether the unlogged slots are as they were: false once a crash of the server emptied them (or a
 * replica promoted, which never had their rows), until `rebuild` has made their deliveries again.
 */
export const ringIntact = ({ table }: Names) => `EXISTS (SELECT 1 FROM ${table('queue_intact')})`;

/**
 * Makes, after a crash of the server, the deliveries the slots lost, due at `now` (the claim's
 * time), then says the slots are intact again (rebuild.ts).
 */
export type Rebuild = (now: string) => Promise<void>;

export function createRing(db: Db, names: Names, foldCounts: (partition: string) => string, rebuild: Rebuild) {
  const { table } = names;
  const part = (kind: 'queue' | 'call_counts' | 'queue_made', slot: number) => partitionOf(names, kind, slot);
  const ms = (column: string) => `(extract(epoch FROM ${column}) * 1000)::float8`;
  const slotColumns = `slot, state, ${ms('opened_at')} AS opened_ms, ${ms('closed_at')} AS closed_ms`;
  const readRing = `SELECT ${slotColumns} FROM ${table('queue_ring')} ORDER BY slot`;
  const lockRing = `${readRing} FOR UPDATE`;
  // The ring as a turn reads it, and whether its slots lost their rows (on every row).
  const lookAtRing = `SELECT ${slotColumns}, ${ringIntact(names)} AS intact FROM ${table('queue_ring')} ORDER BY slot`;
  const close = `UPDATE ${table('queue_ring')} SET state = 'closed', closed_at = $2::timestamptz WHERE slot = $1::int`;
  const open = `UPDATE ${table('queue_ring')} SET state = 'current', opened_at = $2::timestamptz, closed_at = NULL
    WHERE slot = $1::int`;
  const takeClosed = `SELECT slot FROM ${table('queue_ring')} WHERE slot = $1::int AND state = 'closed' FOR UPDATE SKIP LOCKED`;
  const vacuuming = `SELECT 1 FROM pg_stat_progress_vacuum WHERE relid = $1::regclass`;
  const emptied = `UPDATE ${table('queue_ring')} SET state = 'empty', opened_at = NULL, closed_at = NULL WHERE slot = $1::int`;
  // A batch of a slot's deliveries to the kept partition, those a claim or a record holds passed
  // over, and those leased ($1: now) too: a record or give-back of one, waiting for its row while
  // this moved it, would find it gone. The last step moves them, under a lock those wait for.
  const moveSome = (slot: number) => `WITH moved AS (
      DELETE FROM ${part('queue', slot)} AS d
      WHERE d.ctid = ANY (ARRAY(
        SELECT ctid FROM ${part('queue', slot)} WHERE lease_until IS NULL OR lease_until < $1::timestamptz
        LIMIT ${MOVE_BATCH} FOR UPDATE SKIP LOCKED))
      RETURNING d.*
    )
    ${intoKept(names, 'moved')}`;
  const moveRest = (slot: number) => intoKept(names, part('queue', slot));

  const toSlot = (row: Record<string, unknown>): Slot => ({
    slot: Number(row.slot),
    state: row.state as Slot['state'],
    openedMs: row.opened_ms === null ? null : Number(row.opened_ms),
    closedMs: row.closed_ms === null ? null : Number(row.closed_ms),
  });
  // Past by `SLOT_SPAN_MS`, or ahead by as much: a clock moved back does not stop the ring.
  const aged = (since: number | null, at: number) =>
    since !== null && (at - since >= SLOT_SPAN_MS || since - at > SLOT_SPAN_MS);

  /** Ends the current slot once it is SLOT_SPAN_MS old, when the next one is empty; opens one when none is current. */
  async function rotate(tx: Queryable, now: string, at: number): Promise<void> {
    const slots = (await tx.query(lockRing)).map(toSlot);
    const current = slots.find((one) => one.state === 'current');
    if (current === undefined) {
      // None (the ring's rows changed by hand): an empty one, or the first, is current from now.
      await tx.query(open, [(slots.find((one) => one.state === 'empty') ?? slots[0]!).slot, now]);
      return;
    }
    if (!aged(current.openedMs, at)) return;
    const next = slots[(current.slot + 1) % RING_SLOTS]!;
    if (next.state !== 'empty') return;
    await tx.query(close, [current.slot, now]);
    await tx.query(open, [next.slot, now]);
  }

  /**
   * Folds the counts of `slot` and truncates them, then moves what is left of its deliveries to the
   * kept partition and truncates theirs; a slot that holds a backlog only once it has waited
   * BACKLOG_WAIT_MS.
   */
  async function retire(slot: number, closedMs: number, at: number, now: string): Promise<void> {
    if (Math.abs(at - closedMs) < BACKLOG_WAIT_MS) {
      const [row] = await db.query(
        `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${part('queue', slot)} LIMIT ${MOVE_BATCH + 1}) AS held`,
      );
      if (Number(row?.n) > MOVE_BATCH) return;
    }
    // A backlog moves in batches first, each a short transaction, so that the last step, which
    // every claim waits for, moves few.
    for (;;) {
      const moved = await db.transaction(async (tx) => {
        await retiring(tx);
        return tx.query(`${moveSome(slot)} RETURNING 1`, [now]);
      });
      if (moved.length < MOVE_BATCH) break;
    }
    // The counts first, under a lock of their partition alone, which only a record that read the
    // ring before it turned (and call stats) can be waiting for: claims and records go on.
    await db.transaction(async (tx) => {
      await retiring(tx);
      if ((await tx.query(takeClosed, [slot])).length === 0) return;
      await tx.query(`LOCK TABLE ${part('call_counts', slot)} IN ACCESS EXCLUSIVE MODE`);
      await tx.query(foldCounts(part('call_counts', slot)));
      await tx.query(`TRUNCATE ${part('call_counts', slot)}`);
    });
    // Then the deliveries, under the lock every claim and record waits for: as short as it can be.
    await db.transaction(async (tx) => {
      await retiring(tx);
      // Another instance retiring it meanwhile holds the row: that one finishes.
      if ((await tx.query(takeClosed, [slot])).length === 0) return;
      // A VACUUM of the slot would hold the lock past LOCK_TIMEOUT: not waited for at all.
      if ((await tx.query(vacuuming, [part('queue', slot)])).length > 0)
        throw Object.assign(new Error('the slot is being vacuumed'), { code: LOCK_NOT_AVAILABLE });
      await tx.query(`LOCK TABLE ${part('queue', slot)} IN ACCESS EXCLUSIVE MODE`);
      await tx.query(moveRest(slot));
      // With the notes of what was in it: nothing in it is left to make again after a crash.
      await tx.query(`TRUNCATE ${part('queue', slot)}, ${part('queue_made', slot)}`);
      await tx.query(emptied, [slot]);
    });
  }

  /** A step that could not have its locks within LOCK_TIMEOUT is left for a later turn: false. */
  async function givingUpOnLocks(step: () => Promise<unknown>): Promise<boolean> {
    try {
      await step();
      return true;
    } catch (error) {
      if ((error as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw error;
      return false;
    }
  }

  /**
   * The slots whose retirement gave up, and when (by the claims' clock) to try again: each try
   * that waits LOCK_TIMEOUT for nothing holds the claims queued behind its lock that long, so a
   * long holder (a dump) is tried twice as late each time, up to MAX_BACKOFF_MS.
   */
  const backoff = new Map<number, { until: number; delayMs: number }>();

  let lastTurn = Number.NEGATIVE_INFINITY;
  return {
    /**
     * At most every TURN_EVERY_MS of `now` (the claim's clock): rotates the ring when the current
     * slot has had its span, and retires the closed slots that have waited theirs. A lock not had
     * within LOCK_TIMEOUT leaves the rest for a later turn.
     */
    async turn(now: string): Promise<void> {
      const at = Date.parse(now);
      if (Math.abs(at - lastTurn) < TURN_EVERY_MS) return;
      lastTurn = at;
      const rows = await db.query(lookAtRing);
      // Before anything moves: a retirement would move what a rebuild is to find missing.
      if (rows.some((row) => row.intact === false)) await rebuild(now);
      const slots = rows.map(toSlot);
      // Retired first, so that the slot the rotation needs may be empty by then.
      const closed = slots
        .filter((one) => one.state === 'closed' && aged(one.closedMs, at))
        .sort((a, b) => a.closedMs! - b.closedMs!);
      for (const { slot, closedMs } of closed) {
        const waiting = backoff.get(slot);
        if (waiting !== undefined && at < waiting.until && waiting.until - at <= waiting.delayMs) continue;
        if (await givingUpOnLocks(() => retire(slot, closedMs!, at, now))) backoff.delete(slot);
        else {
          const delayMs = Math.min(MAX_BACKOFF_MS, 2 * (waiting?.delayMs ?? TURN_EVERY_MS));
          backoff.set(slot, { until: at + delayMs, delayMs });
        }
      }
      const current = slots.find((one) => one.state === 'current');
      if (current === undefined || aged(current.openedMs, at))
        await givingUpOnLocks(() =>
          db.transaction(async (tx) => {
            await tx.query(LOCK_TIMEOUT);
            await rotate(tx, now, at);
          }),
        );
    },
  };
}

export type Ring = ReturnType<typeof createRing>;

/**
 * Migration 29: what the slots hold moved to the kept partition (a slot holds seconds of
 * deliveries, some tried already), then the slots unlogged (empty, so rewritten at once); the
 * unlogged row that says they were not lost; the notes of what each publish put in a slot.
 */
export function unloggedSlots(names: Names): string[] {
  const { table } = names;
  const slots = Array.from({ length: RING_SLOTS }, (_, slot) => slot);
  const slot = (kind: 'queue' | 'queue_made', at: number) => partitionOf(names, kind, at);
  return [
    ...slots.map((at) => `WITH moved AS (DELETE FROM ${slot('queue', at)} RETURNING *) ${intoKept(names, 'moved')}`),
    ...slots.map((at) => `ALTER TABLE ${slot('queue', at)} SET UNLOGGED`),
    `CREATE UNLOGGED TABLE ${table('queue_intact')} (intact boolean PRIMARY KEY CHECK (intact))`,
    `INSERT INTO ${table('queue_intact')} VALUES (true)`,
    `CREATE TABLE ${table('queue_made')} (
      slot integer NOT NULL,
      event_gen integer NOT NULL,
      event_ids text[] NOT NULL,
      webhook_ids text[] NOT NULL
    ) PARTITION BY LIST (slot)`,
    ...slots.map(
      (at) => `CREATE TABLE ${slot('queue_made', at)} PARTITION OF ${table('queue_made')} FOR VALUES IN (${at})`,
    ),
  ];
}

/** The ring's tables, as migration 28 makes them; `queueColumns` the queue's column list. */
export function ringTables(names: Names, queueColumns: string, countColumns: string): string[] {
  const { table } = names;
  const partition = (kind: 'queue' | 'call_counts', slot: number, storage = '') =>
    `CREATE TABLE ${partitionOf(names, kind, slot)} PARTITION OF ${table(kind)} FOR VALUES IN (${slot})${storage}`;
  const slots = Array.from({ length: RING_SLOTS }, (_, slot) => slot);
  return [
    `CREATE TABLE ${table('queue_ring')} (
      slot integer PRIMARY KEY,
      state text NOT NULL CHECK (state IN ('current', 'closed', 'empty')),
      opened_at timestamptz,
      closed_at timestamptz
    )`,
    `INSERT INTO ${table('queue_ring')} (slot, state, opened_at)
      SELECT slot, CASE WHEN slot = 0 THEN 'current' ELSE 'empty' END, CASE WHEN slot = 0 THEN now() END
      FROM generate_series(0, ${RING_SLOTS - 1}) AS slot`,
    `CREATE TABLE ${table('queue')} (${queueColumns}, slot integer NOT NULL DEFAULT ${KEPT_SLOT}) PARTITION BY LIST (slot)`,
    ...[KEPT_SLOT, ...slots].map((slot) => partition('queue', slot, ' WITH (fillfactor = 80)')),
    `CREATE TABLE ${table('call_counts')} (${countColumns}, slot integer NOT NULL) PARTITION BY LIST (slot)`,
    ...slots.map((slot) => partition('call_counts', slot)),
  ];
}
