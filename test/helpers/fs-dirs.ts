import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import type { BlobStore, Storage } from '../../src/ports.js';
import type { BlobStoreFactory, StorageFactory } from '../conformance/types.js';

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

/**
 * The conformance factories: each store in a fresh temp directory; `reopen` closes the store and
 * opens a new instance on the same directory; `destroy` closes it and removes the directory.
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
