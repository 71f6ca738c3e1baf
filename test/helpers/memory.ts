import { memoryStorage } from '../../adapters/memory/index.js';
import { idempotencyId, isMemoryStorage, memoryRecordOf } from '../../adapters/memory/memory-storage.js';
import type { TableName } from '../../adapters/in-process/record-state.js';
import type { Storage } from '../../src/ports.js';
import type { IdempotencyRecord } from '../../src/records.js';
import type { StorageBackChannel, StorageFactory } from '../conformance/types.js';

/**
 * The back-channel to `storage`, a memory store: it reads the store's own records through the
 * adapter's internal handle (`memoryRecordOf`, not exported by the package). Memory holds no other
 * copy of the data, so this is as close to the backing store as there is.
 */
export function memoryBackChannel(storage: Storage): StorageBackChannel {
  if (!isMemoryStorage(storage)) throw new TypeError('memoryBackChannel: not a store memoryStorage() made');
  const copyOf = <T>(table: TableName, id: string): T | null => {
    const record = memoryRecordOf(storage, table, id);
    return record === undefined ? null : (structuredClone(record) as T);
  };
  return {
    event: async (id) => copyOf('event', id),
    delivery: async (id) => copyOf('delivery', id),
    webhook: async (id) => copyOf('webhook', id),
    async idempotencyKey(accountId, key) {
      // Stored under its one id, which the port's record does not carry.
      const stored = copyOf<IdempotencyRecord & { id?: string }>('idempotency', idempotencyId(accountId, key));
      if (stored === null) return null;
      const { id: _id, ...record } = stored;
      return record.status === 'completed' ? record : null;
    },
    health: async (id) => copyOf('health', id),
    session: async (id) => copyOf('session', id),
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
