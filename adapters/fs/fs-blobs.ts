import { randomBytes } from 'node:crypto';
import { BLOB_KEY } from '../../src/shared/ids.js';
import { close, createReadStream, open, read } from 'node:fs';
import { mkdir, open as openFile, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { BlobInfo, BlobReader, BlobStore, ByteRange } from '../../src/ports.js';
import { atom } from '../../src/shared/time.js';
import { storageFull } from '../../src/errors.js';
import {
  PRIVATE_DIRECTORY,
  PRIVATE_FILE,
  crc32,
  ensureDirectory,
  hasCode,
  isDiskFull,
  syncDirectory,
} from './durable.js';
import { takeBody } from '../shared/body.js';
import { writeAll } from '../shared/write-all.js';
import { createBufferPool, createByteBatch } from '../shared/byte-batch.js';
import { acquireLock, type DirectoryLock } from './lock.js';

export interface FsBlobsOptions {
  /** The directory of the blobs and their lock file; created when missing. One process at a time. */
  dir: string;
  /** Dates each blob (`stat`, `listBefore`); default the system clock. */
  clock?: () => Date;
}

const LOCK_FILE = 'blobs.lock';
const SHARDS = 256;

/**
 * A key's file name: each capital letter becomes "-" and the letter in lower case, so that two
 * keys differing only in case stay two files on a case-insensitive file system (macOS, Windows).
 */
const fileName = (key: string) => key.replace(/[A-Z]/g, (letter) => '-' + letter.toLowerCase());
const keyOf = (name: string) => name.replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());

/** A file descriptor open for reading. */
const openForReading = (file: string) =>
  new Promise<number>((resolve, reject) =>
    open(file, 'r', (error, fd) => (error === null ? resolve(fd) : reject(error))),
  );

/**
 * Reads `fd` from `range.start` (else 0) to `range.end` (else its end) into the caller's buffers,
 * and closes it once. The open descriptor keeps the bytes readable if the blob is deleted meanwhile.
 */
function fileReader(fd: number, range?: ByteRange): BlobReader {
  let position = range?.start ?? 0;
  const end = range === undefined ? Number.POSITIVE_INFINITY : range.end + 1;
  let closed = false;
  return {
    read(into) {
      if (closed) return Promise.reject(new Error('fsBlobs: a read after the reader was closed'));
      const length = Math.min(into.byteLength, end - position);
      if (length <= 0) return Promise.resolve(0);
      return new Promise((resolve, reject) =>
        read(fd, into, 0, length, position, (error, bytesRead) => {
          if (error !== null) return reject(error);
          position += bytesRead;
          resolve(bytesRead);
        }),
      );
    },
    close() {
      if (closed) return Promise.resolve();
      closed = true;
      return new Promise((resolve) => close(fd, () => resolve()));
    },
  };
}

/** How many bytes of a body are gathered before one write. */
const WRITE_BATCH = 256 * 1024;

/** 256 sub-directories, by a hash of the key, keep each directory small as the store grows. */
const shardOf = (key: string) => (crc32(Buffer.from(key)) % SHARDS).toString(16).padStart(2, '0');

const toBytes = (chunk: unknown): Uint8Array =>
  chunk instanceof Uint8Array
    ? chunk
    : typeof chunk === 'string'
      ? Buffer.from(chunk)
      : Buffer.from(chunk as ArrayBuffer);

/**
 * Keeps each blob as a file `objects/<shard>/<key>` under `dir`. A put streams into `tmp/`, fsyncs,
 * renames into place and fsyncs the directory: a blob is visible whole or not at all, and a crash
 * leaves at most a temp file, removed at the next open. The write time is the file's mtime.
 */
