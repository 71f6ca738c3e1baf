/**
 * Recording an attempt: `recordAttempt` of src/rules/deliveries.ts (the attempt appended to the
 * log, at most `MAX_ATTEMPTS_KEPT` kept; the outcome, or pending again when a redeliver was queued
 * during the call, due as it ended: `dueAfter`, `isDueAfter`), with the webhook's health and its
 * hour's call counts; a keyed delivery's turn ended (`endsTurn`) releases the key's next one.
 */
import {
  MAX_ATTEMPTS_KEPT,
  NOT_RECORDED,
  dueAfter as dueAfterAttempt,
  endsTurn,
} from '../../../src/rules/deliveries.js';
import { attemptSucceeded } from '../../../src/rules/webhook-health.js';
import type { AttemptRecorded, HealthRule, Storage } from '../../../src/ports.js';
import type { DeliveryAttempt, DeliveryStatus } from '../../../src/records.js';
import { createBatcher } from '../batch.js';
import type { Db, Queryable, Row } from '../client.js';
import type { Names } from '../schema.js';
import { countCalls } from '../storage-call-stats.js';
import {
  attemptResult,
  healthAfterSuccesses,
  healthParams,
  holdWebhook,
  recordAttemptWithHealth,
} from '../storage-health.js';
import type { orderingKeys } from '../storage-keys.js';
import { lastAttempts } from '../storage-migrations.js';
import { finishedFrom } from '../storage-rows.js';
import type { ClaimedKeys, DeliveryKey } from './claimed-keys.js';
import { KEPT_SLOT, keptPartition } from './ring.js';

/**
 * Statements recording successful attempts at once; more wait, and are recorded together. One: with
 * two worker instances it delivered more a second, for less CPU a delivery, than two did; with one
 * instance the two were within the runs' spread (bench row "webhook fleet, 2 workers";
 * docs/performance.md, "Figures behind the code": MAX_RECORDING).
 */
const MAX_RECORDING = 1;
/** Successful attempts recorded by one statement at most. */
const MAX_GROUP_ATTEMPTS = 256;

/** A successful attempt waiting to be recorded with others: the parameters of `recordSuccesses`. */
interface SuccessfulAttempt {
  id: string;
  /** The delivery's webhook and ordering key (`null`: none): a keyed record may end the key's turn. */
  webhookId: string;
  orderingKey: string | null;
  /** When the key's next delivery is due if this ends the turn: as the call ended (`dueAfter`). */
  releaseAt: string;
  owner: string;
  /** The attempt's log entry, as JSON. */
  entry: string;
  status: string;
  nextAttemptAt: string | null;
  at: string;
}

/**
 * `dueAfter` of rules/deliveries.ts over an attempt's JSON log entry (`entry`): the attempt's
 * start plus its duration, to the second.
 */
const dueAfter = (entry: string) =>
  `date_trunc('second', (${entry}->>'at')::timestamptz + (${entry}->>'durationMs')::int * interval '1 millisecond')`;
/** `isDueAfter` of rules/deliveries.ts on a recorded row (columns prefixed by `at`). */
const dueAgain = (entry: string, at = '') => `(${at}status = 'pending' AND ${at}next_attempt_at <= ${dueAfter(entry)})`;

