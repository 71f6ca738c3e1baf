import {
  MAX_ATTEMPTS_KEPT,
  dueAfter as dueAfterAttempt,
  endsTurn,
  inKeyOrder,
  isRecipient,
  newDelivery,
} from '../../src/rules/deliveries.js';
import { orderingKeys } from './storage-keys.js';
import { PortalError } from '../../src/errors.js';
import { attemptSucceeded } from '../../src/rules/webhook-health.js';
import type { AttemptRecorded, DeliveryTarget, HealthRule, Storage } from '../../src/ports.js';
import type {
  DeliveryAttempt,
  DeliveryQuery,
  DeliveryRecord,
  DeliveryStatus,
  EventFilter,
  EventRecord,
} from '../../src/records.js';
import type { Db, Planning, Queryable, Row } from './client.js';
import { atom } from '../../src/shared/time.js';
import { atomOf, type Names } from './schema.js';
import { countCalls } from './storage-call-stats.js';
import { lastAttempts } from './storage-migrations.js';
import {
  attemptResult,
  deliverable,
  healthParams,
  healthAfterSuccesses,
  recordAttemptWithHealth,
} from './storage-health.js';
import { createBatcher } from './batch.js';
import {
  deliveryColumns,
  deliveryColumnsOf,
  eventColumns,
  insertDeliveriesStatement,
  toDelivery,
  toEvent,
  toWebhook,
  webhookColumns,
} from './storage-rows.js';

/** How many undeliverable due deliveries one claim cancels at most (the rest, the next claims). */
const ORPHANS_PER_CLAIM = 1000;
/** Transactions storing publishes at once: more calls wait, and are stored together (see batch.ts). */
const MAX_STORING = 2;
/** Events of waiting calls stored in one transaction at most; a larger publish goes alone. */
const MAX_GROUP_EVENTS = 512;
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

type OutboxMethods = Pick<
  Storage,
  | 'publishEvents'
  | 'recentEvents'
  | 'getDelivery'
  | 'listDeliveries'
  | 'claimDeliveries'
  | 'recordAttempt'
  | 'redeliver'
>;

export interface Outbox extends OutboxMethods, Required<Pick<Storage, 'deliveryQueue'>> {
  /** Stores events and their deliveries inside the caller's transaction; resolves the deliveries. */
  storeEvents(tx: Queryable, batch: EventRecord[]): Promise<DeliveryRecord[]>;
}

/** The columns of `insertEvents`, as arrays. */
function eventColumnsOf(batch: EventRecord[]): unknown[] {
  return [
    batch.map((event) => event.id),
    batch.map((event) => event.accountId),
    batch.map((event) => event.type),
    batch.map((event) => event.createdAt),
    batch.map((event) => (event.data === undefined ? null : JSON.stringify(event.data))),
    batch.map((event) => event.orderingKey ?? null),
  ];
}

/** The deliveries of the events to the webhooks (rows of id, account_id, type, filter) each is for. */
function deliveriesOf(batch: EventRecord[], rows: Row[], target?: DeliveryTarget): DeliveryRecord[] {
  const made: DeliveryRecord[] = [];
  if (rows.length === 0) return made;
  const webhooks = rows.map((row) => ({
    id: row.id as string,
    accountId: row.account_id as string,
    type: row.type as string,
    ...(row.filter === null || row.filter === undefined
      ? {}
      : { filter: JSON.parse(row.filter as string) as EventFilter }),
  }));
  for (const event of batch) {
    for (const webhook of webhooks) {
      if (webhook.accountId !== event.accountId || !isRecipient(webhook, event, target)) continue;
      made.push(newDelivery(event, webhook.id));
    }
  }
  return made;
}

/**
 * `dueAfter` of rules/deliveries.ts over an attempt's JSON log entry (`entry`): the attempt's
 * start plus its duration, to the second.
 */
const dueAfter = (entry: string) =>
  `date_trunc('second', (${entry}->>'at')::timestamptz + (${entry}->>'durationMs')::int * interval '1 millisecond')`;
/** `isDueAfter` of rules/deliveries.ts on a recorded row (columns prefixed by `at`). */
const dueAgain = (entry: string, at = '') => `(${at}status = 'pending' AND ${at}next_attempt_at <= ${dueAfter(entry)})`;

/**
 * How the claims are planned. Each of their steps is written to start from an index and stop after
 * a few rows, but the planner chooses by the table's statistics, which a queue's table outruns: a
 * plan cached while the table was new read every row for the leasing update and the join to the
 * events, and after an ANALYZE in the middle of a burst each account's walk read its whole backlog
 * into a bitmap and sorted it (claims of 9 ms instead of 2.4). So a claim runs in a transaction of its
 * own with sequential and bitmap scans off (docs/performance.md, "Figures behind the code": the claim).
 */
const BY_INDEX: Planning = { byIndex: true };

/**
 * Milliseconds a new delivery may have been made before the claim that first sees it (clocks, commit
 * lag): each claim looks back `FRESH_SLACK_MS` from the previous claim, and one every `WIDE_SCAN_MS`
 * looks back `WIDE_SLACK_MS`, each to the start of that second. Due times are whole seconds: a
 * delivery made at 10.9 s and stored after a claim at 11.0 s is due at 10 s, a whole second before
 * the claim it missed, however short the lag. Every claim reads the stretch it looks back over, every
 * pending delivery due in it. So a claim reads the second before only when the claim before it came
 * less than `FRESH_SLACK_MS` into its own second: read by every claim, it slowed the deliveries while
 * publishing (bench row "webhook fleet"; docs/performance.md, "Figures behind the code": the claim).
 */
const FRESH_SLACK_MS = 250;
const WIDE_SLACK_MS = 1000;
const WIDE_SCAN_MS = 250;
/** The rescue (see `claimFloors`) at most this often, and at most 2 % of the time when it is slow. */
const RESCUE_MS = 15_000;
const RESCUE_SHARE = 50;

/** A floor as a number, for comparing: an ATOM time, or '-infinity'. */
const floorMs = (floor: string) => (floor === '-infinity' ? -Infinity : Date.parse(floor));

