/**
 * Generations: the events and the delivery log are kept in partitions, one per generation of a
 * span of time, so that retention (`removeExpired` of src/domain/retention.ts, in retention.ts) drops
 * a whole generation at once instead of deleting its rows one by one.
 *
 * - portal_events is partitioned by LIST (gen): an event is stored in the generation current when
 *   it is published, read from portal_generations in the storing statement itself.
 * - portal_deliveries, the log, is partitioned by LIST (event_gen), its event's generation: an
 *   event and the deliveries made of it go together. A delivery in the queue carries its event's
 *   generation too, so that a claim's join to the event reads one partition.
 * - Each has a DEFAULT partition, for the few records whose generation's partition is gone when
 *   they are stored: the event of a delivery still pending when its generation went, a delivery
 *   finished after its generation went. Retention removes those row by row.
 * - Generation 0 is the tables as they were before partitions (adopted by migration 23).
 *
 * The worker's tick starts a new generation (`rotateHistory`) once the current one is `spanMs` old,
 * and creates the next one's partitions ahead, so that a store never waits for DDL. Partitions are
 * plain tables with their own indexes, attached to the parent: SHARE UPDATE EXCLUSIVE on it, which
 * publishes do not wait for, and ACCESS EXCLUSIVE on the default partition while the attach checks
 * it holds no row of the new generation (it holds few). A claim, which locks every partition of
 * events as it starts (the join is pruned as it runs), waits for that moment. The parents have no
 * index of their own, which is what lets generation 0 join without building one.
 */
import { type Db, type Queryable, lockWithin } from '../client.js';
import type { Names } from '../schema.js';

/** A generation's partitions, or the default ones. */
export type Generation = number | 'default';

/** The partitioned tables: events by their generation, the log by its event's. */
export type History = 'events' | 'deliveries';

/** The generation events are stored in now: an uncorrelated subquery, evaluated once a statement. */
export const currentGeneration = ({ table }: Names) => `(SELECT max(gen) FROM ${table('generations')})`;

/** The name (without schema) of a history table's partition. */
export const partitionName = (history: History, gen: Generation) =>
  `portal_${history}_${gen === 'default' ? 'default' : `g${gen}`}`;

/** A history table's partition, qualified and quoted. */
export const partitionTable = (names: Names, history: History, gen: Generation) =>
  `${names.quotedSchema}."${partitionName(history, gen)}"`;

/**
 * What a partition is made of: its table, its indexes, and its attachment. The indexes are those
 * of the unpartitioned tables before (generation 0 keeps its own), without the ones retention
 * needed to find rows by age.
 */
export function partitionStatements(names: Names, history: History, gen: Generation): string[] {
  const name = partitionName(history, gen);
  const qualified = partitionTable(names, history, gen);
  const parent = names.table(history);
  const bound = gen === 'default' ? 'DEFAULT' : `FOR VALUES IN (${gen})`;
  const index = (suffix: string, definition: string, kind = 'INDEX') =>
    `CREATE ${kind} IF NOT EXISTS "${name}_${suffix}" ON ${qualified} ${definition}`;
  // Ids are unique in each partition (a key across partitions would have to hold the generation):
  // ids are random, so two generations never share one; the index is there for a bug's sake.
  const unique = (suffix: string, definition: string) => index(suffix, definition, 'UNIQUE INDEX');
  const indexes =
    history === 'events'
      ? [
          // The claim's join (with gen), a publish's settle; the dry run's latest events.
          unique('id', '(id)'),
          index('recent', '(account_id, type, created_at)'),
        ]
      : [
          // getDelivery and redeliver, a webhook's log newest first, recover and the events kept,
          // and a pending row an instance of a release before the queue stored here (the claim adopts it).
          unique('id', '(id)'),
          index('webhook', '(webhook_id, created_at, seq)'),
          index('event', '(event_id)'),
          index('due', `(next_attempt_at, id) WHERE status = 'pending'`),
        ];
  return [
    `CREATE TABLE IF NOT EXISTS ${qualified} (LIKE ${parent} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`,
    ...indexes,
    `ALTER TABLE ${parent} ATTACH PARTITION ${qualified} ${bound}`,
  ];
}