export function fsBlobs(options: FsBlobsOptions): BlobStore {
  if (typeof options?.dir !== 'string' || options.dir === '')
    throw new TypeError('fsBlobs: `dir` must be a directory path');
  const dir = path.resolve(options.dir);
  const clock = options.clock ?? (() => new Date());
  const objects = path.join(dir, 'objects');
  const temp = path.join(dir, 'tmp');
  const inFlight = new Set<Promise<unknown>>();
  const batchBuffers = createBufferPool(WRITE_BATCH, 16);
  let lock: DirectoryLock | undefined;
  /** Set when another process took the directory: writes stop, since its open would clear our temp files. */
  let lockLost: Error | undefined;
  let opening: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const shardDir = (key: string) => path.join(objects, shardOf(key));
  const pathOf = (key: string) => path.join(shardDir(key), fileName(key));

  function open(): Promise<void> {
    opening ??= (async () => {
      await ensureDirectory(dir);
      lock = await acquireLock(dir, LOCK_FILE, 'blob store', (error) => (lockLost = error));
      try {
        await prepareLayout();
      } catch (error) {
        await lock.release();
        throw error;
      }
    })();
    return opening;
  }

  async function prepareLayout() {
    await ensureDirectory(objects);
    const present = new Set(await readdir(objects));
    let created = false;
    for (let shard = 0; shard < SHARDS; shard++) {
      const name = shard.toString(16).padStart(2, '0');
      if (present.has(name)) continue;
      await mkdir(path.join(objects, name), { recursive: true, mode: PRIVATE_DIRECTORY });
      created = true;
    }
    if (created) await syncDirectory(objects);
    // What is in tmp/ is a put that a crash interrupted: never visible, and nobody else writes here (the lock).
    await rm(temp, { recursive: true, force: true });
    await mkdir(temp, { mode: PRIVATE_DIRECTORY });
    await syncDirectory(dir);
  }

  async function ready(): Promise<void> {
    if (closing === undefined) await open();
    if (closing !== undefined) throw new Error(`fsBlobs: the store in ${dir} is closed`);
  }

  async function readyToWrite(): Promise<void> {
    await ready();
    if (lockLost !== undefined) throw lockLost;
  }

  /** Counts an operation in flight, so `close` can wait for it. */
  function track<T>(operation: Promise<T>): Promise<T> {
    inFlight.add(operation);
    const settled = () => inFlight.delete(operation);
    operation.then(settled, settled);
    return operation;
  }

  async function put(key: string, body: Readable | AsyncIterable<Uint8Array>): Promise<{ size: number }> {
    takeBody(body);
    await readyToWrite();
    if (!BLOB_KEY.test(key))
      throw new TypeError(`fsBlobs: ${JSON.stringify(key)} is not a record id (abc_ and letters or digits)`);
    const partial = path.join(temp, `${fileName(key)}.${randomBytes(6).toString('hex')}`);
    const handle = await openFile(partial, 'wx', PRIVATE_FILE);
    let size = 0;
    const batch = createByteBatch(batchBuffers, async (bytes) => {
      await writeAll(handle, bytes, size);
      size += bytes.length;
    });
    try {
      // Chunks are gathered up to WRITE_BATCH bytes, then written in one call before more is asked
      // for: the body is read no faster than the disk takes it (hot path of an upload).
      for await (const chunk of body) await batch.add(toBytes(chunk));
      await batch.flush();
      // The system clock dates the file as it is written; only an injected clock needs its own date.
      if (options.clock !== undefined) {
        const writtenAt = clock();
        await handle.utimes(writtenAt, writtenAt);
      }
      await handle.sync();
      await handle.close();
      await rename(partial, pathOf(key));
    } catch (error) {
      await handle.close().catch(() => {});
      await rm(partial, { force: true });
      throw error;
    } finally {
      // Every write of the batch has settled here: each was awaited before the next chunk was taken.
      batch.release();
    }
    await syncDirectory(shardDir(key));
    return { size };
  }

  /** A descriptor of the blob under `key`, open for reading; `null` when there is none. */
  async function openBlob(key: string): Promise<number | null> {
    await ready();
    if (!BLOB_KEY.test(key)) return null;
    try {
      return await openForReading(pathOf(key));
    } catch (error) {
      if (hasCode(error, 'ENOENT')) return null;
      throw error;
    }
  }

  return {
    open,
    async close() {
      closing ??= (async () => {
        if (opening === undefined) return;
        try {
          await opening;
        } catch {
          return;
        }
        await Promise.allSettled(inFlight);
        await lock!.release();
      })();
      return closing;
    },

    put(key, body) {
      // A full disk leaves nothing (the partial file is removed) and answers 507; the next put may find space.
      return track(
        put(key, body).catch((error: unknown) => {
          throw isDiskFull(error) ? storageFull(error) : error;
        }),
      );
    },

    async get(key, range) {
      const fd = await openBlob(key);
      if (fd === null) return null;
      // The open descriptor keeps the bytes readable even if the blob is deleted while they stream;
      // the stream closes it when it ends or is destroyed. A descriptor, not a FileHandle: a
      // FileHandle's stream reads through a promise a chunk, which took 2.5 times the CPU a MiB of
      // a bare fs.createReadStream (bench row "5 MiB download, fsBlobs, server CPU a MiB").
      try {
        return createReadStream(pathOf(key), range === undefined ? { fd } : { fd, start: range.start, end: range.end });
      } catch (error) {
        close(fd, () => {});
        throw error;
      }
    },

    async reader(key, range) {
      const fd = await openBlob(key);
      return fd === null ? null : fileReader(fd, range);
    },

    async stat(key) {
      await ready();
      if (!BLOB_KEY.test(key)) return null;
      try {
        const info = await stat(pathOf(key));
        return { key, size: info.size, createdAt: atom(info.mtime) };
      } catch (error) {
        if (hasCode(error, 'ENOENT')) return null;
        throw error;
      }
    },

    delete(key) {
      return track(
        (async () => {
          await readyToWrite();
          if (!BLOB_KEY.test(key)) return false;
          try {
            await unlink(pathOf(key));
          } catch (error) {
            if (hasCode(error, 'ENOENT')) return false;
            throw error;
          }
          await syncDirectory(shardDir(key));
          return true;
        })(),
      );
    },

    async *listBefore(before): AsyncIterable<BlobInfo> {
      await ready();
      for (let shard = 0; shard < SHARDS; shard++) {
        const shardPath = path.join(objects, shard.toString(16).padStart(2, '0'));
        for (const name of await readdir(shardPath)) {
          const key = keyOf(name);
          if (!BLOB_KEY.test(key) || fileName(key) !== name) continue;
          let info: Awaited<ReturnType<typeof stat>>;
          try {
            info = await stat(path.join(shardPath, name));
          } catch (error) {
            if (hasCode(error, 'ENOENT')) continue; // deleted while listing
            throw error;
          }
          const createdAt = atom(info.mtime);
          if (createdAt < before) yield { key, size: info.size, createdAt };
        }
      }
    },
  };
}