export function createRecord(
  db: Db,
  names: Names,
  keys: ReturnType<typeof orderingKeys>,
  claimedKeys: ClaimedKeys,
): Pick<Storage, 'recordAttempt'> {
  const { table } = names;
  const kept = `'${keptPartition(names)}'::regclass::oid`;
  // The delivery's attempts (q) with the attempt (i.entry) appended, the oldest dropped past MAX_ATTEMPTS_KEPT.
  const appended = `CASE WHEN jsonb_array_length(q.attempts) < ${MAX_ATTEMPTS_KEPT} THEN q.attempts || jsonb_build_array(i.entry)
          ELSE ${lastAttempts('q.attempts || jsonb_build_array(i.entry)')} END AS attempts,
        q.attempt_count + 1 AS attempt_count`;
  /**
   * The attempts of `source` (rows of id, owner, entry, status, next_attempt_at, at), each recorded
   * on the delivery its owner leases: the attempt appended, the oldest dropped once more than
   * MAX_ATTEMPTS_KEPT are held; the outcome, or with a redeliver queued during the call, pending and
   * due as the call ended. A delivery still pending stays in the queue, updated in the kept
   * partition, moved there from an unlogged slot (ring.ts); a finished one moves to the log. Ends
   * with the CTE `recorded`: id, webhook_id, account_id, at, entry, ordering_key, status, due_again.
   *
   * Each delivery is looked up and locked by primary key first (a LATERAL per attempt), and the
   * lease is checked on the row it locked (OFFSET 0 keeps the planner from moving the test into the
   * lookup); then each is changed by its ctid, a TID scan whatever the planner believes of the table
   * (the row cannot move while this statement holds its lock). A join left to the planner read every
   * pending row when the table's statistics lagged behind a burst (docs/performance.md, "Figures
   * behind the code": recordSuccesses).
   */
  const recording = (source: string) => `held AS MATERIALIZED (
      SELECT i.id, i.entry, i.at, q.row, q.part, q.account_id, q.webhook_id, q.ordering_key,
        CASE WHEN q.redeliver_queued THEN 'pending' ELSE i.status END AS status,
        CASE WHEN q.redeliver_queued THEN ${dueAfter('i.entry')} ELSE i.next_attempt_at END AS next_attempt_at,
        ${appended}
      FROM (${source}) AS i
      CROSS JOIN LATERAL (
        SELECT d.ctid AS row, d.tableoid AS part, d.* FROM ${table('queue')} AS d WHERE d.id = i.id FOR UPDATE OFFSET 0
      ) AS q
      WHERE q.lease_owner = i.owner
    ), stays AS (
      UPDATE ${table('queue')} AS d
      SET attempts = h.attempts, attempt_count = h.attempt_count, next_attempt_at = h.next_attempt_at,
        lease_owner = NULL, lease_until = NULL, redeliver_queued = false
      FROM held AS h
      WHERE d.ctid = ANY (ARRAY(SELECT row FROM held WHERE status = 'pending' AND part = ${kept}))
        AND d.ctid = h.row AND d.tableoid = h.part
    ), leaving AS (
      -- One still pending in an unlogged slot moves to the kept partition, where its attempts
      -- outlive a crash of the server (ring.ts).
      DELETE FROM ${table('queue')} AS d
      USING held AS h
      WHERE d.ctid = ANY (ARRAY(SELECT row FROM held WHERE status = 'pending' AND part <> ${kept}))
        AND d.ctid = h.row AND d.tableoid = h.part
      RETURNING d.id, d.account_id, d.webhook_id, d.event_id, h.attempts, h.attempt_count, h.next_attempt_at,
        d.created_at, d.event_type, d.ordering_key, d.seq, d.event_gen
    ), kept AS (
      INSERT INTO ${table('queue')} (id, account_id, webhook_id, event_id, status, attempts, attempt_count,
        next_attempt_at, created_at, event_type, ordering_key, seq, event_gen, slot)
      SELECT l.id, l.account_id, l.webhook_id, l.event_id, 'pending', l.attempts, l.attempt_count, l.next_attempt_at,
        l.created_at, l.event_type, l.ordering_key, l.seq, l.event_gen, ${KEPT_SLOT}
      FROM leaving AS l
    ), finished AS (
      DELETE FROM ${table('queue')} AS d
      USING held AS h
      WHERE d.ctid = ANY (ARRAY(SELECT row FROM held WHERE status <> 'pending')) AND d.ctid = h.row AND d.tableoid = h.part
      RETURNING d.id, d.account_id, d.webhook_id, d.event_id, h.status, h.attempts, h.attempt_count, d.created_at,
        d.event_type, d.ordering_key, d.seq, d.event_gen
    ), logged AS (${finishedFrom(names, 'finished', 's.status')}
    ), recorded AS (
      SELECT h.id, h.webhook_id, h.account_id, h.at, h.entry, h.ordering_key, h.status,
        ${dueAgain('h.entry', 'h.')} AS due_again
      FROM held AS h
    )`;
  /**
   * `recording` for the attempts of `source` whose delivery finishes as it stands (a success, no
   * redeliver queued during the call), without locking the row first: each is read by primary key
   * and deleted by its ctid, a delete that takes effect only on the version read. A version another
   * statement changed or moved since (a redeliver queued, the ring's move, a lease taken over) is
   * not deleted: PostgreSQL re-checks the join on the newest version, whose ctid is another. Those,
   * and those whose lease or outcome this does not cover, are left out of `recorded`, for
   * `recording` to take (recordSuccessesTogether). The lock cost each success a row lock, its WAL
   * record (54 bytes) and a page write (docs/performance.md, "Figures behind the code": recordSuccesses).
   */
  const finishing = (source: string) => `seen AS MATERIALIZED (
      SELECT i.id, i.entry, i.at, i.status, q.row, q.part, ${appended}
      FROM (${source}) AS i
      CROSS JOIN LATERAL (
        SELECT d.ctid AS row, d.tableoid AS part, d.* FROM ${table('queue')} AS d WHERE d.id = i.id OFFSET 0
      ) AS q
      WHERE q.lease_owner = i.owner AND NOT q.redeliver_queued AND i.status <> 'pending'
    ), finished AS (
      DELETE FROM ${table('queue')} AS d
      USING seen AS h
      WHERE d.ctid = ANY (ARRAY(SELECT row FROM seen)) AND d.ctid = h.row AND d.tableoid = h.part
      RETURNING d.id, d.account_id, d.webhook_id, d.event_id, h.status, h.attempts, h.attempt_count, d.created_at,
        d.event_type, d.ordering_key, d.seq, d.event_gen, h.entry, h.at
    ), logged AS (${finishedFrom(names, 'finished', 's.status')}
    ), recorded AS (
      SELECT f.id, f.webhook_id, f.account_id, f.at, f.entry, f.ordering_key, f.status, false AS due_again
      FROM finished AS f
    )`;
  const oneAttempt = `SELECT $1::text AS id, $2::text AS owner, $3::jsonb AS entry, $4::text AS status,
      $5::timestamptz AS next_attempt_at, ($3::jsonb->>'at')::timestamptz AS at`;
  // Each attempt is counted in its webhook's hour by the statement that records it (countCalls).
  const recordAttempt = `WITH ${recording(oneAttempt)},
    ${countCalls(names, 'SELECT r.webhook_id, r.account_id, r.entry FROM recorded AS r')}
    SELECT id, due_again, webhook_id, ordering_key, status FROM recorded`;
  const recordAttemptAndHealth = recordAttemptWithHealth(names, recording(oneAttempt));
  // recordAttempt with health, for many successful attempts in one statement (see recordSuccessesTogether).
  const successes = `SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::text[], $5::timestamptz[], $6::timestamptz[])
        AS i(id, owner, entry, status, next_attempt_at, at)`;
  const withHealthAndCounts = (steps: string) => `WITH ${steps},
    ${healthAfterSuccesses(names)},
    ${countCalls(names, 'SELECT r.webhook_id, r.account_id, r.entry FROM recorded AS r CROSS JOIN (SELECT count(*) FROM health) AS after_health')}
    SELECT id, due_again, webhook_id, ordering_key, status FROM recorded`;
  const recordSuccesses = withHealthAndCounts(recording(successes));
  const finishSuccesses = withHealthAndCounts(finishing(successes));
  const deliveryKeyById = `SELECT webhook_id, ordering_key FROM ${table('queue')} WHERE id = $1::text`;
  const hold = holdWebhook(names);

  /** The result of the statement without health: recorded or not, and due again. */
  const plainResult = (row: Record<string, unknown> | undefined): AttemptRecorded =>
    row === undefined ? NOT_RECORDED : { recorded: true, disabled: null, dueAgain: row.due_again === true };

  /**
   * `recordAttempt` of a keyed delivery (or one whose key this store did not claim, read first, or
   * one whose answer held its webhook), in a transaction under its key's lock, taken before the
   * row's: a redeliver takes them in that order too, so the two never wait for each other. When the
   * attempt ends the key's turn (`endsTurn`), the key's next is released; a publish that held the
   * lock before saw this one pending and held its own, which the release's statement (begun after
   * the lock) sees. A hold (`holdHealth`) is written in the same transaction, after the row.
   */
  async function recordInTurn(
    id: string,
    owner: string,
    attempt: DeliveryAttempt,
    entry: string,
    outcome: { status: DeliveryStatus; nextAttemptAt: string | null },
    health: HealthRule | undefined,
    claimed: DeliveryKey | undefined,
    heldUntil: string | undefined,
  ): Promise<AttemptRecorded> {
    const params = [id, owner, entry, outcome.status, outcome.nextAttemptAt];
    const key =
      claimed ??
      (await db.query(deliveryKeyById, [id])).map((row) => ({
        webhookId: row.webhook_id as string,
        orderingKey: (row.ordering_key ?? null) as string | null,
      }))[0];
    return db.transaction(async (tx) => {
      if (key?.orderingKey != null) await keys.lock(tx, [[key.webhookId, key.orderingKey]]);
      const [row] =
        health === undefined
          ? await tx.query(recordAttempt, params)
          : await tx.query(recordAttemptAndHealth, [...params, ...healthParams(attempt, health)]);
      const result = health === undefined ? plainResult(row) : attemptResult(row);
      if (!result.recorded) return result;
      if (heldUntil !== undefined) await tx.query(hold, [row!.webhook_id, heldUntil]);
      const recorded = {
        status: row!.status as DeliveryStatus,
        orderingKey: (row!.ordering_key ?? null) as string | null,
      };
      if (endsTurn(recorded))
        await keys.endTurns(tx, [
          { webhookId: row!.webhook_id as string, orderingKey: recorded.orderingKey!, at: dueAfterAttempt(attempt) },
        ]);
      return result;
    });
  }

  /**
   * Records `successes`: those whose delivery finishes as it stands by `finishSuccesses`, without a
   * row lock; the others (a redeliver queued during the call, a row changed meanwhile, a lease lost)
   * then by `recordSuccesses`, which locks each row first. Resolves the rows recorded.
   */
  async function recordEach(via: Queryable, successes: SuccessfulAttempt[]): Promise<Row[]> {
    const paramsOf = (some: SuccessfulAttempt[]) => [
      some.map((one) => one.id),
      some.map((one) => one.owner),
      some.map((one) => one.entry),
      some.map((one) => one.status),
      some.map((one) => one.nextAttemptAt),
      some.map((one) => one.at),
    ];
    const finished = await via.query(finishSuccesses, paramsOf(successes));
    if (finished.length === successes.length) return finished;
    const done = new Set(finished.map((row) => row.id as string));
    const rest = successes.filter((one) => !done.has(one.id));
    return [...finished, ...(await via.query(recordSuccesses, paramsOf(rest)))];
  }

  /**
   * Successful attempts at once share a statement: a success changes a webhook's health the same way
   * whatever came before it, so the attempts of one webhook fold into one health write. A failure,
   * whose effect on the health depends on the run before it (and may disable the webhook), is
   * recorded by a statement of its own.
   */
  const recordSuccessesTogether = createBatcher<SuccessfulAttempt, AttemptRecorded>({
    maxRunning: MAX_RECORDING,
    maxSize: MAX_GROUP_ATTEMPTS,
    size: () => 1,
    async run(successes) {
      // With keyed deliveries among them, in a transaction that ends their keys' turns.
      const rows = !successes.some((one) => one.orderingKey !== null)
        ? await recordEach(db, successes)
        : await db.transaction(async (tx) => {
            // The keys' locks before the rows' (see recordInTurn).
            await keys.lock(
              tx,
              successes.filter((one) => one.orderingKey !== null).map((one) => [one.webhookId, one.orderingKey!]),
            );
            const recorded = await recordEach(tx, successes);
            const releaseAt = new Map(successes.map((one) => [one.id, one.releaseAt]));
            const ended = recorded
              .filter((row) =>
                endsTurn({
                  status: row.status as DeliveryStatus,
                  orderingKey: (row.ordering_key ?? null) as string | null,
                }),
              )
              .map((row) => ({
                webhookId: row.webhook_id as string,
                orderingKey: row.ordering_key as string,
                at: releaseAt.get(row.id as string)!,
              }));
            await keys.endTurns(tx, ended);
            return recorded;
          });
      const recorded = new Map(rows.map((row) => [row.id as string, row]));
      return successes.map((one) => plainResult(recorded.get(one.id)));
    },
  });

  return {
    async recordAttempt({ id, owner, attempt, outcome, health, hold: heldUntil }) {
      const entry = JSON.stringify({
        at: attempt.at,
        statusCode: attempt.statusCode,
        error: attempt.error,
        durationMs: attempt.durationMs,
        ...(attempt.local ? { local: true } : {}),
        ...(attempt.held ? { held: true } : {}),
      });
      const claimed = claimedKeys.take(id);
      if (claimed !== undefined && health !== undefined && heldUntil === undefined && attemptSucceeded(attempt)) {
        const { webhookId, orderingKey } = claimed;
        return recordSuccessesTogether({
          id,
          webhookId,
          orderingKey,
          releaseAt: dueAfterAttempt(attempt),
          owner,
          entry,
          status: outcome.status,
          nextAttemptAt: outcome.nextAttemptAt,
          at: attempt.at,
        });
      }
      // A delivery that may have a key (it has one, or this store did not claim it), or that holds
      // its webhook: recorded in a transaction that, when its key's turn ends, releases the key's
      // next one, and writes the hold.
      if (claimed === undefined || claimed.orderingKey !== null || heldUntil !== undefined)
        return recordInTurn(id, owner, attempt, entry, outcome, health, claimed, heldUntil);
      const params = [id, owner, entry, outcome.status, outcome.nextAttemptAt];
      if (health !== undefined)
        return attemptResult(
          (await db.query(recordAttemptAndHealth, [...params, ...healthParams(attempt, health)]))[0],
        );
      return plainResult((await db.query(recordAttempt, params))[0]);
    },
  };
}
