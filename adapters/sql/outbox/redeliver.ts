/**
 * `redeliver` of src/rules/deliveries.ts: a delivery made pending and due now, or, while a call holds
 * it, queued behind that call; held while another delivery has its ordering key's turn.
 */
import type { Storage } from '../../../src/ports.js';
import type { Db } from '../client.js';
import type { Names } from '../schema.js';
import type { orderingKeys } from '../storage-keys.js';
import { deliveryColumns, toDelivery } from '../storage-rows.js';
import { NOTIFY_WORK } from './publish.js';

export function createRedeliver(
  db: Db,
  names: Names,
  keys: ReturnType<typeof orderingKeys>,
  announce: { channel: string } | undefined,
): Pick<Storage, 'redeliver'> {
  const { table } = names;
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

  return {
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
      if (announce !== undefined && !delivery.redeliverQueued) await db.query(NOTIFY_WORK, [announce.channel]);
      return delivery;
    },
  };
}
