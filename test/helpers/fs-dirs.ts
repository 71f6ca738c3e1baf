import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { readRecordLog } from '../../adapters/fs/record-log.js';
import type { BlobStore, Storage } from '../../src/ports.js';
import type { IdempotencyRecord } from '../../src/records.js';
import type { BlobStoreFactory, StorageBackChannel, StorageFactory } from '../conformance/types.js';

/** A new empty directory under the system's temp directory. */
export function tempDir(label = 'store'): string {
  return mkdtempSync(path.join(os.tmpdir(), `customer-portal-fs-${label}-`));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** Opens an fs record store in `dir`. */
export async function openStorage(dir: string, compactAfterBytes?: number): Promise<Storage> {
  const storage = fsStorage({ dir, compactAfterBytes });
  await storage.open!();
  return storage;
}

/** Every live record of the store in `dir`, by table and id, as its log on disk holds them now. */
export async function recordsOnDisk(dir: string): Promise<Map<string, Map<string, unknown>>> {
  const tables = new Map<string, Map<string, unknown>>();
  // The log's own reader, read-only and lock-free, on a file handle of its own: no open store is asked.
  await readRecordLog(path.join(dir, 'records.log'), (change) => {
    let rows = tables.get(change.table);
    if (rows === undefined) tables.set(change.table, (rows = new Map()));
    if (change.json === undefined) rows.delete(change.id);
    else {
      const record = JSON.parse(change.json) as { id: string };
      rows.set(record.id, record);
    }
  });
  return tables;
}

/** The back-channel to the store in `dir`: each read replays the log from disk afresh. */
export function fsBackChannel(dir: string): StorageBackChannel {
  const read = async <T>(table: string, id: string) =>
    ((await recordsOnDisk(dir)).get(table)?.get(id) ?? null) as T | null;
  return {
    event: (id) => read('event', id),
    delivery: (id) => read('delivery', id),
    webhook: (id) => read('webhook', id),
    async idempotencyKey(accountId, key) {
      const stored = await read<IdempotencyRecord & { id?: string }>('idempotency', `${accountId}\u0000${key}`);
      if (stored === null) return null;
      const { id: _id, ...record } = stored;
      return record;
    },
    health: (id) => read('health', id),
    session: (id) => read('session', id),
  };
}

/**
 * The conformance factories: each store in a fresh temp directory; `reopen` closes the store and
 * opens a new instance on the same directory; `destroy` closes it and removes the directory; `db`
 * reads the directory's log with a reader of its own.
 */
export function fsStorageFactory(name: string, compactAfterBytes?: number): StorageFactory {
  const dirs = new WeakMap<Storage, string>();
  const open = async (dir: string) => {
    const storage = await openStorage(dir, compactAfterBytes);
    dirs.set(storage, dir);
    return storage;
  };
  return {
    name,
    create: () => open(tempDir()),
    async destroy(storage) {
      await storage.close!();
      removeDir(dirs.get(storage)!);
    },
    async reopen(storage) {
      await storage.close!();
      return open(dirs.get(storage)!);
    },
    db: (storage) => fsBackChannel(dirs.get(storage)!),
  };
}

export function fsBlobsFactory(name: string): BlobStoreFactory {
  const opened = new WeakMap<BlobStore, { dir: string; clock: () => Date }>();
  const open = async (dir: string, clock: () => Date) => {
    const blobs = fsBlobs({ dir, clock });
    await blobs.open!();
    opened.set(blobs, { dir, clock });
    return blobs;
  };
  return {
    name,
    create: ({ clock }) => open(tempDir('blobs'), clock),
    async destroy(blobs) {
      await blobs.close!();
      removeDir(opened.get(blobs)!.dir);
    },
    async reopen(blobs) {
      await blobs.close!();
      const { dir, clock } = opened.get(blobs)!;
      return open(dir, clock);
    },
  };
}
