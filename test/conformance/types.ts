import type { BlobStore, Storage } from '../../src/ports.js';
import type {
  DeliveryRecord,
  EventRecord,
  IdempotencyRecord,
  PortalSessionRecord,
  WebhookHealthRecord,
  WebhookRecord,
} from '../../src/records.js';

/**
 * Reads records straight from the backing store, past the adapter's own methods (Auth.js's adapter
 * suite calls it `db`): a write is checked in what was stored, not in what the adapter says it
 * stored. By id, whatever the account; a fresh copy each time, or `null` when absent.
 */
export interface StorageBackChannel {
  event(id: string): Promise<EventRecord | null>;
  delivery(id: string): Promise<DeliveryRecord | null>;
  webhook(id: string): Promise<WebhookRecord | null>;
  /** A completed idempotency key of the account (a pending claim need not be stored where this reads). */
  idempotencyKey(accountId: string, key: string): Promise<IdempotencyRecord | null>;
  /** The health record stored under the webhook's id; `null` when none was written. */
  health(webhookId: string): Promise<WebhookHealthRecord | null>;
  session(id: string): Promise<PortalSessionRecord | null>;
}

/**
 * `reopen`, for stores that persist, closes the given instance and opens a new one on the same
 * data: the suite then checks that what was written is still there, reading it through a different
 * instance than the one that wrote it. A factory without it says why in `whyNoReopen`, which the
 * suite prints as it skips those tests.
 */
export type Reopening<T> =
  | { reopen(store: T): Promise<T>; whyNoReopen?: undefined }
  | { reopen?: undefined; whyNoReopen: string };

/**
 * What an adapter's test file hands the conformance suite: how to make a fresh, opened store and
 * how to dispose of it, whether it reopens, and `db`, the back-channel to what a store it made holds.
 */
export type StorageFactory = {
  name: string;
  create(): Promise<Storage>;
  destroy(storage: Storage): Promise<void>;
  db(storage: Storage): StorageBackChannel;
} & Reopening<Storage>;

export type BlobStoreFactory = {
  name: string;
  /** `clock` lets the suite date the blobs it writes (the orphan sweep lists blobs by age). */
  create(options: { clock: () => Date }): Promise<BlobStore>;
  destroy(blobs: BlobStore): Promise<void>;
} & Reopening<BlobStore>;
