import { memoryStorage } from '../../adapters/memory/index.js';
import { idempotencyId, memoryTablesOf } from '../../adapters/memory/memory-storage.js';
import type { Storage } from '../../src/ports.js';
import type { StorageBackChannel, StorageFactory } from '../conformance/types.js';

const copyOf = <T>(table: ReadonlyMap<string, T>, id: string): T | null => {
  const row = table.get(id);
  return row === undefined ? null : structuredClone(row);
};

/**
 * The back-channel to `storage`, a memory store: it reads the store's own tables through the
 * adapter's internal handle (`memoryTablesOf`, not exported by the package). Memory holds no other
 * copy of the data, so this is as close to the backing store as there is.
 */
export function memoryBackChannel(storage: Storage): StorageBackChannel {
  const tables = memoryTablesOf(storage);
  if (tables === undefined) throw new TypeError('memoryBackChannel: not a store memoryStorage() made');
  return {
    event: async (id) => copyOf(tables.events, id),
    delivery: async (id) => copyOf(tables.deliveries, id),
    webhook: async (id) => copyOf(tables.webhooks, id),
    async idempotencyKey(accountId, key) {
      const record = copyOf(tables.idempotencyKeys, idempotencyId(accountId, key));
      return record?.status === 'completed' ? record : null;
    },
    health: async (id) => copyOf(tables.health, id),
  };
}

/** Why the memory adapters skip the suites' reopen tests. */
export const NOTHING_OUTLIVES = 'a memory store keeps nothing past its instance, so there is nothing to reopen';

/** The conformance factory of the memory adapter. */
export function memoryStorageFactory(): StorageFactory {
  return {
    name: 'memory',
    create: async () => memoryStorage(),
    destroy: async () => {},
    db: memoryBackChannel,
    whyNoReopen: NOTHING_OUTLIVES,
  };
}
