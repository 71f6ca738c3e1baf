/**
 * Retention: finished deliveries (the log; pending ones are in the queue) and the events no delivery names, once past
 * the host's `retention`, removed oldest first in batches of at most `limit` a pass.
 */
import type { Storage } from '../../../src/ports.js';
import type { Db } from '../client.js';
import type { Names } from '../schema.js';

export function createRetention(db: Db, { table }: Names): Pick<Storage, 'removeExpired'> {
  // Retention, oldest first, each row once across instances (SKIP LOCKED): a row another instance
  // is removing, or a redeliver is taking back to the queue, is left to the next pass. The status
  // test is what lets the log's index of finished rows (created_at) serve the walk; without it the
  // whole log was read and sorted each pass. A pending row there is one an earlier release stored
  // during an upgrade, for the claim to adopt, not to remove.
  const removeDeliveries = `WITH doomed AS (
      SELECT id FROM ${table('deliveries')}
      WHERE status <> 'pending' AND created_at < $1::timestamptz
      ORDER BY created_at LIMIT $2::int
      FOR UPDATE SKIP LOCKED
    )
    , gone AS (DELETE FROM ${table('deliveries')} AS d USING doomed WHERE d.id = doomed.id RETURNING 1)
    SELECT count(*)::int AS removed FROM gone`;
  // An event goes once no delivery names it: a pending delivery's event, or a kept one's, stays.
  const removeEvents = `WITH doomed AS (
      SELECT e.id FROM ${table('events')} AS e
      WHERE e.created_at < $1::timestamptz
        AND NOT EXISTS (SELECT 1 FROM ${table('deliveries')} AS d WHERE d.event_id = e.id)
        AND NOT EXISTS (SELECT 1 FROM ${table('delivery_queue')} AS q WHERE q.event_id = e.id)
      ORDER BY e.created_at LIMIT $2::int
      FOR UPDATE SKIP LOCKED
    )
    , gone AS (DELETE FROM ${table('events')} AS e USING doomed WHERE e.id = doomed.id RETURNING 1)
    SELECT count(*)::int AS removed FROM gone`;

  return {
    async removeExpired(before, limit) {
      // Replayable: run twice, a removal of what is past retention only removes more of it.
      const removed = async (text: string, at: string | null) =>
        at === null ? 0 : Number((await db.query(text, [at, limit], { replayable: true }))[0]!.removed);
      return {
        deliveries: await removed(removeDeliveries, before.deliveries),
        events: await removed(removeEvents, before.events),
      };
    },
  };
}
