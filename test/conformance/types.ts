import type { BlobStore, Storage } from '../../src/ports.js';
import type { DeliveryRecord, EventRecord, WebhookRecord } from '../../src/records.js';

/**
 * Reads records straight from the backing store, past the adapter's own methods (Auth.js's adapter
 * suite calls it `db`): a write is checked in what was stored, not in what the adapter says it
 * stored. By id, whatever the account; a fresh copy each time, or `null` when absent.
 */
export interface StorageBackChannel {
  event(id: string): Promise<EventRecord | null>;
  delivery(id: string): Promise<DeliveryRecord | null>;
  webhook(id: string): Promise<WebhookRecord | null>;
}

/**
 * What an adapter's test file hands the conformance suite: how to make a fresh, opened store and
 * how to dispose of it. `reopen`, for stores that persist, closes the given instance and opens a
 * new one on the same data: the suite then checks that what was written is still there, reading
 * it through a different instance than the one that wrote it. `db` is the back-channel to what a
 * store this factory made holds.
 */
export interface StorageFactory {
  name: string;
  create(): Promise<Storage>;
  destroy(storage: Storage): Promise<void>;
  reopen?(storage: Storage): Promise<Storage>;
  db(storage: Storage): StorageBackChannel;
}

export interface BlobStoreFactory {
  name: string;
  /** `clock` lets the suite date the blobs it writes (the orphan sweep lists blobs by age). */
  create(options: { clock: () => Date }): Promise<BlobStore>;
  destroy(blobs: BlobStore): Promise<void>;
  reopen?(blobs: BlobStore): Promise<BlobStore>;
}
