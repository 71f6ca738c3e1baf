import { execFileSync } from 'node:child_process';
import { mkdtempSync, openSync, closeSync, writeSync, rmSync, rmdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A small tmpfs mounted for a full-disk test, or why none could be had. */
export type Tmpfs = { dir: string; unmount(): void; reason?: undefined } | { dir?: undefined; reason: string };

/**
 * Mounts a tmpfs of `size` (e.g. `2m`) on a new temp directory: `mount -t tmpfs -o size=… tmpfs <dir>`.
 * Needs root (or CAP_SYS_ADMIN); anywhere else it answers the reason, which the test prints as its skip.
 */
export function mountTmpfs(size: string): Tmpfs {
  if (process.platform !== 'linux') return { reason: `a tmpfs can be mounted on Linux only, not ${process.platform}` };
  const dir = mkdtempSync(path.join(tmpdir(), 'portal-full-disk-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (error) {
    rmdirSync(dir);
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    return { reason: `mounting a ${size} tmpfs failed (${stderr || (error as Error).message}); it needs root` };
  }
  return {
    dir,
    unmount() {
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      rmdirSync(dir);
    },
  };
}

/** Fills the file system of `dir` with a file `name` until a write fails for want of space; returns its path. */
export function fillDisk(dir: string, name = 'filler'): string {
  const file = path.join(dir, name);
  const fd = openSync(file, 'a');
  try {
    for (const size of [1 << 16, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size, 0x46);
      for (;;) {
        try {
          writeSync(fd, chunk);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw error;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
  return file;
}

/** Frees what `fillDisk` took. */
export const freeDisk = (file: string) => rmSync(file, { force: true });
