/**
 * The rebuild: the deliveries the queue's unlogged slots lost in a crash of the database server
 * (ring.ts), made again from their events, as `newDelivery` of src/rules/deliveries.ts made them.
 *
 * A slot only ever holds what a publish made and no attempt touched: a delivery of no ordering key,
 * not yet tried. Each event keeps the webhooks its publish made deliveries for (`targets`, ids
 * separated by spaces). So what was lost is every (event, webhook) of those events that neither the
 * queue nor the log holds, among the events published since the oldest slot still in use opened,
 * less CLOCK_MARGIN for the hosts' clocks. Each is made again in the kept partition, pending, due
 * when its event happened, under the id it had (`deliveryIdOf` of src/shared/ids.ts, computed here
 * by `deliveryIdSql`). One whose webhook is gone is not.
 *
 * An event stored by a release before migration 29 has no targets (null): its deliveries are found
 * as its publish found them (`isRecipient`) among the webhooks there now. Such an event can have lost
 * deliveries only when the server crashed while instances of both releases ran.
 *
 * A call in flight when the server crashed lost its lease with it: its record is refused, and the
 * delivery, made again, is called again (at least once, as after a worker's crash).
 */
import { lockWithin, type Db, type Queryable } from '../client.js';
import { atomOf, type Names } from '../schema.js';
import { deliveryColumnsOf } from '../storage-rows.js';
import { deliveriesOf } from './publish.js';
import { KEPT_SLOT, type Rebuild, ringIntact } from './ring.js';

/** How far the hosts' clocks may be apart: events this much older than the oldest slot are read too. */
const CLOCK_MARGIN = '1 minute';
/** Events of a release before migration 29 read at once. */
const UNTARGETED_PAGE = 5_000;
/** First key of the rebuild's advisory lock: 'cprb' in ASCII. */
const REBUILD_LOCK_CLASS = 0x63707262;

/** `deliveryIdOf` in SQL, over the SQL expressions of an event's id and a webhook's. */
export const deliveryIdSql = (eventId: string, webhookId: string) =>
  `'whd_' || left(encode(sha256(convert_to(${eventId} || E'\\n' || ${webhookId}, 'UTF8')), 'hex'), 22)`;

export function createRebuild(db: Db, names: Names): Rebuild {
  const { table } = names;
  // Where the events to look at start ($1 of the others), to the second below: null when every slot is empty.
  const since = `SELECT ${atomOf(`(min(opened_at) - interval '${CLOCK_MARGIN}')`)} AS at
    FROM ${table('queue_ring')} WHERE state <> 'empty'`;
  // The unkeyed events (`e`) published since $1, of the generations that can hold them (the others pruned).
  const recent = `e.created_at >= $1::timestamptz AND e.ordering_key IS NULL
    AND e.gen >= (SELECT coalesce(max(g.gen), 0) FROM ${table('generations')} AS g WHERE g.started_at <= $1::timestamptz)`;
  // Neither in the queue nor in the log, its webhook still there: `l` holds event_id, webhook_id, event_gen.
  const missing = `EXISTS (SELECT 1 FROM ${table('webhooks')} AS w WHERE w.id = l.webhook_id)
    AND NOT EXISTS (SELECT 1 FROM ${table('queue')} AS q WHERE q.event_id = l.event_id AND q.webhook_id = l.webhook_id)
    AND NOT EXISTS (SELECT 1 FROM ${table('deliveries')} AS d
      WHERE d.event_gen = l.event_gen AND d.event_id = l.event_id AND d.webhook_id = l.webhook_id)`;
  const columns =
    'id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, ordering_key, event_gen, slot';
  const targeted = `INSERT INTO ${table('queue')} (${columns})
    SELECT ${deliveryIdSql('l.event_id', 'l.webhook_id')}, l.account_id, l.webhook_id, l.event_id, 'pending',
      l.created_at, l.created_at, l.type, NULL, l.event_gen, ${KEPT_SLOT}
    FROM (
      SELECT e.id AS event_id, e.account_id, e.type, e.created_at, e.gen AS event_gen, t.webhook_id
      FROM ${table('events')} AS e
      CROSS JOIN LATERAL unnest(string_to_array(e.targets, ' ')) AS t(webhook_id)
      WHERE ${recent} AND e.targets <> ''
    ) AS l
    WHERE ${missing}`;
  const untargeted = `SELECT e.id, e.account_id, e.type, ${atomOf('e.created_at')} AS created_at, e.gen, e.data::text AS data
    FROM ${table('events')} AS e
    WHERE ${recent} AND e.targets IS NULL AND (e.created_at, e.id) > ($2::timestamptz, $3::text)
    ORDER BY e.created_at, e.id
    LIMIT ${UNTARGETED_PAGE}`;
  const webhooksOf = `SELECT id, account_id, type, filter::text FROM ${table('webhooks')}
    WHERE (account_id, type) IN (SELECT * FROM unnest($1::text[], $2::text[]))
    ORDER BY created_at, id`;
  const insertMissing = `INSERT INTO ${table('queue')} (${columns})
    SELECT l.id, l.account_id, l.webhook_id, l.event_id, l.status, l.next_attempt_at, l.created_at, l.event_type,
      NULL, l.event_gen, ${KEPT_SLOT}
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[],
      $8::text[], $9::text[], $10::int[])
      AS l(id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, ordering_key, event_gen)
    WHERE ${missing}`;

  /** The deliveries of the events of a release before migration 29, found as their publish found them. */
  async function rebuildUntargeted(tx: Queryable, from: string): Promise<void> {
    let after = { at: '-infinity', id: '' };
    for (;;) {
      const rows = await tx.query(untargeted, [from, after.at, after.id]);
      if (rows.length === 0) return;
      const events = rows.map((row) => ({
        id: row.id as string,
        accountId: row.account_id as string,
        type: row.type as string,
        createdAt: row.created_at as string,
        data: row.data === null ? null : JSON.parse(row.data as string),
      }));
      const webhooks = await tx.query(webhooksOf, [events.map((e) => e.accountId), events.map((e) => e.type)]);
      const made = deliveriesOf(events, webhooks);
      const gens = new Map(rows.map((row) => [row.id as string, Number(row.gen)]));
      if (made.length > 0)
        await tx.query(insertMissing, [...deliveryColumnsOf(made), made.map((one) => gens.get(one.eventId)!)]);
      const last = rows.at(-1)!;
      after = { at: last.created_at as string, id: last.id as string };
    }
  }

  return async () => {
    await db.transaction(async (tx) => {
      // One instance rebuilds; the others, waiting here, find it done.
      await lockWithin(tx, REBUILD_LOCK_CLASS, names.schema);
      const [state] = await tx.query(`SELECT ${ringIntact(names)} AS intact`);
      if (state?.intact === true) return;
      const [window] = await tx.query(since);
      const from = window?.at;
      if (from !== null && from !== undefined) {
        await tx.query(targeted, [from]);
        await rebuildUntargeted(tx, from as string);
      }
      await tx.query(`INSERT INTO ${table('queue_intact')} VALUES (true)`);
    });
  };
}
