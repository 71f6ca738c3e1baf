import type { DeliveryRecord } from '../../../src/records.js';

/** A claimed delivery's webhook and ordering key (`null`: none). */
export type DeliveryKey = Pick<DeliveryRecord, 'webhookId' | 'orderingKey'>;

/** The most claimed deliveries remembered; past it the oldest are forgotten, and their records read the row. */
const MAX_REMEMBERED = 65_536;

/**
 * The deliveries this store claimed and has not recorded yet, with their webhook and ordering key:
 * `recordAttempt` must take a keyed delivery's key lock before its row's, and a success joins a
 * batch only when its key is known, so what the claim returned spares the record a read of the row
 * first. A delivery not here (forgotten past {@link MAX_REMEMBERED}, or claimed through another
 * instance of the store) is read as before; a record takes its delivery out.
 */
export function claimedKeys() {
  const keys = new Map<string, DeliveryKey>();
  return {
    remember(deliveries: Iterable<DeliveryRecord>): void {
      for (const { id, webhookId, orderingKey } of deliveries) {
        keys.delete(id);
        keys.set(id, { webhookId, orderingKey });
      }
      // Map keeps insertion order: the first are the oldest.
      for (const id of keys.keys()) {
        if (keys.size <= MAX_REMEMBERED) break;
        keys.delete(id);
      }
    },
    take(id: string): DeliveryKey | undefined {
      const key = keys.get(id);
      keys.delete(id);
      return key;
    },
  };
}

export type ClaimedKeys = ReturnType<typeof claimedKeys>;
