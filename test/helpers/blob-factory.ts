import type { BlobStore } from '../../src/ports.js';
import type { BlobStoreFactory } from '../conformance/types.js';

/**
 * A conformance factory for blob stores that live in a namespace of a shared backend (a schema, a
 * key prefix): each store in one of its own, reopened on the same, the namespace given up when destroyed.
 * `open` gets the suite's clock, read at each call, for the store to date its blobs by.
 */
export function namespacedBlobsFactory(
  name: string,
  space: {
    fresh(): string | Promise<string>;
    open(namespace: string, clock: () => Date): Promise<BlobStore>;
    drop(namespace: string): Promise<void>;
  },
): BlobStoreFactory {
  const namespaceOf = new WeakMap<BlobStore, string>();
  let clock: () => Date = () => new Date();
  const open = async (namespace: string) => {
    const blobs = await space.open(namespace, () => clock());
    namespaceOf.set(blobs, namespace);
    return blobs;
  };
  return {
    name,
    async create(options) {
      clock = options.clock;
      return open(await space.fresh());
    },
    async destroy(blobs) {
      await blobs.close?.();
      await space.drop(namespaceOf.get(blobs)!);
    },
    async reopen(blobs) {
      await blobs.close?.();
      return open(namespaceOf.get(blobs)!);
    },
  };
}