/**
 * Where this instance's fair claims start each account's walk (`fairClaim`). With VACUUM held back
 * (a long transaction anywhere on the database), every claim and record leaves row versions the
 * claim's index walk must step over, and walking each account from its first pending entry made
 * every claim pay for every delivery since: claims slowed, deliveries fell behind, and the
 * backlog grew (the horizon bench, `npm run bench:horizon`). So each account's walk starts at its
 * floor: the due time of the first delivery the last claim leased for it. Below the floor there
 * are only deliveries leased since (a call in flight), finished, or due again later. An account
 * with a delivery that fell due since the last claim (new, a retry whose time came, redelivered)
 * is found by a scan of just that stretch of the due index.
 *
 * What can fall below a floor unseen (a lease that ran out; a delivery whose due time lagged its
 * commit by more than the wide slack) is found by the rescue: a read of every account's earliest
 * claimable delivery, run beside the claims on a connection of its own (never holding one up),
 * every `RESCUE_MS` or, when it is slow, after 50 times as long as it took; it lowers the floors
 * it finds below. A first claim, and one whose clock jumped, walks every account from the start.
 */
function claimFloors() {
  /** Each known account's floor: an ATOM time, or '-infinity'. */
  const known = new Map<string, string>();
  let last: string | undefined;
  /** How far into its second the last claim began, at least: since the first claim this instance began in that second (ms). */
  let lastInto = 0;
  /** The second of the latest claims, and when (performance.now()) the first of them began. */
  let second: string | undefined;
  let secondBegan = 0;
  let nextWideScan = 0;
  let nextRescue = performance.now() + RESCUE_MS;
  let rescuing = false;
  return {
    known: known as ReadonlyMap<string, string>,
    /** Where the next claim's scan of newly due deliveries starts (that second included); `null`: a full claim. */
    windowFrom(now: string): string | null {
      const previous = last === undefined ? Number.NaN : Date.parse(last);
      const at = Date.parse(now);
      // A first claim, or a clock gone backwards or a minute ahead: every account, from the start.
      if (!(at >= previous && at - previous <= 60_000)) return null;
      const wide = performance.now() >= nextWideScan;
      if (wide) nextWideScan = performance.now() + WIDE_SCAN_MS;
      // A delivery the last claim missed, made at most FRESH_SLACK_MS before it, is due in that
      // claim's second if the claim came that far into it, else maybe in the second before. atom()
      // truncates: the scan starts where that second does.
      const lookBack = wide ? WIDE_SLACK_MS : lastInto >= FRESH_SLACK_MS ? 0 : FRESH_SLACK_MS;
      return atom(new Date(previous - lookBack));
    },
    /**
     * After a claim at `now` that began at `began` (performance.now()): each account leased for
     * starts its next walk at the first delivery leased; one the claim looked at, with room in its
     * share, and found nothing for, is forgotten (when the claim had room left, so nothing was passed
     * over); the others keep the floor the claim gave them (`f_accounts`, `f_floors` of its first row).
     */
    claimed(
      now: string,
      began: number,
      leased: DeliveryRecord[],
      row: Row | undefined,
      claim: { limit: number; max: number; inFlight: Readonly<Record<string, number>> },
    ) {
      // ATOM strings sort in time order. Claims run at once (workers sharing this store) may end out of order.
      if (second === undefined || now > second) [second, secondBegan] = [now, began];
      else if (now === second) secondBegan = Math.min(secondBegan, began);
      lastInto = now === second ? began - secondBegan : 0;
      last = now;
      const first = new Map<string, string>();
      for (const delivery of leased) {
        const seen = first.get(delivery.accountId);
        if (seen === undefined || delivery.nextAttemptAt! < seen)
          first.set(delivery.accountId, delivery.nextAttemptAt!);
      }
      const looked = (row?.f_accounts ?? []) as string[];
      const given = (row?.f_floors ?? []) as string[];
      for (const [i, account] of looked.entries()) {
        const leasedFrom = first.get(account);
        if (leasedFrom !== undefined) {
          known.set(account, leasedFrom);
          continue;
        }
        const room = claim.max - (Object.hasOwn(claim.inFlight, account) ? claim.inFlight[account]! : 0);
        // Room in its share, and the claim had room left: it has nothing due from its floor on.
        if (room > 0 && leased.length < claim.limit) known.delete(account);
        else if (!known.has(account)) known.set(account, given[i]!);
      }
    },
    /** Runs `read` (the rescue's statement: each account's earliest claimable due time) when one is due. */
    rescue(read: () => Promise<Row[]>): void {
      if (rescuing || performance.now() < nextRescue) return;
      rescuing = true;
      const started = performance.now();
      read()
        .then((rows) => {
          for (const row of rows) {
            const account = row.account_id as string;
            const due = row.due as string;
            const floor = known.get(account);
            if (floor === undefined || floorMs(due) < floorMs(floor)) known.set(account, due);
          }
        })
        // A rescue that failed (the database away) is tried again at the next one's time.
        .catch(() => {})
        .finally(() => {
          rescuing = false;
          nextRescue = performance.now() + Math.max(RESCUE_MS, RESCUE_SHARE * (performance.now() - started));
        });
    },
  };
}

/**
 * Events, deliveries and the claim. Statements are built once here, not per call.
 *
 * The delivery statements implement the rules of `src/rules/deliveries.ts`, the pure functions the
 * memory and fs adapters call: claimable (`isClaimable`), claim order (`compareDue`: ids are
 * `COLLATE "C"`, code-unit order), the claim walk (`planClaim`), `lease`, `recordAttempt`,
 * `redeliver`, `cancel` (also on webhook delete, in sql-storage.ts), and deliveries are made by
 * `newDelivery`. A change to a rule there is a change to a statement here; the conformance suite
 * holds the three adapters to the same behaviour.
 */
