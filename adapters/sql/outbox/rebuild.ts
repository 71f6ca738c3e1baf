/**
 * The rebuild: the deliveries the queue's unlogged slots lost in a crash of the database server
 * (ring.ts), made again as `newDelivery` of src/rules/deliveries.ts made them.
 *
 * A slot only ever holds what a publish made and no attempt touched: a delivery of no ordering key,
 * not yet tried. Each publish notes the (event, webhook) pairs it put in a slot in
 * `portal_queue_made`, which is logged and truncated with the slot: the notes name every delivery
 * a slot can have lost, and no more than the slots hold. Each pair that neither the queue nor the
 * log holds now, and whose webhook still exists, is made again in the kept partition: pending,
 * under the id it had (`deliveryIdOf` of src/shared/ids.ts, computed here by `deliveryIdSql`), and due
 * at the claim that rebuilds (`now`), not when its event happened: below the floors the claims walk
 * from (floors.ts), it would wait for a rescue.
 *
 * A call in flight when the server crashed lost its lease with it: its record is refused, and the
 * delivery, made again, is called again (at least once, as after a worker's crash).
 */
import { lockWithin, type Db } from '../client.js';
import type { Names } from '../schema.js';
import { KEPT_SLOT, type Rebuild, ringIntact } from './ring.js';

/** First key of the rebuild's advisory lock: 'cprb' in ASCII. */
const REBUILD_LOCK_CLASS = 0x63707262;

/** `deliveryIdOf` in SQL, over the SQL expressions of an event's id and a webhook's. */
export const deliveryIdSql = (eventId: string, webhookId: string) =>
  `'whd_' || left(encode(sha256(convert_to(${eventId} || E'\\n' || ${webhookId}, 'UTF8')), 'hex'), 22)`;

export function createRebuild(db: Db, names: Names): Rebuild {
  const { table } = names;
  const rebuild = `INSERT INTO ${table('queue')}
      (id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, event_gen, slot)
    SELECT ${deliveryIdSql('l.event_id', 'l.webhook_id')}, e.account_id, l.webhook_id, l.event_id, 'pending',
      greatest(e.created_at, $1::timestamptz), e.created_at, e.type, l.event_gen, ${KEPT_SLOT}
    FROM (
      SELECT made.event_gen, noted.event_id, noted.webhook_id FROM ${table('queue_made')} AS made
      CROSS JOIN LATERAL unnest(made.event_ids, made.webhook_ids) AS noted(event_id, webhook_id)
    ) AS l
    JOIN ${table('events')} AS e ON e.gen = l.event_gen AND e.id = l.event_id
    WHERE EXISTS (SELECT 1 FROM ${table('webhooks')} AS w WHERE w.id = l.webhook_id)
      AND NOT EXISTS (SELECT 1 FROM ${table('queue')} AS q WHERE q.event_id = l.event_id AND q.webhook_id = l.webhook_id)
      AND NOT EXISTS (SELECT 1 FROM ${table('deliveries')} AS d
        WHERE d.event_gen = l.event_gen AND d.event_id = l.event_id AND d.webhook_id = l.webhook_id)`;

  return async (now) => {
    await db.transaction(async (tx) => {
      // One instance rebuilds; the others, waiting here, find it done.
      await lockWithin(tx, REBUILD_LOCK_CLASS, names.schema);
      const [state] = await tx.query(`SELECT ${ringIntact(names)} AS intact`);
      if (state?.intact === true) return;
      await tx.query(rebuild, [now]);
      await tx.query(`INSERT INTO ${table('queue_intact')} VALUES (true)`);
    });
  };
}
