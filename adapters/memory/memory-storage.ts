import type { Storage } from '../../src/ports.js';
import { type InProcessStore, inProcessStore, type Journal } from '../in-process/store.js';
import { KEPT_ALL, type TableName } from '../in-process/record-state.js';

export { idempotencyId } from '../in-process/store.js';

/** Memory keeps every record itself: there is nothing to open, and a write is kept once applied. */
const NO_JOURNAL: Journal<never> = {
  kept: KEPT_ALL,
  opened: true,
  open: async () => {},
  append: () => Promise.resolve(),
  read: () => Promise.reject(new Error('a memory store keeps every record in memory')),
};

/**
 * Each store's own records, for the conformance suite's back-channel: a memory store keeps no other
 * copy of its data to read past its methods. Internal: `adapters/memory/index.ts` does not
 * re-export `memoryRecordsOf`, so the package's users cannot reach a store's rows.
 */
const stores = new WeakMap<Storage, InProcessStore<never>>();

/**
 * The record `id` of `table` as `storage` (a store `memoryStorage` made) holds it: the stored object
 * itself, not a copy (a test of tamper detection edits an agreement's trail there on purpose).
 * `undefined` for any other store, or when absent.
 */
export function memoryRecordOf(storage: Storage, table: TableName, id: string): unknown {
  return stores.get(storage)?.peek(table, id);
}

/** Every record `storage` (a `memoryStorage`) holds, for tests that read all it keeps. */
export function memoryRecordsOf(storage: Storage): unknown[] {
  return (
    stores
      .get(storage)
      ?.snapshot()
      .map((row) => row.value) ?? []
  );
}

/** Whether `storage` is a store `memoryStorage` made. */
export const isMemoryStorage = (storage: Storage): boolean => stores.has(storage);

/**
 * Keeps every record in process memory: the default, for tests and demos. Nothing survives a
 * restart. Records are copied in and out, so a caller that mutates a result changes nothing stored.
 */
export function memoryStorage(): Storage {
  const store = inProcessStore(NO_JOURNAL);
  stores.set(store.storage, store);
  return store.storage;
}
