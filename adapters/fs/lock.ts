import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, open, readFile, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PRIVATE_FILE, hasCode } from './durable.js';

/** How often a holder touches its lock file, and after how long without a touch a lock counts as abandoned. */
const HEARTBEAT_MS = 15_000;
const ABANDONED_MS = 60_000;

/** What a lock file holds: enough to tell whether its holder is still alive. */
interface LockOwner {
  pid: number;
  host: string;
  /** The holder's start time in clock ticks since boot (Linux), so that a reused pid is not taken for the holder. */
  start: string | null;
  nonce: string;
  since: string;
}

export interface DirectoryLock {
  readonly path: string;
  release(): Promise<void>;
}

/** Thrown when another live process holds the directory. */
export class DirectoryInUseError extends Error {
  override readonly name = 'DirectoryInUseError';
  readonly code = 'EDIRINUSE';
}

/** Lock files this process holds: a second store on the same directory in one process is refused too. */
const heldHere = new Set<string>();

/**
 * Fields 3 and 22 of `/proc/<pid>/stat`: the process's state letter and when it started. `null`
 * where there is no `/proc` (or no such process).
 */
function processStat(pid: number): { state: string; start: string | null } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0] ?? '', start: fields[19] ?? null };
  } catch {
    return null;
  }
}

function parseOwner(text: string): LockOwner | null {
  try {
    const owner = JSON.parse(text) as Partial<LockOwner>;
    if (!Number.isInteger(owner.pid) || typeof owner.host !== 'string' || typeof owner.nonce !== 'string') return null;
    return {
      pid: owner.pid!,
      host: owner.host,
      start: owner.start ?? null,
      nonce: owner.nonce,
      since: String(owner.since),
    };
  } catch {
    return null;
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return hasCode(error, 'EPERM'); // alive, but another user's
  }
}

/**
 * Whether the lock's holder may still be running. On this host: its pid answers and (where
 * `/proc` tells) it is the same process that took the lock, not a later one given the same pid;
 * a pid equal to ours that this process does not hold is a previous run of a container. On
 * another host (a shared volume), or where the start time cannot be read: the holder touched
 * the lock file within the last minute.
 */
function holderAlive(owner: LockOwner, lockPath: string, touchedAt: number): boolean {
  const heartbeatFresh = Date.now() - touchedAt < ABANDONED_MS;
  if (owner.host !== os.hostname()) return heartbeatFresh;
  if (owner.pid === process.pid) return heldHere.has(lockPath);
  if (!pidAlive(owner.pid)) return false;
  const found = processStat(owner.pid);
  // A zombie (Z) or a dying process (X) answers signal 0 until its parent reaps it, which a
  // supervisor may take a while to do after `kill -9`: it holds nothing any more.
  if (found !== null && (found.state === 'Z' || found.state === 'X')) return false;
  const start = owner.start === null ? null : (found?.start ?? null);
  return start === null ? heartbeatFresh : start === owner.start;
}

async function readLock(lockPath: string): Promise<{ text: string; touchedAt: number } | null> {
  try {
    const [text, info] = await Promise.all([readFile(lockPath, 'utf8'), stat(lockPath)]);
    return { text, touchedAt: info.mtimeMs };
  } catch (error) {
    if (hasCode(error, 'ENOENT')) return null;
    throw error;
  }
}

