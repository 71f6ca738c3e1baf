/**
 * The claim: `planClaim` of src/rules/deliveries.ts in one statement. The claimable deliveries
 * (`isClaimable`), in claim order (`compareDue`: ids are `COLLATE "C"`, code-unit order), leased
 * (`lease`) with their events and webhooks; the fair claim keeps each account to its share. A due
 * delivery with nowhere to go is cancelled (`cancel`). Where each account's walk starts is
 * floors.ts's.
 */
import type { ClaimedKeys } from './claimed-keys.js';
import type { Storage } from '../../../src/ports.js';
import type { Db, Planning } from '../client.js';
import { atomOf, type Names } from '../schema.js';
import { deliverable } from '../storage-health.js';
import {
  deliveryColumns,
  eventColumns,
  finishedFrom,
  queuedFrom,
  toDelivery,
  toEvent,
  toWebhook,
  webhookColumns,
} from '../storage-rows.js';
import { claimFloors } from './floors.js';
import { intoKept, type Ring } from './ring.js';

/** How many undeliverable due deliveries one claim cancels at most (the rest, the next claims). */
const ORPHANS_PER_CLAIM = 1000;
/**
 * How many of the first due deliveries of an account with a held webhook a deferral looks at: more
 * than an account's walk reads in one claim, so that the walk meets none of the held ones.
 */
const HELD_PER_CLAIM = 256;
/**
 * A deferral at most this often from one instance, while any webhook is held: each costs a
 * statement (a claim of a 20,000 backlog took 6 ms with one after it, 3 without). What falls due
 * meanwhile is passed over by the walk, and deferred by the next.
 */
const DEFER_EVERY_MS = 250;
/**
 * How many of the first due deliveries of an account with a rate-limited webhook a pacing looks at,
 * and how often one instance paces while a webhook has a limit: a new delivery of a limited webhook
 * waits for its pacing, so at most this long more than it would for a claim (and a tick).
 */
const PACE_SCAN = 4096;
const PACE_EVERY_MS = 100;
/** Deliveries of the queue before the ring adopted by one statement at most. */
const ADOPT_BATCH = 10_000;
const ADOPT_EVERY_MS = 1_000;

/**
 * How the claims are planned. Each of their steps is written to start from an index and stop after
 * a few rows, but the planner chooses by the table's statistics, which a queue's table outruns: a
 * plan cached while the table was new read every row for the leasing update and the join to the
 * events, and after an ANALYZE in the middle of a burst each account's walk read its whole backlog
 * into a bitmap and sorted it (claims of 9 ms instead of 2.4). So a claim runs in a transaction of its
 * own with sequential and bitmap scans off (docs/performance.md, "Figures behind the code": the claim).
 *
 * And it commits without waiting for its WAL's flush: a lease lost in a crash of the server leaves
 * its delivery due again, called again once the server is back (at least once, as after a worker's
 * crash), and the attempt's record, whose commit is flushed, flushes the lease's WAL with its own.
 * What else a claim does (cancelling, adopting, deferring, pacing) the next claim does again. The
 * flush, several milliseconds on a loaded disk, was on the path of every delivery's first call.
 */
const CLAIMING: Planning = { byIndex: true, unflushedCommit: true };