/** The generations whose partitions of `history` are attached, read from the catalog. */
export async function attachedGenerations(db: Queryable, names: Names, history: History): Promise<Set<number>> {
  const rows = await db.query(
    `SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
      WHERE i.inhparent = $1::regclass`,
    [names.table(history)],
  );
  const prefix = `portal_${history}_g`;
  const gens = new Set<number>();
  for (const row of rows) {
    const relname = row.relname as string;
    if (relname.startsWith(prefix)) gens.add(Number(relname.slice(prefix.length)));
  }
  return gens;
}

/** First key of the generations' advisory lock: 'cpgn' in ASCII. */
const GENERATIONS_LOCK_CLASS = 0x6370676e;

/**
 * Takes the turn of this schema's generations within transaction `tx`: instances rotating or
 * dropping generations at once go one after another (a wait bounded by the transaction's lock
 * timeout, as every lock of theirs).
 */
export const takeGenerationsTurn = (tx: Queryable, names: Names) =>
  lockWithin(tx, GENERATIONS_LOCK_CLASS, names.schema);

/** How long a partition's DDL waits for a lock before it gives up, for the next tick to try again. */
export const DDL_LOCK_TIMEOUT = `SET LOCAL lock_timeout = '200ms'`;
/** PostgreSQL's lock_not_available: a lock not had within DDL_LOCK_TIMEOUT. */
export const LOCK_NOT_AVAILABLE = '55P03';

export function createPartitions(db: Db, names: Names) {
  const { table } = names;
  const newest = `SELECT gen, (extract(epoch FROM started_at) * 1000)::float8 AS started_ms FROM ${table('generations')}
    ORDER BY gen DESC LIMIT 1`;
  const open = `INSERT INTO ${table('generations')} (gen, started_at) VALUES ($1::int, $2::timestamptz)`;

  /** The partitions of `gen` in both tables, each created and attached unless it is. */
  async function prepare(tx: Queryable, gen: number) {
    for (const history of ['events', 'deliveries'] as const) {
      if ((await attachedGenerations(tx, names, history)).has(gen)) continue;
      for (const statement of partitionStatements(names, history, gen)) await tx.query(statement);
    }
  }

  /** When the newest generation this instance saw began: until it is due to end, ticks ask nothing. */
  let seenStart: number | undefined;
  const due = (started: number, at: number, spanMs: number) => at - started >= spanMs || started - at > spanMs;

  return {
    /**
     * Starts generation n + 1 when the current one, n, began `spanMs` or more before `now` (or more
     * than `spanMs` after it: a clock moved back), with n + 2's partitions made ahead. Instances
     * that tick at once take turns (an advisory lock); the later ones find the new generation.
     */
    async rotateHistory(now: string, spanMs: number): Promise<void> {
      const at = Date.parse(now);
      if (seenStart !== undefined && !due(seenStart, at, spanMs)) return;
      try {
        seenStart = await db.transaction(async (tx) => {
          await tx.query(DDL_LOCK_TIMEOUT);
          // The later instance then reads the generation the earlier one started (a statement
          // after the lock, a new snapshot).
          await takeGenerationsTurn(tx, names);
          const [row] = await tx.query(newest);
          const gen = Number(row!.gen);
          const started = Number(row!.started_ms);
          if (!due(started, at, spanMs)) return started;
          await prepare(tx, gen + 1);
          await prepare(tx, gen + 2);
          await tx.query(open, [gen + 1, now]);
          return at;
        });
      } catch (error) {
        // An attach waits for a transaction that read the default partition: the next tick tries
        // again, and the current generation lasts a little longer meanwhile.
        if ((error as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw error;
      }
    },
  };
}
