/**
 * `giveBack` of src/rules/deliveries.ts: deliveries a worker claimed ahead and never called, their
 * leases dropped so that the next claim takes them, due as they were.
 */
import type { Storage } from '../../../src/ports.js';
import type { Db } from '../client.js';
import type { Names } from '../schema.js';
import type { ClaimedKeys } from './claimed-keys.js';

export function createGiveBack(
  db: Db,
  names: Names,
  claimedKeys: ClaimedKeys,
): Required<Pick<Storage, 'giveBackDeliveries'>> {
  // Only the owner's leases, in the queue (a leased delivery is pending); a redeliver queued during
  // the lease is this next call. Run twice, it leaves what it left once: replayable after a broken
  // connection.
  const giveBack = `UPDATE ${names.table('queue')}
    SET lease_owner = NULL, lease_until = NULL, redeliver_queued = false
    WHERE id = ANY ($1::text[]) AND lease_owner = $2::text`;
  return {
    async giveBackDeliveries(owner, ids) {
      if (ids.length === 0) return;
      await db.query(giveBack, [ids, owner], { replayable: true });
      for (const id of ids) claimedKeys.take(id);
    },
  };
}
