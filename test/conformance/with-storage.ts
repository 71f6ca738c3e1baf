import type { Storage } from '../../src/ports.js';
import type { StorageBackChannel, StorageFactory } from './types.js';

/** What a test body gets beside its store: `swap` to reopen it, `db` to read what it holds. */
export interface StorageContext {
  /** Reopens the store with the factory's `reopen` (see `reopenable`), and resolves the new instance. */
  swap(): Promise<Storage>;
  /** The factory's back-channel, reading the current store (the reopened one after `swap`). */
  db: StorageBackChannel;
}

/**
 * Wraps a test body: a fresh store for each test (tests never depend on each other's data), always
 * destroyed, also after `swap` replaced it with a reopened instance.
 */
export function withStorage(
  factory: StorageFactory,
  body: (storage: Storage, context: StorageContext) => Promise<void>,
) {
  return async () => {
    let storage = await factory.create();
    const swap = async () => {
      if (!factory.reopen) throw new Error(`${factory.name} cannot reopen a store: ${factory.whyNoReopen}`);
      return (storage = await factory.reopen(storage));
    };
    const db: StorageBackChannel = {
      event: (id) => factory.db(storage).event(id),
      delivery: (id) => factory.db(storage).delivery(id),
      webhook: (id) => factory.db(storage).webhook(id),
      idempotencyKey: (accountId, key) => factory.db(storage).idempotencyKey(accountId, key),
      health: (id) => factory.db(storage).health(id),
      session: (id) => factory.db(storage).session(id),
    };
    try {
      await body(storage, { swap, db });
    } finally {
      await factory.destroy(storage);
    }
  };
}
