import { memoryStorage } from '../../adapters/memory/index.js';
import { memoryTablesOf } from '../../adapters/memory/memory-storage.js';
import type { StorageFactory } from '../conformance/types.js';

const copyOf = <T>(table: ReadonlyMap<string, T>, id: string): T | null => {
  const row = table.get(id);
  return row === undefined ? null : structuredClone(row);
};

/**
 * The conformance factory of the memory adapter. Its back-channel reads the store's own tables
 * through the adapter's internal handle (`memoryTablesOf`, not exported by the package): memory
 * holds no other copy of the data, so this is as close to the backing store as there is.
 */
export function memoryStorageFactory(): StorageFactory {
  return {
    name: 'memory',
    create: async () => memoryStorage(),
    destroy: async () => {},
    db(storage) {
      const tables = memoryTablesOf(storage)!;
      return {
        event: async (id) => copyOf(tables.events, id),
        delivery: async (id) => copyOf(tables.deliveries, id),
        webhook: async (id) => copyOf(tables.webhooks, id),
      };
    },
  };
}
