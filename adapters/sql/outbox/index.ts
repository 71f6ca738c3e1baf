import type { Storage } from '../../../src/ports.js';
import type { Db } from '../client.js';
import type { Names } from '../schema.js';
import { orderingKeys } from '../storage-keys.js';
import { createClaim } from './claim.js';
import { claimedKeys } from './claimed-keys.js';
import { createDeliveryLog } from './delivery-log.js';
import { createGiveBack } from './give-back.js';
import { type Publishing, createPublish } from './publish.js';
import { createRecord } from './record.js';
import { createRedeliver } from './redeliver.js';
import { createRebuild } from './rebuild.js';
import { createRing } from './ring.js';
import { foldCounts } from '../storage-call-stats.js';

type OutboxMethods = Pick<
  Storage,
  'recentEvents' | 'getDelivery' | 'listDeliveries' | 'claimDeliveries' | 'recordAttempt' | 'redeliver'
>;

export interface Outbox
  extends OutboxMethods,
    Publishing,
    Required<Pick<Storage, 'deliveryQueue' | 'giveBackDeliveries'>> {
  /** The next claim of this instance paces first (a webhook's rate limit changed). */
  paceSoon(): void;
}

/**
 * Events, deliveries and the claim, one file an operation: publish.ts, claim.ts (with floors.ts),
 * record.ts, give-back.ts, redeliver.ts, delivery-log.ts, ring.ts (the queue's partitions) with
 * rebuild.ts, and retention.ts beside them. Statements are built once,
 * not per call.
 *
 * The statements implement the rules of `src/rules/deliveries.ts`, the pure functions the memory
 * and fs adapters call; each file names the rules it carries out (`cancel` runs on webhook delete
 * too, in sql-storage.ts). A change to a rule there is a change to a statement here; the conformance
 * suite holds the three adapters to the same behaviour.
 */
export function createOutbox(db: Db, names: Names, announce?: { channel: string }): Outbox {
  const keys = orderingKeys(names);
  const claimed = claimedKeys();
  const ring = createRing(db, names, foldCounts(names), createRebuild(db, names));
  return {
    ...createPublish(db, names, keys, announce),
    ...createDeliveryLog(db, names),
    ...createClaim(db, names, claimed, ring),
    ...createRecord(db, names, keys, claimed),
    ...createGiveBack(db, names, claimed),
    ...createRedeliver(db, names, keys, announce),
  };
}
