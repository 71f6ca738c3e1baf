import type { BlobStore, Storage } from '../../src/ports.js';

/**
 * What an adapter's test file hands the conformance suite: how to make a fresh, opened store and
 * how to dispose of it. `reopen`, for stores that persist, closes the given instance and opens a
 * new one on the same data: the suite then checks that what was written is still there, reading
 * it through a different instance than the one that wrote it.
 */
export interface StorageFactory {
  name: string;
  create(): Promise<Storage>;
  destroy(storage: Storage): Promise<void>;
  reopen?(storage: Storage): Promise<Storage>;
}

export interface BlobStoreFactory {
  name: string;
  /** `clock` lets the suite date the blobs it writes (the orphan sweep lists blobs by age). */
  create(options: { clock: () => Date }): Promise<BlobStore>;
  destroy(blobs: BlobStore): Promise<void>;
  reopen?(blobs: BlobStore): Promise<BlobStore>;
}
