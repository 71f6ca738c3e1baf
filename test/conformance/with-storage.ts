import type { Storage } from '../../src/ports.js';
import type { StorageFactory } from './types.js';

type Swap = (reopen: (storage: Storage) => Promise<Storage>) => Promise<Storage>;

/**
 * Wraps a test body: a fresh store for each test (tests never depend on each other's data), always
 * destroyed, also after `swap` replaced it with a reopened instance.
 */
export function withStorage(factory: StorageFactory, body: (storage: Storage, swap: Swap) => Promise<void>) {
  return async () => {
    let storage = await factory.create();
    const swap: Swap = async (reopen) => (storage = await reopen(storage));
    try {
      await body(storage, swap);
    } finally {
      await factory.destroy(storage);
    }
  };
}
