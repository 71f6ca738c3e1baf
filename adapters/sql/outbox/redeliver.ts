/**
 * `redeliver` of src/rules/deliveries.ts: a delivery made pending and due now (a finished one taken
 * back from the log to the queue), or, while a call holds it, queued behind that call; held while
 * another delivery has its ordering key's turn.
 */
import type { Storage } from '../../../src/ports.js';
import type { Db } from '../client.js';
import type { Names } from '../schema.js';
import type { orderingKeys } from '../storage-keys.js';
import { deliveryColumns, queuedFrom, toDelivery } from '../storage-rows.js';
import { NOTIFY_WORK } from './publish.js';

export function createRedeliver(
  db: Db,
  names: Names,
  keys: ReturnType<typeof orderingKeys>,
  announce: { channel: string } | undefined,
): Pick<Storage, 'redeliver'> {
  const { table } = names;
  // In the queue: while a lease holds the delivery at $3, now, the redeliver is queued behind the
  // call in flight (never a second call at once); otherwise it is due now. Every SET reads the row
  // as it was. In the log (finished): taken back to the queue, due now. Either way, while another
  // delivery has its key's turn, it is held (the key locked by the caller). A slot its webhook's rate
  // limit gave it is given up: due now, it is paced again.
  const leased = `(d.lease_until IS NOT NULL AND d.lease_until >= $3::timestamptz)`;
  const keyTaken = (d: string) => `EXISTS (SELECT 1 FROM ${table('queue')} AS o
    WHERE o.webhook_id = ${d}.webhook_id AND o.ordering_key = ${d}.ordering_key AND o.id <> ${d}.id AND o.next_attempt_at IS NOT NULL)`;
  const redeliver = `WITH queued AS (
      UPDATE ${table('queue')} AS d
      SET redeliver_queued = ${leased},
        next_attempt_at = CASE WHEN ${leased} THEN d.next_attempt_at WHEN ${keyTaken('d')} THEN NULL ELSE $3::timestamptz END,
        lease_owner = CASE WHEN ${leased} THEN d.lease_owner END,
        lease_until = CASE WHEN ${leased} THEN d.lease_until END,
        paced = false
      WHERE d.account_id = $1::text AND d.id = $2::text
      RETURNING ${deliveryColumns('d')}
    ), finished AS (
      DELETE FROM ${table('deliveries')} AS d
      WHERE d.account_id = $1::text AND d.id = $2::text AND NOT EXISTS (SELECT 1 FROM queued)
      RETURNING d.*
    ), back AS (${queuedFrom(names, 'finished', `CASE WHEN ${keyTaken('s')} THEN NULL ELSE $3::timestamptz END`)})
    SELECT * FROM queued UNION ALL SELECT * FROM back`;
  const deliveryKey = `SELECT webhook_id, ordering_key FROM ${table('queue')} WHERE account_id = $1::text AND id = $2::text
    UNION ALL SELECT webhook_id, ordering_key FROM ${table('deliveries')} WHERE account_id = $1::text AND id = $2::text`;
  /**
   * The redeliver, under the key's lock for a keyed delivery. A delivery whose call was recorded
   * while this statement waited for its row has moved to the log, where this statement's snapshot
   * does not see it yet: tried once more, with a new one. `null`: no such delivery; `undefined`:
   * missed.
   */
  async function redeliverOnce(accountId: string, id: string, nextAttemptAt: string) {
    const [found] = await db.query(deliveryKey, [accountId, id]);
    if (found === undefined) return null;
    const [row] =
      found.ordering_key === null
        ? await db.query(redeliver, [accountId, id, nextAttemptAt])
        : await db.transaction(async (tx) => {
            await keys.lock(tx, [[found.webhook_id as string, found.ordering_key as string]]);
            return tx.query(redeliver, [accountId, id, nextAttemptAt]);
          });
    return row;
  }

  return {
    async redeliver(accountId, id, nextAttemptAt) {
      let row = await redeliverOnce(accountId, id, nextAttemptAt);
      if (row === undefined) row = await redeliverOnce(accountId, id, nextAttemptAt);
      if (row === undefined || row === null) return null;
      const delivery = toDelivery(row);
      // Due now: the workers of other instances hear of it, as of a publish. A queued one is due
      // once its call is recorded, and the worker recording it claims again.
      if (announce !== undefined && !delivery.redeliverQueued) await db.query(NOTIFY_WORK, [announce.channel]);
      return delivery;
    },
  };
}