/** Writes the lock file whole before it appears under its name, so nobody ever reads a half-written one. */
async function placeLock(lockPath: string, content: string): Promise<boolean> {
  const temp = `${lockPath}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const handle = await open(temp, 'wx', PRIVATE_FILE);
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(temp, lockPath); // fails with EEXIST, atomically, when the lock is there
    return true;
  } catch (error) {
    if (hasCode(error, 'EEXIST')) return false;
    if (!['EPERM', 'ENOTSUP', 'ENOSYS'].some((code) => hasCode(error, code))) throw error;
    return placeLockWithoutLinks(lockPath, content);
  } finally {
    await rm(temp, { force: true });
  }
}

/** For file systems without hard links: create-exclusive, then write (a reader may see it empty for a moment). */
async function placeLockWithoutLinks(lockPath: string, content: string): Promise<boolean> {
  try {
    const handle = await open(lockPath, 'wx', PRIVATE_FILE);
    try {
      await handle.writeFile(content);
      await handle.sync();
    } finally {
      await handle.close();
    }
    return true;
  } catch (error) {
    if (hasCode(error, 'EEXIST')) return false;
    throw error;
  }
}

/** Removes what a process killed while taking the lock left behind: its temp file, an old renamed-aside lock. */
async function sweepLeftovers(dir: string, name: string): Promise<void> {
  const pattern = new RegExp(`^${name.replace(/\./g, '\\.')}\\.(?:(\\d+)\\.[0-9a-f]{8}|abandoned-[0-9a-f]{12})$`);
  for (const entry of await readdir(dir)) {
    const match = pattern.exec(entry);
    if (match === null) continue;
    const file = path.join(dir, entry);
    const pid = match[1] === undefined ? null : Number(match[1]);
    const old =
      pid === null && Date.now() - (await stat(file).catch(() => ({ mtimeMs: Date.now() }))).mtimeMs > ABANDONED_MS;
    if ((pid !== null && pid !== process.pid && !pidAlive(pid)) || old) await rm(file, { force: true });
  }
}

/**
 * Takes the lock file `name` in `dir` for this process, or rejects with a `DirectoryInUseError`
 * naming the process that holds it. A lock left by a process that died is taken over. While
 * held, the file is touched every 15 s; should it ever stop being ours, `onLost` is told.
 */
export async function acquireLock(
  dir: string,
  name: string,
  what: string,
  onLost: (error: Error) => void,
): Promise<DirectoryLock> {
  const lockPath = path.resolve(dir, name);
  const owner: LockOwner = {
    pid: process.pid,
    host: os.hostname(),
    start: processStat(process.pid)?.start ?? null,
    nonce: randomBytes(12).toString('hex'),
    since: new Date().toISOString(),
  };
  const content = JSON.stringify(owner) + '\n';

  let placed = false;
  for (let attempt = 0; attempt < 5 && !placed; attempt++) {
    placed = await placeLock(lockPath, content);
    if (placed) break;
    const found = await readLock(lockPath);
    if (found === null) continue;
    const holder = parseOwner(found.text);
    if (holder !== null && holderAlive(holder, lockPath, found.touchedAt)) {
      throw new DirectoryInUseError(
        `Cannot open the ${what} in ${path.resolve(dir)}: process ${holder.pid} on ${holder.host} has held it since ` +
          `${holder.since} (lock file ${lockPath}). One process may use a directory at a time: stop that ` +
          `process or choose another directory.`,
      );
    }
    await removeAbandoned(lockPath, found.text);
  }
  if (!placed)
    throw new DirectoryInUseError(
      `Cannot open the ${what} in ${path.resolve(dir)}: the lock file ${lockPath} keeps changing hands.`,
    );
  heldHere.add(lockPath);
  await sweepLeftovers(path.dirname(lockPath), name);

  const stillOurs = async () => (await readLock(lockPath))?.text === content;
  const heartbeat = setInterval(() => {
    stillOurs()
      .then(async (ours) => {
        if (!ours) throw new Error(`The lock file ${lockPath} was taken by another process.`);
        const now = new Date();
        await utimes(lockPath, now, now);
      })
      .catch((error: Error) => {
        clearInterval(heartbeat);
        onLost(error);
      });
  }, HEARTBEAT_MS);
  heartbeat.unref();

  return {
    path: lockPath,
    async release() {
      clearInterval(heartbeat);
      heldHere.delete(lockPath);
      if (await stillOurs()) await rm(lockPath, { force: true });
    },
  };
}

/**
 * Removes an abandoned lock file, but only the very one judged abandoned: it is first renamed
 * aside (atomic), then compared; if another process replaced it meanwhile, it is put back.
 */
async function removeAbandoned(lockPath: string, judged: string): Promise<void> {
  const aside = `${lockPath}.abandoned-${randomBytes(6).toString('hex')}`;
  try {
    await rename(lockPath, aside);
  } catch (error) {
    if (hasCode(error, 'ENOENT')) return;
    throw error;
  }
  const moved = await readFile(aside, 'utf8');
  if (moved !== judged) await link(aside, lockPath).catch(() => {});
  await rm(aside, { force: true });
}