export function createOutbox(db: Db, names: Names, announce?: { channel: string }): Outbox {
  const { table } = names;
  const floors = claimFloors();
  const keys = orderingKeys(names);
  // Inside the publishing transaction: PostgreSQL delivers the notification when it commits, and
  // never when it rolls back, so a listener never hears of deliveries that do not exist.
  const notifyWork = `SELECT pg_notify($1::text, '')`;
  const insertEvents = `INSERT INTO ${table('events')} (id, account_id, type, created_at, data, ordering_key)
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::json[], $6::text[])`;
  // FOR KEY SHARE: a webhook being deleted meanwhile waits for this transaction, and then cancels
  // the deliveries made here, instead of leaving them pending for a webhook that is gone.
  const matchingWebhooks = `SELECT id, account_id, type, filter::text FROM ${table('webhooks')}
    WHERE (account_id, type) IN (SELECT * FROM unnest($1::text[], $2::text[]))
    ORDER BY created_at, id
    FOR KEY SHARE`;
  const targetWebhook = `SELECT id, account_id, type, filter::text FROM ${table('webhooks')} WHERE id = $1::text FOR KEY SHARE`;
  // Stores what newDelivery made; attempts and the lease start empty (the columns' defaults).
  const insertDeliveries = insertDeliveriesStatement(names);
  const findWebhooks = `SELECT id, account_id, type, filter::text FROM ${table('webhooks')}
    WHERE (account_id, type) IN (SELECT * FROM unnest($1::text[], $2::text[]))
    ORDER BY created_at, id`;
  // storeAtOnce's statement: $1–$6 the events, $7 the webhooks, $8–$16 the deliveries, $17 the
  // channel to notify (NULL: none). The foreign key from deliveries to events is checked at the end
  // of the statement, when the events are in. The notification goes out when the statement commits.
  const eventsStored = `SELECT id FROM ${table('events')} WHERE id = ANY ($1::text[]) LIMIT 1`;
  const deliveriesStored = `SELECT id FROM ${table('deliveries')} WHERE id = ANY ($1::text[])`;
  const storeAll = `WITH events AS (
      INSERT INTO ${table('events')} (id, account_id, type, created_at, data, ordering_key)
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::json[], $6::text[])
    ), webhooks AS (
      SELECT id FROM ${table('webhooks')} WHERE id = ANY ($7::text[]) FOR KEY SHARE
    ), stored AS (
      INSERT INTO ${table('deliveries')} (id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, ordering_key)
      SELECT made.id, made.account_id, made.webhook_id, made.event_id, made.status,
        -- Held when its key holds a pending delivery already (keyed publishes run this under their
        -- keys' locks, taken by a statement before this one). A later one of its key in this
        -- publish comes held already.
        CASE WHEN made.ordering_key IS NULL OR made.next_attempt_at IS NULL THEN made.next_attempt_at
          WHEN EXISTS (SELECT 1 FROM ${table('deliveries')} AS p
            WHERE p.webhook_id = made.webhook_id AND p.ordering_key = made.ordering_key AND p.status = 'pending') THEN NULL
          ELSE made.next_attempt_at END,
        made.created_at, made.event_type, made.ordering_key
      FROM unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::timestamptz[], $14::timestamptz[], $15::text[], $16::text[])
        AS made(id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, ordering_key)
      WHERE made.webhook_id IN (SELECT id FROM webhooks)
      RETURNING id, next_attempt_at
    ), announced AS (
      SELECT pg_notify($17::text, '') WHERE $17::text IS NOT NULL AND EXISTS (SELECT 1 FROM stored)
    )
    SELECT ARRAY(SELECT id FROM stored) AS stored, ARRAY(SELECT id FROM stored WHERE next_attempt_at IS NULL) AS held,
      (SELECT count(*) FROM announced) AS announced`;
  // From the index on (account_id, type, created_at), read backwards.
  const recentEvents = `SELECT ${eventColumns()} FROM ${table('events')}
    WHERE account_id = $1::text AND type = $2::text
    ORDER BY created_at DESC
    LIMIT $3::int`;
  const selectDelivery = `SELECT ${deliveryColumns()} FROM ${table('deliveries')} WHERE account_id = $1::text AND id = $2::text`;
  /**
   * A page of a delivery log: the statement for the filters given (one text per combination, so
   * each is planned for what it filters on), its parameters in order. The index on (webhook_id,
   * created_at, seq) is read backwards from the cursor or `until`, and stops at `since`.
   */
  const pageStatements = new Map<string, string>();
  function deliveryPage(
    accountId: string,
    webhookId: string,
    query: DeliveryQuery,
  ): { text: string; params: unknown[] } {
    const params: unknown[] = [accountId, webhookId];
    const where = ['webhook_id = $2::text', 'account_id = $1::text'];
    const add = (condition: (at: string) => string, ...values: unknown[]) => {
      const at = values.map((value) => `$${params.push(value)}`);
      where.push(condition(at.join(',')));
    };
    if (query.after !== undefined) {
      // A bigint's range, checked here: a 19-digit key past it would fail the cast in the server.
      if (!/^[0-9]{1,19}$/.test(query.after.key) || BigInt(query.after.key) > 9223372036854775807n) {
        throw new PortalError('INPUT_INVALID', 'cursor', 'is not one this list gave; pass nextCursor as it came.');
      }
      params.push(query.after.createdAt, query.after.key);
      where.push(`(created_at, seq) < ($${params.length - 1}::timestamptz, $${params.length}::bigint)`);
    }
    if (query.status !== undefined) add((at) => `status = ${at}::text`, query.status);
    if (query.eventType !== undefined) add((at) => `event_type = ${at}::text`, query.eventType);
    if (query.eventId !== undefined) add((at) => `event_id = ${at}::text`, query.eventId);
    if (query.since !== undefined) add((at) => `created_at >= ${at}::timestamptz`, query.since);
    if (query.until !== undefined) add((at) => `created_at < ${at}::timestamptz`, query.until);
    params.push(query.limit + 1);
    const shape = where.join(' AND ');
    let text = pageStatements.get(shape);
    if (text === undefined) {
      // Ordered by the table's columns (d.): a bare created_at here would name the formatted text
      // the select list gives back, and sort every delivery of the webhook by it.
      text = `SELECT ${deliveryColumns('d')}, d.seq::text AS page_key FROM ${table('deliveries')} AS d
        WHERE ${shape}
        ORDER BY d.created_at DESC, d.seq DESC
        LIMIT $${params.length}::int`;
      pageStatements.set(shape, text);
    }
    return { text, params };
  }
  // isClaimable, on a row aliased d.
  const claimable = `d.status = 'pending' AND d.next_attempt_at <= $1::timestamptz
        AND (d.lease_until IS NULL OR d.lease_until < $1::timestamptz)`;
  // A due delivery is sent only while its webhook exists and is not disabled; otherwise the claim cancels it.
  const sendable = deliverable(names);
  const cancelled = `status = 'cancelled', next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL, redeliver_queued = false`;
  // A key whose turn the claim cancels (its webhook disabled) has its held deliveries cancelled in
  // the same statement: each would be when its turn came (`claimDeliveries` of the in-process store).
  const heldOfOrphans = `heldOfOrphans AS (
      UPDATE ${table('deliveries')} AS h SET ${cancelled}
      FROM (SELECT DISTINCT webhook_id, ordering_key FROM orphans WHERE ordering_key IS NOT NULL) AS k
      WHERE h.webhook_id = k.webhook_id AND h.ordering_key = k.ordering_key AND h.status = 'pending' AND h.next_attempt_at IS NULL
    )`;
  // The leasing of the rows locked by `due`, and the claim's answer: each with its event and webhook.
  // The rows are found by primary key from an array: joined to `due` instead, the planner, once the
  // table had statistics, read the whole table to hash it (docs/performance.md, "Figures behind the code": the claim).
  // By ctid: each row of `due` is locked by this statement, so it cannot move meanwhile, and a TID
  // scan is what the planner takes whatever it believes of the table (see `recordSuccesses`).
  const leasedCte = `leased AS (
      UPDATE ${table('deliveries')} AS d SET lease_owner = $4::text, lease_until = $2::timestamptz, redeliver_queued = false
      WHERE d.ctid = ANY (ARRAY(SELECT row FROM due))
      RETURNING d.*
    )`;
  const returnedSelect = `SELECT ${deliveryColumns('d', 'd_')}, ${eventColumns('e', 'e_')}, ${webhookColumns('w', 'w_')}
    FROM leased AS d
    JOIN ${table('events')} AS e ON e.id = d.event_id
    JOIN ${table('webhooks')} AS w ON w.id = d.webhook_id`;
  const leasedAndReturned = () => `${leasedCte}
    ${returnedSelect}
    ORDER BY d.next_attempt_at, d.id`;
  // planClaim in one statement: lock the claimable rows no other claim holds (SKIP LOCKED), lease
  // them, return them with their event and webhook. A row another claim leased and committed
  // meanwhile is re-checked against the WHERE clause on its new version, so it is not leased twice.
  // A claimable delivery whose webhook is gone (redelivered as the webhook was deleted) or disabled
  // is cancelled when the walk passes it, that is when it comes before the last one leased or the
  // limit was not reached: there is nowhere to send it, and left pending it would stay due forever.
  // At most ORPHANS_PER_CLAIM of them, skipping rows another claim holds: a disabled webhook's backlog
  // of thousands is cancelled over several claims instead of one long UPDATE every instance waits on.
  const claim = `WITH due AS (
      SELECT id, next_attempt_at, ctid AS row FROM ${table('deliveries')} AS d
      WHERE ${claimable} AND ${sendable}
      ORDER BY next_attempt_at, id
      LIMIT $3::int
      FOR UPDATE SKIP LOCKED
    ), orphans AS (
      UPDATE ${table('deliveries')} AS o SET ${cancelled}
      WHERE o.id IN (
        SELECT d.id FROM ${table('deliveries')} AS d
        WHERE ${claimable} AND NOT ${sendable}
          AND ((SELECT count(*) FROM due) < $3::int
            OR (d.next_attempt_at, d.id) < (SELECT next_attempt_at, id FROM due ORDER BY next_attempt_at DESC, id DESC LIMIT 1))
        ORDER BY d.next_attempt_at, d.id
        LIMIT ${ORPHANS_PER_CLAIM}
        FOR UPDATE SKIP LOCKED)
      RETURNING o.webhook_id, o.ordering_key
    ), ${heldOfOrphans}, ${leasedAndReturned()}`;
  // The fair claim (planClaim with perAccount), the worker's: of each account's claimable
  // deliveries only the first (max - held in flight), in claim order, may be leased. The accounts
  // with pending deliveries are found by a skip scan of portal_deliveries_pending_account (one index
  // probe per account), and each account's first ones by a LATERAL read of the same index. Every
  // step starts from an index and reads a few rows per account, whatever the planner believes of the
  // table's size: a table filled seconds ago has no statistics, and a join left to the planner then
  // read the whole due backlog (docs/performance.md, "Figures behind the code": the claim).
  // Two passes over each account's first ones: the first, without a lock, finds how many of each
  // account the claim takes (the first `limit` of all, in claim order); the second locks that many
  // of the account (SKIP LOCKED: passing over another claim's, so that two claims at once both
  // fill up). A lock is a write: locking every account's whole share to lease a few of them (64
  // locks for 16 leases with 8 accounts) cost as much as the rest of the claim.
  // The walk is per account: the deliveries it passes whose webhook is gone take their place in the
  // limit and are cancelled. A disabled webhook's due deliveries are found from the disabled
  // webhooks instead (portal_webhook_health_disabled: a probe of an empty index when none is) and
  // cancelled, at most ORPHANS_PER_CLAIM a claim.
  // Two things keep each account's walk an ordered read of that index, stopped at its LIMIT, once the
  // table has statistics too. The disabled webhooks are read once into an array that the walk tests
  // each row against: as an anti-join, planned with statistics, each account's whole due backlog was
  // read, hashed and sorted. The order names the account first, which only that index gives: by
  // (next_attempt_at, id) alone, the planner could walk portal_deliveries_due, every account's rows,
  // to find one account's (docs/performance.md, "Figures behind the code": the claim).
  // Each account's walk starts at its floor (see `floors` below): the row versions a claim passes
  // before the first live one are those it left behind itself, not every one since VACUUM last ran.
  const accountDue = `FROM ${table('deliveries')} AS d
        WHERE d.account_id = accounts.account_id AND d.next_attempt_at >= accounts.floor AND ${claimable}
          AND d.webhook_id <> ALL ((SELECT ids FROM disabled)::text[])
        ORDER BY d.account_id, d.next_attempt_at, d.id`;
  // The accounts a claim looks at, each with the time its walk starts at:
  // - a full claim ($10 NULL): every account with pending deliveries, found by a skip scan, from the
  //   start (-infinity);
  // - otherwise the accounts this instance knows ($8, from its floors $9), and those with a delivery
  //   that fell due since the last claim (from $10 on): new ones, retries whose time came, redelivered.
  const fairClaim = `WITH RECURSIVE disabled AS MATERIALIZED (
      SELECT coalesce(array_agg(webhook_id), '{}') AS ids FROM ${table('webhook_health')} WHERE disabled_at IS NOT NULL
    ), everyAccount(account_id) AS (
      (SELECT account_id FROM ${table('deliveries')} WHERE $10::timestamptz IS NULL AND status = 'pending' ORDER BY account_id LIMIT 1)
      UNION ALL
      SELECT (SELECT p.account_id FROM ${table('deliveries')} AS p
              WHERE p.status = 'pending' AND p.account_id > everyAccount.account_id ORDER BY p.account_id LIMIT 1)
      FROM everyAccount WHERE everyAccount.account_id IS NOT NULL
    ), fresh AS MATERIALIZED (
      -- In due order, which portal_deliveries_due gives for just this stretch: read for the
      -- accounts in their order instead, portal_deliveries_pending_account was walked whole, every
      -- pending delivery at each claim (docs/performance.md, "Figures behind the code": the claim).
      SELECT stretch.account_id FROM (
        SELECT d.account_id FROM ${table('deliveries')} AS d
        WHERE $10::timestamptz IS NOT NULL AND d.status = 'pending'
          AND d.next_attempt_at >= $10::timestamptz AND d.next_attempt_at <= $1::timestamptz
        ORDER BY d.next_attempt_at
        OFFSET 0
      ) AS stretch
      GROUP BY stretch.account_id
    ), floors AS MATERIALIZED (
      SELECT every.account_id, min(every.floor) AS floor FROM (
        SELECT account_id, '-infinity'::timestamptz AS floor FROM everyAccount WHERE account_id IS NOT NULL
        UNION ALL SELECT * FROM unnest($8::text[], $9::timestamptz[])
        UNION ALL SELECT account_id, $10::timestamptz FROM fresh
      ) AS every(account_id, floor)
      GROUP BY every.account_id
    ), shares AS MATERIALIZED (
      SELECT floors.account_id, floors.floor, greatest(0, $7::int - coalesce(held.n, 0)) AS n FROM floors
      LEFT JOIN unnest($5::text[], $6::int[]) AS held(account_id, n) ON held.account_id = floors.account_id
    ), wanted AS (
      SELECT taken.account_id, taken.floor, count(*)::int AS n FROM (
        SELECT accounts.account_id, accounts.floor FROM shares AS accounts
        CROSS JOIN LATERAL (SELECT d.id, d.next_attempt_at ${accountDue} LIMIT least(accounts.n, $3::int)) AS first
        ORDER BY first.next_attempt_at, first.id
        LIMIT $3::int
      ) AS taken
      GROUP BY taken.account_id, taken.floor
    ), locked AS MATERIALIZED (
      SELECT first.id, first.next_attempt_at, first.row, EXISTS (SELECT 1 FROM ${table('webhooks')} AS w WHERE w.id = first.webhook_id) AS sendable
      FROM wanted AS accounts
      CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at, d.webhook_id, d.ctid AS row ${accountDue} LIMIT accounts.n FOR UPDATE OF d SKIP LOCKED
      ) AS first
    ), due AS (
      SELECT id, next_attempt_at, row FROM locked WHERE sendable
    ), gone AS (
      UPDATE ${table('deliveries')} AS o SET ${cancelled}
      WHERE o.ctid = ANY (ARRAY(SELECT row FROM locked WHERE NOT sendable))
        -- A test of no row of the table: with none gone, the update reads nothing, whatever plan
        -- it was given (one made while the table was small read all of it for an empty array).
        AND EXISTS (SELECT 1 FROM locked WHERE NOT sendable)
    ), orphans AS (
      UPDATE ${table('deliveries')} AS o SET ${cancelled}
      WHERE o.id = ANY (ARRAY(
        SELECT passed.id FROM ${table('webhook_health')} AS h
        CROSS JOIN LATERAL (
          SELECT d.id FROM ${table('deliveries')} AS d
          WHERE d.account_id = h.account_id AND d.webhook_id = h.webhook_id AND ${claimable}
          ORDER BY d.next_attempt_at, d.id
          LIMIT ${ORPHANS_PER_CLAIM}
          FOR UPDATE OF d SKIP LOCKED
        ) AS passed
        WHERE h.disabled_at IS NOT NULL
        LIMIT ${ORPHANS_PER_CLAIM}))
        -- As in gone: with no webhook disabled, nothing read.
        AND (SELECT cardinality(ids) FROM disabled) > 0
      RETURNING o.webhook_id, o.ordering_key
    ), ${heldOfOrphans}, ${leasedCte}, returned AS (${returnedSelect})
    -- One row at least, leased or not; the first carries the accounts the claim looked at, and their
    -- floors (on every row, the driver parsed the two arrays once per delivery claimed).
    SELECT returned.*,
      CASE WHEN row_number() OVER (ORDER BY returned.d_next_attempt_at, returned.d_id) = 1 THEN looked.f_accounts END AS f_accounts,
      CASE WHEN row_number() OVER (ORDER BY returned.d_next_attempt_at, returned.d_id) = 1 THEN looked.f_floors END AS f_floors
    FROM (
      SELECT array_agg(account_id) AS f_accounts,
        array_agg(CASE WHEN floor = '-infinity' THEN '-infinity' ELSE ${atomOf('floor')} END) AS f_floors
      FROM floors) AS looked
    LEFT JOIN returned ON true
    ORDER BY returned.d_next_attempt_at, returned.d_id`;
  // The rescue of claimFloors: each account's earliest claimable delivery, read without a lock.
  const rescue = `SELECT d.account_id, ${atomOf('min(d.next_attempt_at)')} AS due FROM ${table('deliveries')} AS d
    WHERE ${claimable}
    GROUP BY d.account_id`;
  // The attempt appended, and the oldest dropped once more than MAX_ATTEMPTS_KEPT are held.
  const appendAttempt = (entry: string) => `attempts = CASE WHEN jsonb_array_length(attempts) < ${MAX_ATTEMPTS_KEPT}
          THEN attempts || jsonb_build_array(${entry}) ELSE ${lastAttempts(`attempts || jsonb_build_array(${entry})`)} END,
        attempt_count = attempt_count + 1`;
  // The outcome, or with a redeliver queued during the call: pending, due as the call ended.
  const outcomeOf = (
    entry: string,
    status: string,
    next: string,
  ) => `status = CASE WHEN redeliver_queued THEN 'pending' ELSE ${status} END,
        next_attempt_at = CASE WHEN redeliver_queued THEN ${dueAfter(entry)} ELSE ${next} END, redeliver_queued = false`;
  // status || '': the same test, in a form that does not make the partial indexes of pending rows
  // usable, so the row is found by its key whatever the table's statistics say (see recordSuccesses).
  const recordAttemptUpdate = `UPDATE ${table('deliveries')}
    SET ${appendAttempt('$3::jsonb')}, ${outcomeOf('$3::jsonb', '$4::text', '$5::timestamptz')}, lease_owner = NULL, lease_until = NULL
    WHERE id = $1::text AND lease_owner = $2::text AND status || '' = 'pending'`;
  // Each attempt is counted in its webhook's hour by the statement that records it (countCalls).
  const recordAttempt = `WITH recorded AS (
      ${recordAttemptUpdate} RETURNING id, ${dueAgain('$3::jsonb')} AS due_again, webhook_id, account_id, ordering_key, status
    ), ${countCalls(names, 'SELECT r.webhook_id, r.account_id, $3::jsonb AS entry FROM recorded AS r')}
    SELECT id, due_again, webhook_id, ordering_key, status FROM recorded`;
  const recordAttemptAndHealth = recordAttemptWithHealth(names, recordAttemptUpdate, dueAgain('$3::jsonb'));
  // recordAttempt with health, for many successful attempts in one statement (see
  // recordSuccessesTogether). Each delivery is looked up and locked by primary key first (a LATERAL
  // per attempt), then updated by key: a join left to the planner read every pending row when the
  // table's statistics lagged behind a burst (docs/performance.md, "Figures behind the code": recordSuccesses). The lock
  // makes the update's checks hold until it is made.
  //
  // The lookup names the id alone, and the lease and status are checked on the row it locked (OFFSET
  // 0 keeps the planner from moving them into it): with "status = 'pending'" inside, a table whose
  // statistics lagged (a burst, a long transaction holding VACUUM back) had the planner walk a whole
  // partial index of pending rows for each id. The update then finds each locked row by its ctid (a
  // TID scan, whatever the planner believes of the table; the row cannot move while this statement
  // holds its lock): by id, it read the whole table once, in the horizon bench (the figures of both
  // in docs/performance.md, "Figures behind the code": recordSuccesses).
  const recordSuccesses = `WITH held AS MATERIALIZED (
      SELECT i.*, leased.ctid AS row FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::text[], $5::timestamptz[], $6::timestamptz[])
        AS i(id, owner, entry, status, next_attempt_at, at)
      CROSS JOIN LATERAL (
        SELECT d.ctid, d.lease_owner, d.status FROM ${table('deliveries')} AS d WHERE d.id = i.id FOR UPDATE OFFSET 0
      ) AS leased
      WHERE leased.lease_owner = i.owner AND leased.status = 'pending'
    ), recorded AS (
      UPDATE ${table('deliveries')} AS d
      SET ${appendAttempt('i.entry')}, ${outcomeOf('i.entry', 'i.status', 'i.next_attempt_at')}, lease_owner = NULL, lease_until = NULL
      FROM held AS i
      WHERE d.ctid = ANY (ARRAY(SELECT row FROM held)) AND d.ctid = i.row
      RETURNING d.id, d.webhook_id, d.account_id, i.at, i.entry, ${dueAgain('i.entry', 'd.')} AS due_again, d.ordering_key, d.status
    ), ${healthAfterSuccesses(names)},
    ${countCalls(names, 'SELECT r.webhook_id, r.account_id, r.entry FROM recorded AS r CROSS JOIN (SELECT count(*) FROM health) AS after_health')}
    SELECT id, due_again, webhook_id, ordering_key, status FROM recorded`;
  // While a lease holds the delivery at $3, now, the redeliver is queued behind the call in flight
  // (never a second call at once); otherwise the delivery is pending and due now. Every SET reads
  // the row as it was.
  // While another delivery has its key's turn, it is held (the key locked by the caller).
  const leased = `(d.lease_until IS NOT NULL AND d.lease_until >= $3::timestamptz)`;
  const keyTaken = `EXISTS (SELECT 1 FROM ${table('deliveries')} AS o
    WHERE o.webhook_id = d.webhook_id AND o.ordering_key = d.ordering_key AND o.id <> d.id AND o.status = 'pending' AND o.next_attempt_at IS NOT NULL)`;
  const redeliver = `UPDATE ${table('deliveries')} AS d
    SET redeliver_queued = ${leased},
      status = CASE WHEN ${leased} THEN d.status ELSE 'pending' END,
      next_attempt_at = CASE WHEN ${leased} THEN d.next_attempt_at WHEN ${keyTaken} THEN NULL ELSE $3::timestamptz END,
      lease_owner = CASE WHEN ${leased} THEN d.lease_owner END,
      lease_until = CASE WHEN ${leased} THEN d.lease_until END
    WHERE d.account_id = $1::text AND d.id = $2::text
    RETURNING ${deliveryColumns('d')}`;
  const deliveryKey = `SELECT webhook_id, ordering_key FROM ${table('deliveries')} WHERE account_id = $1::text AND id = $2::text`;
  const deliveryKeyById = `SELECT webhook_id, ordering_key FROM ${table('deliveries')} WHERE id = $1::text`;

  async function storeEvents(tx: Queryable, batch: EventRecord[], target?: DeliveryTarget): Promise<DeliveryRecord[]> {
    if (batch.length === 0) return [];
    await tx.query(insertEvents, eventColumnsOf(batch));
    const webhooks = target
      ? await tx.query(targetWebhook, [target.webhookId])
      : await tx.query(matchingWebhooks, [batch.map((event) => event.accountId), batch.map((event) => event.type)]);
    const created = await keys.inOrder(tx, deliveriesOf(batch, webhooks, target));
    if (created.length > 0) {
      await tx.query(insertDeliveries, deliveryColumnsOf(created));
      if (announce !== undefined) await tx.query(notifyWork, [announce.channel]);
    }
    return created;
  }

  const storeAlone = (batch: EventRecord[], target?: DeliveryTarget) =>
    db.transaction((tx) => storeEvents(tx, batch, target));

  /**
   * storeEvents for a publish of its own, in two round trips instead of a transaction's six: the
   * matching webhooks are read first, and the events with their deliveries are stored by one
   * statement, which locks those webhooks FOR KEY SHARE and stores the deliveries of the ones still
   * there. A webhook deleted in between gets no delivery (one being deleted is waited for); one
   * created in between gets none either, as if it came after the publish.
   */
  async function storeAtOnce(batch: EventRecord[]): Promise<DeliveryRecord[]> {
    const webhooks = await db.query(findWebhooks, [
      batch.map((event) => event.accountId),
      batch.map((event) => event.type),
    ]);
    // The later ones of a key in this publish wait for its first; the statement holds the first
    // when the key is taken already.
    const made = inKeyOrder(deliveriesOf(batch, webhooks), () => false);
    const params = [
      ...eventColumnsOf(batch),
      [...new Set(made.map((delivery) => delivery.webhookId))],
      ...deliveryColumnsOf(made),
      announce?.channel ?? null,
    ];
    const keyed = made.filter((delivery) => delivery.orderingKey !== null);
    let row: Row | undefined;
    if (keyed.length === 0) {
      // One statement stores them all or none: when its answer is lost (the server restarting), the
      // events' ids say which, and the deliveries it stored are read back by theirs.
      const settle = async () => {
        const found = await db.query(eventsStored, [batch.map((event) => event.id)]);
        if (found.length === 0) return null;
        const stored = await db.query(deliveriesStored, [made.map((delivery) => delivery.id)]);
        return [{ stored: stored.map((row) => row.id as string), held: [] }];
      };
      [row] = await db.query(storeAll, params, { settle });
    } else {
      // Keyed: under the keys' locks, taken by a statement of their own before it.
      [row] = await db.transaction(async (tx) => {
        await keys.lock(
          tx,
          keyed.map((delivery) => [delivery.webhookId, delivery.orderingKey!]),
        );
        return tx.query(storeAll, params);
      });
    }
    if (made.length === 0) return [];
    const stored = new Set(row!.stored as string[]);
    const held = new Set(row!.held as string[]);
    return made
      .filter((delivery) => stored.has(delivery.id))
      .map((delivery) =>
        held.has(delivery.id) && delivery.nextAttemptAt !== null ? { ...delivery, nextAttemptAt: null } : delivery,
      );
  }
  /**
   * `recordAttempt` of a keyed delivery (or one whose key the caller did not give, read first), in a
   * transaction under its key's lock, taken before the row's: a redeliver takes them in that order
   * too, so the two never wait for each other. When the attempt ends the key's turn (`endsTurn`),
   * the key's next is released; a publish that held the lock before saw this one pending and held
   * its own, which the release's statement (begun after the lock) sees.
   */
  async function recordInTurn(
    id: string,
    owner: string,
    attempt: DeliveryAttempt,
    entry: string,
    outcome: { status: DeliveryStatus; nextAttemptAt: string | null },
    health: HealthRule | undefined,
    claimed: Pick<DeliveryRecord, 'webhookId' | 'orderingKey'> | undefined,
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
      const result: AttemptRecorded =
        health === undefined ? row !== undefined && (row.due_again === true ? 'due-again' : true) : attemptResult(row);
      if (result === false) return false;
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

  /** Publishes at once share a transaction (see batch.ts); each call gets its own events' deliveries. */
  const publishTogether = createBatcher<EventRecord[], DeliveryRecord[]>({
    maxRunning: MAX_STORING,
    maxSize: MAX_GROUP_EVENTS,
    size: (batch) => batch.length,
    async run(batches) {
      const byEvent = new Map<string, DeliveryRecord[]>();
      const all = batches.flat();
      for (const delivery of await storeAtOnce(all)) {
        const list = byEvent.get(delivery.eventId);
        if (list === undefined) byEvent.set(delivery.eventId, [delivery]);
        else list.push(delivery);
      }
      return batches.map((batch) => batch.flatMap((event) => byEvent.get(event.id) ?? []));
    },
  });
  /**
   * Successful attempts at once share a statement: a success changes a webhook's health the same way
   * whatever came before it, so the attempts of one webhook fold into one health write. A failure,
   * whose effect on the health depends on the run before it (and may disable the webhook), is
   * recorded by a statement of its own.
   */
  const recordSuccessesTogether = createBatcher<SuccessfulAttempt, boolean | 'due-again'>({
    maxRunning: MAX_RECORDING,
    maxSize: MAX_GROUP_ATTEMPTS,
    size: () => 1,
    async run(successes) {
      const params = [
        successes.map((one) => one.id),
        successes.map((one) => one.owner),
        successes.map((one) => one.entry),
        successes.map((one) => one.status),
        successes.map((one) => one.nextAttemptAt),
        successes.map((one) => one.at),
      ];
      // With keyed deliveries among them, in a transaction that ends their keys' turns.
      const rows = !successes.some((one) => one.orderingKey !== null)
        ? await db.query(recordSuccesses, params)
        : await db.transaction(async (tx) => {
            // The keys' locks before the rows' (see recordInTurn).
            await keys.lock(
              tx,
              successes.filter((one) => one.orderingKey !== null).map((one) => [one.webhookId, one.orderingKey!]),
            );
            const recorded = await tx.query(recordSuccesses, params);
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
      const recorded = new Map(rows.map((row) => [row.id as string, row.due_again === true]));
      return successes.map((one) => (recorded.get(one.id) ? 'due-again' : recorded.has(one.id)));
    },
  });

  // The claimable deliveries, earliest due first, from the due index: at most $2 of its entries.
  const deliveryQueue = `WITH waiting AS (
      SELECT d.next_attempt_at FROM ${table('deliveries')} AS d WHERE ${claimable}
      ORDER BY d.next_attempt_at LIMIT $2::int
    )
    SELECT count(*)::int AS waiting, ${atomOf('min(next_attempt_at)')} AS oldest FROM waiting`;

  return {
    storeEvents,
    async deliveryQueue(now, limit) {
      const [row] = await db.query(deliveryQueue, [now, limit]);
      return { waiting: Number(row?.waiting ?? 0), oldestDueAt: typeof row?.oldest === 'string' ? row.oldest : null };
    },
    async publishEvents(batch, target) {
      if (batch.length === 0) return [];
      // A publish to one webhook (a test event, a redeliver) is rare: it goes on its own.
      if (target !== undefined) return storeAlone(batch, target);
      return publishTogether(batch);
    },
    async recentEvents(accountId, type, limit) {
      return (await db.query(recentEvents, [accountId, type, limit])).map((row) => toEvent(row));
    },
    async getDelivery(accountId, id) {
      const [row] = await db.query(selectDelivery, [accountId, id]);
      return row === undefined ? null : toDelivery(row);
    },
    async listDeliveries(accountId, webhookId, query) {
      const { text, params } = deliveryPage(accountId, webhookId, query);
      const rows = await db.query(text, params);
      const deliveries = rows.slice(0, query.limit).map((row) => toDelivery(row));
      const last = rows.length > query.limit ? rows[query.limit - 1]! : undefined;
      return {
        deliveries,
        next: last === undefined ? null : { createdAt: deliveries.at(-1)!.createdAt, key: last.page_key as string },
      };
    },
    async claimDeliveries({ now, leaseUntil, limit, owner, perAccount }) {
      if (limit <= 0) return [];
      if (perAccount === undefined) {
        const rows = await db.transaction((tx) => tx.query(claim, [now, leaseUntil, limit, owner]), BY_INDEX);
        return rows.map((row) => ({
          delivery: toDelivery(row, 'd_'),
          event: toEvent(row, 'e_'),
          webhook: toWebhook(row, 'w_'),
        }));
      }
      const held = Object.entries(perAccount.inFlight);
      const from = floors.windowFrom(now);
      const known = [...floors.known];
      const began = performance.now();
      const rows = await db.transaction(
        (tx) =>
          tx.query(fairClaim, [
            now,
            leaseUntil,
            limit,
            owner,
            held.map(([account]) => account),
            held.map(([, n]) => n),
            perAccount.max,
            known.map(([account]) => account),
            known.map(([, floor]) => floor),
            from,
          ]),
        BY_INDEX,
      );
      // The one row of a claim that leased nothing carries only what it looked at.
      const claimed = rows
        .filter((row) => row.d_id !== null)
        .map((row) => ({ delivery: toDelivery(row, 'd_'), event: toEvent(row, 'e_'), webhook: toWebhook(row, 'w_') }));
      floors.claimed(
        now,
        began,
        claimed.map(({ delivery }) => delivery),
        rows[0],
        { limit, ...perAccount },
      );
      floors.rescue(() => db.query(rescue, [now]));
      return claimed;
    },
    async recordAttempt(id, owner, attempt, outcome, health, claimed) {
      const entry = JSON.stringify({
        at: attempt.at,
        statusCode: attempt.statusCode,
        error: attempt.error,
        durationMs: attempt.durationMs,
        ...(attempt.local ? { local: true } : {}),
      });
      if (claimed !== undefined && health !== undefined && attemptSucceeded(attempt)) {
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
      // A delivery that may have a key (it has one, or the caller did not say): recorded in a
      // transaction that, when its key's turn ends, releases the key's next one.
      if (claimed === undefined || claimed.orderingKey !== null)
        return recordInTurn(id, owner, attempt, entry, outcome, health, claimed);
      const params = [id, owner, entry, outcome.status, outcome.nextAttemptAt];
      if (health !== undefined)
        return attemptResult(
          (await db.query(recordAttemptAndHealth, [...params, ...healthParams(attempt, health)]))[0],
        );
      const rows = await db.query(recordAttempt, params);
      return rows.length === 1 && (rows[0]!.due_again === true ? 'due-again' : true);
    },
    async redeliver(accountId, id, nextAttemptAt) {
      const [found] = await db.query(deliveryKey, [accountId, id]);
      if (found === undefined) return null;
      const [row] =
        found.ordering_key === null
          ? await db.query(redeliver, [accountId, id, nextAttemptAt])
          : await db.transaction(async (tx) => {
              await keys.lock(tx, [[found.webhook_id as string, found.ordering_key as string]]);
              return tx.query(redeliver, [accountId, id, nextAttemptAt]);
            });
      if (row === undefined) return null;
      const delivery = toDelivery(row);
      // Due now: the workers of other instances hear of it, as of a publish. A queued one is due
      // once its call is recorded, and the worker recording it claims again.
      if (announce !== undefined && !delivery.redeliverQueued) await db.query(notifyWork, [announce.channel]);
      return delivery;
    },
  };
}