export function createClaim(
  db: Db,
  names: Names,
  claimedKeys: ClaimedKeys,
  ring: Pick<Ring, 'turn'>,
): Required<Pick<Storage, 'claimDeliveries' | 'deliveryQueue'>> & { paceSoon(): void } {
  const { table } = names;
  const floors = claimFloors();
  // isClaimable, on a row aliased d of the queue (every delivery there is pending).
  const claimable = `d.next_attempt_at <= $1::timestamptz AND (d.lease_until IS NULL OR d.lease_until < $1::timestamptz)`;
  // A due delivery is sent only while its webhook exists and is not disabled; otherwise the claim cancels it.
  const sendable = deliverable(names);
  // `cancel`: the deliveries a CTE named `cte` took out of the queue (RETURNING the row) go to the log, cancelled.
  const cancelled = (cte: string) => `${cte}Kept AS (${finishedFrom(names, cte, "'cancelled'")})`;
  // A key whose turn the claim cancels (its webhook disabled) has its held deliveries cancelled in
  // the same statement: each would be when its turn came (`claimDeliveries` of the in-process store).
  const heldOfOrphans = `heldOfOrphans AS (
      DELETE FROM ${table('queue')} AS h
      USING (SELECT DISTINCT webhook_id, ordering_key FROM orphans WHERE ordering_key IS NOT NULL) AS k
      WHERE h.webhook_id = k.webhook_id AND h.ordering_key = k.ordering_key AND h.next_attempt_at IS NULL
      RETURNING h.*
    ), ${cancelled('heldOfOrphans')}`;
  // The webhooks held now (`heldAt`: a Retry-After not yet past), read once from their partial
  // index, an empty probe while none is: their deliveries are passed over and deferred instead.
  const held = `held AS MATERIALIZED (
      SELECT coalesce(array_agg(webhook_id), '{}') AS ids FROM ${table('webhook_health')} WHERE held_until > $1::timestamptz
    )`;
  const notHeld = `d.webhook_id <> ALL ((SELECT ids FROM held)::text[])`;
  // The webhooks with a rate limit, read once from their partial index (an empty probe while none
  // has one): a delivery of theirs is leased only once paced (`slotOf` of planClaim), which the
  // pacing below does; the lease spends the slot (paced false again).
  const limited = `limited AS MATERIALIZED (
      SELECT coalesce(array_agg(id), '{}') AS ids FROM ${table('webhooks')} WHERE rate_limit IS NOT NULL
    )`;
  const pacedOrFree = `(d.paced OR d.webhook_id <> ALL ((SELECT ids FROM limited)::text[]))`;
  // `defer`: the due deliveries of held webhooks made due when their hold ends, at most every
  // DEFER_EVERY_MS. Only those among the first HELD_PER_CLAIM due of each account with a held
  // webhook, in due order (what the account's walk would meet first), are looked at: once they are
  // deferred, a deferral reads that many index entries, not the account's whole due backlog (reading
  // the held webhook's own rows instead, a claim of a 20,000 backlog went from 3 to 26 ms while one
  // webhook was held). Locked SKIP LOCKED (a claim's rows are passed over); sendable ones only
  // (those of a webhook gone or disabled are the orphans' to cancel). A statement of its own, run
  // after a claim that found a webhook held: inside the claim, even unused, it slowed every claim of
  // a 20,000 backlog tenfold (bench row "webhook fleet, 1 worker", draining).
  const deferHeld = `WITH held AS MATERIALIZED (
      SELECT webhook_id, account_id FROM ${table('webhook_health')} WHERE held_until > $1::timestamptz
    ), front AS (
      SELECT first.id FROM (SELECT DISTINCT account_id FROM held) AS accounts
      CROSS JOIN LATERAL (
        SELECT d.id, d.webhook_id FROM ${table('queue')} AS d
        WHERE d.account_id = accounts.account_id AND ${claimable}
        ORDER BY d.account_id, d.next_attempt_at, d.id
        LIMIT ${HELD_PER_CLAIM}
      ) AS first
      WHERE first.webhook_id IN (SELECT webhook_id FROM held)
    ), locked AS (
      SELECT d.id FROM ${table('queue')} AS d
      WHERE d.id = ANY (ARRAY(SELECT id FROM front)) AND ${claimable} AND ${sendable}
      FOR UPDATE OF d SKIP LOCKED
    ), repaced AS (
      -- The slots a rate limit gave the deferred ones are spent on nothing: the pacing starts again
      -- once the hold ends (pace_second NULL: from then).
      UPDATE ${table('webhooks')} AS w SET pace_second = NULL, pace_used = 0
      WHERE w.id IN (SELECT webhook_id FROM held) AND w.pace_second IS NOT NULL
    )
    UPDATE ${table('queue')} AS o
    SET next_attempt_at = (SELECT h.held_until FROM ${table('webhook_health')} AS h WHERE h.webhook_id = o.webhook_id),
      paced = false
    WHERE o.id = ANY (ARRAY(SELECT id FROM locked))`;
  const anyHeldOrLimited = `SELECT EXISTS (SELECT 1 FROM ${table('webhook_health')} WHERE held_until > $1::timestamptz) AS held,
    EXISTS (SELECT 1 FROM ${table('webhooks')} WHERE rate_limit IS NOT NULL) AS limited`;
  // `paceSlots` of src/rules/rate-limit.ts: the due deliveries of rate-limited webhooks not yet
  // paced, each given its second, at most rate_limit to a second, from where the webhook's pacing
  // stood (pace_second, pace_used), which moves on. Only those among the first PACE_SCAN due of
  // each account with a limited webhook are looked at, in due order: what the account's walk meets
  // first (as `deferHeld`). The webhooks' rows are locked SKIP LOCKED (one instance paces a webhook
  // at a time, and the slots it gives are its own), and so are the deliveries (a claim's are passed
  // over). A held webhook's are left to `deferHeld`.
  const pace = `WITH held AS MATERIALIZED (
      SELECT coalesce(array_agg(webhook_id), '{}') AS ids FROM ${table('webhook_health')} WHERE held_until > $1::timestamptz
    ), limited AS MATERIALIZED (
      SELECT id, account_id FROM ${table('webhooks')} WHERE rate_limit IS NOT NULL
    ), front AS MATERIALIZED (
      SELECT first.id, first.webhook_id FROM (SELECT DISTINCT account_id FROM limited) AS accounts
      CROSS JOIN LATERAL (
        SELECT d.id, d.webhook_id, d.paced FROM ${table('queue')} AS d
        WHERE d.account_id = accounts.account_id AND ${claimable}
        ORDER BY d.account_id, d.next_attempt_at, d.id
        LIMIT ${PACE_SCAN}
      ) AS first
      WHERE NOT first.paced AND first.webhook_id IN (SELECT id FROM limited)
        AND first.webhook_id <> ALL ((SELECT ids FROM held)::text[])
    ), pacing AS MATERIALIZED (
      SELECT w.id, w.rate_limit,
        CASE WHEN w.pace_second IS NULL OR w.pace_second < $1::timestamptz THEN $1::timestamptz ELSE w.pace_second END AS second,
        CASE WHEN w.pace_second IS NULL OR w.pace_second < $1::timestamptz THEN 0 ELSE w.pace_used END AS used
      FROM ${table('webhooks')} AS w
      WHERE w.id IN (SELECT webhook_id FROM front) AND w.rate_limit IS NOT NULL
      FOR UPDATE OF w SKIP LOCKED
    ), locked AS MATERIALIZED (
      SELECT d.id, d.webhook_id, d.next_attempt_at FROM ${table('queue')} AS d
      WHERE d.id = ANY (ARRAY(SELECT id FROM front)) AND ${claimable} AND NOT d.paced
        AND d.webhook_id IN (SELECT id FROM pacing)
      FOR UPDATE OF d SKIP LOCKED
    ), numbered AS MATERIALIZED (
      SELECT l.id, l.webhook_id, row_number() OVER (PARTITION BY l.webhook_id ORDER BY l.next_attempt_at, l.id) - 1 AS i
      FROM locked AS l
    ), paced AS (
      UPDATE ${table('queue')} AS d
      SET paced = true, next_attempt_at = p.second + ((p.used + n.i) / p.rate_limit) * interval '1 second'
      FROM numbered AS n JOIN pacing AS p ON p.id = n.webhook_id
      WHERE d.id = ANY (ARRAY(SELECT id FROM numbered)) AND d.id = n.id
      RETURNING d.next_attempt_at
    ), moved AS (
      UPDATE ${table('webhooks')} AS w
      SET pace_second = p.second + ((p.used + c.n - 1) / p.rate_limit) * interval '1 second',
        pace_used = ((p.used + c.n - 1) % p.rate_limit) + 1
      FROM (SELECT webhook_id, count(*) AS n FROM numbered GROUP BY webhook_id) AS c
      JOIN pacing AS p ON p.id = c.webhook_id
      WHERE w.id = c.webhook_id
    )
    SELECT count(*)::int AS paced FROM paced`;
  // The leasing of the rows locked by `due`, and the claim's answer: each with its event and webhook.
  // The rows are found by primary key from an array: joined to `due` instead, the planner, once the
  // table had statistics, read the whole table to hash it (docs/performance.md, "Figures behind the code": the claim).
  // By ctid: each row of `due` is locked by this statement, so it cannot move meanwhile, and a TID
  // scan is what the planner takes whatever it believes of the table (see `recordSuccesses`); with
  // the partition's oid, as a ctid names a row of one partition only (ring.ts).
  const leasedCte = `leased AS (
      UPDATE ${table('queue')} AS d SET lease_owner = $4::text, lease_until = $2::timestamptz, redeliver_queued = false,
        paced = false
      WHERE d.ctid = ANY (ARRAY(SELECT row FROM due)) AND (d.tableoid, d.ctid) = ANY (ARRAY(SELECT (part, row) FROM due))
      RETURNING d.*
    )`;
  // Each event from its generation's partition alone (pruned as the join runs, by the row's event_gen).
  const returnedSelect = `SELECT ${deliveryColumns('d', 'd_')}, ${eventColumns('e', 'e_')}, ${webhookColumns('w', 'w_')}
    FROM leased AS d
    JOIN ${table('events')} AS e ON e.gen = d.event_gen AND e.id = d.event_id
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
  const claim = `WITH ${held}, ${limited}, due AS (
      SELECT id, next_attempt_at, ctid AS row, tableoid AS part FROM ${table('queue')} AS d
      WHERE ${claimable} AND ${sendable} AND ${notHeld} AND ${pacedOrFree} AND d.webhook_id <> ALL ($5::text[])
      ORDER BY next_attempt_at, id
      LIMIT $3::int
      FOR UPDATE SKIP LOCKED
    ), orphans AS (
      DELETE FROM ${table('queue')} AS o
      WHERE o.id IN (
        SELECT d.id FROM ${table('queue')} AS d
        WHERE ${claimable} AND NOT ${sendable}
          AND ((SELECT count(*) FROM due) < $3::int
            OR (d.next_attempt_at, d.id) < (SELECT next_attempt_at, id FROM due ORDER BY next_attempt_at DESC, id DESC LIMIT 1))
        ORDER BY d.next_attempt_at, d.id
        LIMIT ${ORPHANS_PER_CLAIM}
        FOR UPDATE SKIP LOCKED)
      RETURNING o.*
    ), ${cancelled('orphans')}, ${heldOfOrphans}, ${leasedAndReturned()}`;
  // The fair claim (planClaim with perAccount), the worker's: of each account's claimable
  // deliveries only the first (max - held in flight), in claim order, may be leased. The accounts
  // with pending deliveries are found by a skip scan of portal_queue_account (one index
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
  // (next_attempt_at, id) alone, the planner could walk portal_queue_due, every account's rows,
  // to find one account's (docs/performance.md, "Figures behind the code": the claim).
  // Each account's walk starts at its floor (see `floors` below): the row versions a claim passes
  // before the first live one are those it left behind itself, not every one since VACUUM last ran.
  const accountDue = `FROM ${table('queue')} AS d
        WHERE d.account_id = accounts.account_id AND d.next_attempt_at >= accounts.floor AND ${claimable}
          AND d.webhook_id <> ALL ((SELECT ids FROM disabled)::text[]) AND ${notHeld} AND ${pacedOrFree}
          AND d.webhook_id <> ALL ($11::text[])
        ORDER BY d.account_id, d.next_attempt_at, d.id`;
  // The accounts a claim looks at, each with the time its walk starts at:
  // - a full claim ($10 NULL): every account with pending deliveries, found by a skip scan, from the
  //   start (-infinity);
  // - otherwise the accounts this instance knows ($8, from its floors $9), and those with a delivery
  //   that fell due since the last claim (from $10 on): new ones, retries whose time came, redelivered.
  const fairClaim = `WITH RECURSIVE disabled AS MATERIALIZED (
      SELECT coalesce(array_agg(webhook_id), '{}') AS ids FROM ${table('webhook_health')} WHERE disabled_at IS NOT NULL
    ), ${held}, ${limited}, everyAccount(account_id) AS (
      (SELECT account_id FROM ${table('queue')} WHERE $10::timestamptz IS NULL ORDER BY account_id LIMIT 1)
      UNION ALL
      SELECT (SELECT p.account_id FROM ${table('queue')} AS p
              WHERE p.account_id > everyAccount.account_id ORDER BY p.account_id LIMIT 1)
      FROM everyAccount WHERE everyAccount.account_id IS NOT NULL
    ), fresh AS MATERIALIZED (
      -- In due order, which portal_queue_due gives for just this stretch: read for the
      -- accounts in their order instead, portal_queue_account was walked whole, every
      -- pending delivery at each claim (docs/performance.md, "Figures behind the code": the claim).
      SELECT stretch.account_id FROM (
        SELECT d.account_id FROM ${table('queue')} AS d
        WHERE $10::timestamptz IS NOT NULL
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
      SELECT first.id, first.next_attempt_at, first.row, first.part, EXISTS (SELECT 1 FROM ${table('webhooks')} AS w WHERE w.id = first.webhook_id) AS sendable
      FROM wanted AS accounts
      CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at, d.webhook_id, d.ctid AS row, d.tableoid AS part ${accountDue} LIMIT accounts.n FOR UPDATE OF d SKIP LOCKED
      ) AS first
    ), due AS (
      SELECT id, next_attempt_at, row, part FROM locked WHERE sendable
    ), gone AS (
      DELETE FROM ${table('queue')} AS o
      WHERE o.ctid = ANY (ARRAY(SELECT row FROM locked WHERE NOT sendable))
        AND (o.tableoid, o.ctid) = ANY (ARRAY(SELECT (part, row) FROM locked WHERE NOT sendable))
        -- A test of no row of the table: with none gone, the update reads nothing, whatever plan
        -- it was given (one made while the table was small read all of it for an empty array).
        AND EXISTS (SELECT 1 FROM locked WHERE NOT sendable)
      RETURNING o.*
    ), ${cancelled('gone')}, orphans AS (
      DELETE FROM ${table('queue')} AS o
      WHERE o.id = ANY (ARRAY(
        SELECT passed.id FROM ${table('webhook_health')} AS h
        CROSS JOIN LATERAL (
          SELECT d.id FROM ${table('queue')} AS d
          WHERE d.account_id = h.account_id AND d.webhook_id = h.webhook_id AND ${claimable}
          ORDER BY d.next_attempt_at, d.id
          LIMIT ${ORPHANS_PER_CLAIM}
          FOR UPDATE OF d SKIP LOCKED
        ) AS passed
        WHERE h.disabled_at IS NOT NULL
        LIMIT ${ORPHANS_PER_CLAIM}))
        -- As in gone: with no webhook disabled, nothing read.
        AND (SELECT cardinality(ids) FROM disabled) > 0
      RETURNING o.*
    ), ${cancelled('orphans')}, ${heldOfOrphans}, ${leasedCte}, returned AS (${returnedSelect})
    -- One row at least, leased or not; the first carries the accounts the claim looked at, and their
    -- floors (on every row, the driver parsed the two arrays once per delivery claimed).
    SELECT returned.*,
      CASE WHEN row_number() OVER (ORDER BY returned.d_next_attempt_at, returned.d_id) = 1 THEN looked.f_accounts END AS f_accounts,
      CASE WHEN row_number() OVER (ORDER BY returned.d_next_attempt_at, returned.d_id) = 1 THEN looked.f_floors END AS f_floors,
      (SELECT cardinality(ids) FROM held) AS f_held,
      (SELECT cardinality(ids) FROM limited) AS f_limited
    FROM (
      SELECT array_agg(account_id) AS f_accounts,
        array_agg(CASE WHEN floor = '-infinity' THEN '-infinity' ELSE ${atomOf('floor')} END) AS f_floors
      FROM floors) AS looked
    LEFT JOIN returned ON true
    ORDER BY returned.d_next_attempt_at, returned.d_id`;
  // A pending delivery stored in the log by an instance of a version before the queue (during an
  // upgrade, when instances of both run), moved to the queue as it stands, its lease dropped: a full
  // claim and the rescue run this first. The log's index of pending rows is empty otherwise, and the
  // statement a probe of it.
  const adopt = `WITH strays AS (
      DELETE FROM ${table('deliveries')} WHERE status = 'pending' RETURNING *
    ) ${queuedFrom(names, 'strays', 's.next_attempt_at')}`;
  // A pending delivery an instance of a release before the ring queued in portal_delivery_queue
  // (during an upgrade), moved to the kept partition as it stands once no lease of that instance
  // holds it, a batch at a time: a full claim and the rescue run this first too. A probe of an
  // empty table once the instances of that release are gone.
  const adoptQueued = `WITH old AS (
      DELETE FROM ${table('delivery_queue')} AS o
      WHERE o.ctid = ANY (ARRAY(
        SELECT ctid FROM ${table('delivery_queue')} WHERE lease_until IS NULL OR lease_until < $1::timestamptz
        LIMIT ${ADOPT_BATCH} FOR UPDATE SKIP LOCKED))
      RETURNING o.*
    )
    ${intoKept(names, 'old')}`;
  const adoptAll = async (now: string) => {
    await db.query(adopt);
    await db.query(adoptQueued, [now]);
  };
  // The plain claim (no floors, no full claims) adopts at most every ADOPT_EVERY_MS.
  let nextAdoption = 0;
  const adoptEvery = async (now: string) => {
    if (performance.now() < nextAdoption) return;
    nextAdoption = performance.now() + ADOPT_EVERY_MS;
    await adoptAll(now);
  };
  // The rescue of claimFloors: each account's earliest claimable delivery, read without a lock.
  const rescue = `SELECT d.account_id, ${atomOf('min(d.next_attempt_at)')} AS due FROM ${table('queue')} AS d
    WHERE ${claimable}
    GROUP BY d.account_id`;

  // The claimable deliveries, earliest due first, from the due index: at most $2 of its entries.
  const deliveryQueue = `WITH waiting AS (
      SELECT d.next_attempt_at FROM ${table('queue')} AS d WHERE ${claimable}
      ORDER BY d.next_attempt_at LIMIT $2::int
    )
    SELECT count(*)::int AS waiting, ${atomOf('min(next_attempt_at)')} AS oldest FROM waiting`;

  let nextDeferral = 0;
  const deferHeldAt = async (now: string) => {
    if (performance.now() < nextDeferral) return;
    nextDeferral = performance.now() + DEFER_EVERY_MS;
    await db.transaction((tx) => tx.query(deferHeld, [now]), CLAIMING);
  };

  // Whether the last claim saw a webhook with a rate limit (at first, unknown: look).
  let anyLimited = true;
  let nextPacing = 0;
  let pacedAt: string | undefined;
  // At most every PACE_EVERY_MS, and in every second a claim is made in.
  const paceAt = async (now: string) => {
    if (!anyLimited || (performance.now() < nextPacing && now === pacedAt)) return;
    nextPacing = performance.now() + PACE_EVERY_MS;
    pacedAt = now;
    await db.transaction((tx) => tx.query(pace, [now]), CLAIMING);
  };

  return {
    /** The next claim paces first: a webhook's limit changed, and what waited for its slots is due again. */
    paceSoon() {
      anyLimited = true;
      nextPacing = 0;
      pacedAt = undefined;
    },
    async deliveryQueue(now, limit) {
      const [row] = await db.query(deliveryQueue, [now, limit]);
      return { waiting: Number(row?.waiting ?? 0), oldestDueAt: typeof row?.oldest === 'string' ? row.oldest : null };
    },
    async claimDeliveries({ now, leaseUntil, limit, owner, perAccount, fullWebhooks = [] }) {
      if (limit <= 0) return [];
      await ring.turn(now);
      await paceAt(now);
      if (perAccount === undefined) {
        await adoptEvery(now);
        const rows = await db.transaction(
          (tx) => tx.query(claim, [now, leaseUntil, limit, owner, fullWebhooks]),
          CLAIMING,
        );
        const [seen] = await db.query(anyHeldOrLimited, [now]);
        anyLimited = seen?.limited === true;
        if (seen?.held === true) await deferHeldAt(now);
        const claimed = rows.map((row) => ({
          delivery: toDelivery(row, 'd_'),
          event: toEvent(row, 'e_'),
          webhook: toWebhook(row, 'w_'),
        }));
        claimedKeys.remember(claimed.map(({ delivery }) => delivery));
        return claimed;
      }
      const held = Object.entries(perAccount.inFlight);
      const from = floors.windowFrom(now);
      if (from === null) await adoptAll(now);
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
            fullWebhooks,
          ]),
        CLAIMING,
      );
      // Some webhook is held: its due deliveries the walk passed over are made due when the hold ends.
      if (Number(rows[0]?.f_held ?? 0) > 0) await deferHeldAt(now);
      anyLimited = Number(rows[0]?.f_limited ?? 0) > 0;
      // The one row of a claim that leased nothing carries only what it looked at.
      const claimed = rows
        .filter((row) => row.d_id !== null)
        .map((row) => ({ delivery: toDelivery(row, 'd_'), event: toEvent(row, 'e_'), webhook: toWebhook(row, 'w_') }));
      claimedKeys.remember(claimed.map(({ delivery }) => delivery));
      floors.claimed(
        now,
        began,
        claimed.map(({ delivery }) => delivery),
        rows[0],
        { limit, ...perAccount, fullWebhooks },
      );
      floors.rescue(async () => {
        await adoptAll(now);
        return db.query(rescue, [now]);
      });
      return claimed;
    },
  };
}
