import path from 'node:path';
import { storageFull } from '../../src/errors.js';
import type { Storage } from '../../src/ports.js';
import { KEPT_BESIDE_A_JOURNAL, TABLES, type TableName } from '../in-process/record-state.js';
import { inProcessStore, type Journal } from '../in-process/store.js';
import { ensureDirectory, isDiskFull } from './durable.js';
import { acquireLock, type DirectoryLock } from './lock.js';
import {
  type DiscardReport,
  type Loc,
  openRecordLog,
  type RecordLog,
  type RepairReport,
  type ReplayedChange,
} from './record-log.js';

export interface FsStorageOptions {
  /** The directory of the record log and its lock file; created when missing. One process at a time. */
  dir: string;
  /**
   * The log is rewritten with only the live records once it is at least this large and more than
   * twice their size. Default 64 MiB.
   */
  compactAfterBytes?: number;
  /**
   * Open a log damaged in its middle (a disk fault or an edit; never a crash) that would otherwise
   * be refused with `DamagedLogError`: keep every whole frame, drop the damaged bytes (saved beside
   * the log as `records.log.damaged-<ms>`, with a `.json` report of the records they named), and
   * rewrite the log without them. For one open, after reading the error; default `false`.
   */
  repair?: boolean;
  /** Hears what a repair dropped, once the store is open. */
  onRepair?: (report: RepairReport) => void;
  /**
   * Hears what an open cut from the end of a log its last process did not close (a write a crash
   * interrupted, or a damaged last frame nothing vouches for): the bytes are saved beside the log as
   * `records.log.discarded-<ms>`, and the report names the records they hold, as far as they read.
   */
  onDiscard?: (report: DiscardReport) => void;
}

const LOG_FILE = 'records.log';
const LOCK_FILE = 'storage.lock';

/**
 * Keeps records in one directory: an append-only log of checksummed transactions, fsynced before
 * a write resolves, replayed into the in-process store at open and compacted as it grows. A write
 * that resolved survives `kill -9` and power loss; a crash at any moment leaves a store that opens.
 * One process per directory (a lock file); `open()` takes it, `close()` gives it back. Methods
 * called before `open()` open the store first.
 */
export function fsStorage(options: FsStorageOptions): Storage {
  if (typeof options?.dir !== 'string' || options.dir === '')
    throw new TypeError('fsStorage: `dir` must be a directory path');
  const compactAfterBytes = options.compactAfterBytes ?? 64 * 1024 * 1024;
  if (!(compactAfterBytes >= 0)) throw new TypeError('fsStorage: `compactAfterBytes` must be a number of bytes');
  const dir = path.resolve(options.dir);
  let log: RecordLog | undefined;
  let lock: DirectoryLock | undefined;
  let opening: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const journal: Journal<Loc> = {
    kept: KEPT_BESIDE_A_JOURNAL,
    get opened() {
      return log !== undefined && closing === undefined;
    },
    async open() {
      if (closing === undefined) await open();
      if (closing !== undefined) throw new Error(`fsStorage: the store in ${dir} is closed`);
    },
    /**
     * Resolves once the frame is on disk. A transaction that cannot be written is undone in memory
     * before it rejects, and so is every one applied after it (the log reverts them newest first):
     * a failed write leaves nothing visible. A full disk rejects with `STORAGE_FULL` (507) and the
     * log takes writes again once there is space; after any other failure it refuses every later write.
     */
    append(entries, revert, forget) {
      return log!.append(entries, revert, forget).catch((error: unknown) => {
        throw isDiskFull(error) ? storageFull(error) : error;
      });
    },
    read: async (loc) => (await log!.read(loc)).toString('utf8'),
  };
  const store = inProcessStore(journal);

  function replay(change: ReplayedChange) {
    if (!(TABLES as readonly string[]).includes(change.table)) {
      throw new Error(`${path.join(dir, LOG_FILE)} names a table "${change.table}" this version does not know`);
    }
    store.replay(
      change.table as TableName,
      change.json === undefined ? { id: change.id } : { json: change.json, loc: change.loc },
    );
  }

  function open(): Promise<void> {
    opening ??= (async () => {
      await ensureDirectory(dir);
      const taken = await acquireLock(dir, LOCK_FILE, 'record store', (error) => log?.fail(error));
      try {
        log = await openRecordLog(
          path.join(dir, LOG_FILE),
          {
            compactAfterBytes,
            liveBytes: store.liveBytes,
            snapshot: store.snapshot,
            repair: options.repair === true,
            onRepair: options.onRepair,
            onDiscard: options.onDiscard,
          },
          replay,
        );
      } catch (error) {
        await taken.release();
        throw error;
      }
      lock = taken;
    })();
    return opening;
  }

  return {
    ...store.storage,
    open,
    async close() {
      closing ??= (async () => {
        if (opening === undefined) return;
        try {
          await opening;
        } catch {
          return; // open failed and released what it took
        }
        await log!.close();
        await lock!.release();
      })();
      return closing;
    },
  };
}
