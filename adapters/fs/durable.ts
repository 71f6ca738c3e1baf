import { mkdir, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import zlib from 'node:zlib';

/**
 * The modes of what the fs adapters create: the record log holds every webhook secret in clear and
 * blobs are tenants' files, so no other local user may read them, whatever the umask.
 */
export const PRIVATE_DIRECTORY = 0o700;
export const PRIVATE_FILE = 0o600;

/**
 * Makes the entries of `dir` (a file created, renamed or removed in it) durable. Windows cannot
 * open a directory for syncing; NTFS journals its metadata, so there is nothing to do there.
 */
export async function syncDirectory(dir: string): Promise<void> {
  if (process.platform === 'win32') return;
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Creates `dir` and any missing parents (0700), making each new entry durable in its parent. */
export async function ensureDirectory(dir: string): Promise<void> {
  const absolute = path.resolve(dir);
  const first = await mkdir(absolute, { recursive: true, mode: PRIVATE_DIRECTORY });
  if (first === undefined) return;
  // `first` is the topmost directory created: sync the parent of every directory made below it.
  for (let created = absolute; ; created = path.dirname(created)) {
    await syncDirectory(path.dirname(created));
    if (created === first) break;
  }
}

/**
 * Writes `bytes` to `target` so that a crash at any moment leaves either the old file or the new
 * one, whole: a temp file beside it, fsync, rename over the target, fsync of the directory.
 */
export async function writeFileAtomically(target: string, bytes: Uint8Array, mode = PRIVATE_FILE): Promise<void> {
  const temp = `${target}.${process.pid}.tmp`;
  const handle = await open(temp, 'w', mode);
  try {
    await handle.writeFile(bytes);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  await rename(temp, target);
  await syncDirectory(path.dirname(target));
}

/** Whether an error says the disk or the user's quota is full: a write may succeed again once space is freed. */
export function isDiskFull(error: unknown): boolean {
  return hasCode(error, 'ENOSPC') || hasCode(error, 'EDQUOT');
}

/** Whether an error is a Node system error with this code (`ENOENT`, `EEXIST`, …). */
export function hasCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as NodeJS.ErrnoException).code === code;
}

const CRC_TABLE = (() => {
  const table = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c;
  }
  return table;
})();

/** CRC-32 (IEEE) in plain JS, for Node versions without `zlib.crc32`. */
export function crc32Portable(bytes: Uint8Array): number {
  let crc = -1;
  for (let i = 0; i < bytes.length; i++) crc = CRC_TABLE[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}

/** CRC-32 (IEEE): zlib's native one where Node has it (20.15+), the same sum in JS before that. */
export const crc32: (bytes: Uint8Array) => number =
  typeof zlib.crc32 === 'function' ? (bytes) => zlib.crc32(bytes) : crc32Portable;
