import { open, readFile, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { PRIVATE_FILE, crc32, hasCode, isDiskFull, syncDirectory, writeFileAtomically } from './durable.js';
import { writeAll } from '../shared/write-all.js';

/*
 * The record log: one append-only file of frames.
 *
 *   file   = header (16 bytes: "CPRTLOG\n", u32 version, u32 zero) frame*
 *   frame  = u32 payload length, u32 CRC-32 of the payload (both little-endian), payload
 *   payload = line ("\n" line)*      each line one change:  "+<table> <record JSON>"  or  "-<table> <id as a JSON string>"
 *
 * A frame is one transaction: at open, a frame is applied whole or, when its length or checksum
 * does not hold (a write cut short by a crash), it and everything after it are dropped. JSON never
 * holds a raw newline, so lines split on "\n".
 */

const MAGIC = Buffer.from('CPRTLOG\n', 'latin1');
const VERSION = 1;
const HEADER_SIZE = 16;
const FRAME_HEADER_SIZE = 8;
/** A transaction is at most a few MiB (an agreement with its signatures and its event); more is a corrupt length. */
const MAX_FRAME_SIZE = 1 << 30;
const READ_CHUNK = 1 << 20;
/** Compaction packs records into frames of about this size. */
const COMPACT_FRAME_SIZE = 1 << 20;

/** One generation of the log file; compaction replaces it with a new one. */
interface LogFile {
  readonly handle: FileHandle;
  readers: number;
  retired: boolean;
}

/** Where a record's JSON lies in the log, and the frame holding it (its header's offset). */
export interface Loc {
  readonly file: LogFile;
  readonly offset: number;
  readonly length: number;
  readonly frame: number;
}

/** A stored record as the log sees it: its JSON is either held in `value`, or read back at `loc`. */
interface Locatable {
  readonly table: string;
  /** The record; kept for tables held in memory, dropped once written for the others. */
  value: unknown;
  /** Where the record lies in the log: set for records not held in memory, once written. */
  loc: Loc | undefined;
  readonly keep: boolean;
}

/**
 * One change of a transaction. `previous` is the row it replaced or removed, as memory held it: while
 * the change is not on disk, `previous` is what the disk has, which a compaction must copy.
 */
type LogChange =
  | { table: string; json: string; row: Locatable; previous?: Locatable | undefined }
  | { table: string; id: string; previous?: Locatable | undefined };

/** A change read back at open. */
export type ReplayedChange =
  | { table: string; json: string; loc: Loc }
  | { table: string; id: string; json?: undefined };

export interface RecordLogOptions {
  /** The log is rewritten once it is this large and more than twice the size of the live records. */
  compactAfterBytes: number;
  /** Bytes of JSON the live records take; asked after each write. */
  liveBytes(): number;
  /** Every live record, for compaction: called once, synchronously, when a compaction starts. */
  snapshot(): Locatable[];
  /**
   * Open a log damaged in its middle anyway: skip the damaged bytes (saved beside it as
   * `<file>.damaged-<ms>`), keep every whole frame, rewrite the log without them, and tell
   * `onRepair` what was dropped. Without it, such a log is refused (`DamagedLogError`).
   */
  repair?: boolean;
  onRepair?(report: RepairReport): void;
  /** Hears what an open cut from the log's end (the last write of a process that did not close it), saved beside it. */
  onDiscard?(report: DiscardReport): void;
}

/** What an open cut from the end of a log that was not closed: the bytes, where they were saved, the records they name. */
export interface DiscardReport {
  file: string;
  from: number;
  to: number;
  savedAs: string;
  records: { table: string; id: string }[];
}

/** What a repair dropped: the damaged byte ranges, where they were saved, and the records they named (as far as they still read). */
export interface RepairReport {
  file: string;
  damaged: DamagedRange[];
  savedAs: string;
  records: { table: string; id: string }[];
}

/** The records a damaged stretch still names, read from its change lines as far as they hold. */
function recordsNamedIn(bytes: Buffer): { table: string; id: string }[] {
  const text = bytes.toString('latin1');
  const found: { table: string; id: string }[] = [];
  for (const match of text.matchAll(/[+-]([a-z]{3,16}) (?:\{"id":"([^"]{1,100})"|"([^"]{1,100})")/g)) {
    found.push({ table: match[1]!, id: match[2] ?? match[3]! });
  }
  return found;
}

export interface RecordLog {
  /**
   * Appends one transaction; resolves once it is on disk (fsync), together with whatever else came
   * meanwhile. When it cannot be written, `revert` is called before it rejects: for it, and for every
   * transaction appended after it (which may build on it), newest first, so that memory again holds
   * what the disk holds. A full disk (ENOSPC, EDQUOT) fails only those transactions: the log takes
   * writes again, and the first one cuts off whatever the failed write left past the last whole frame.
   * Any other failure stops the log. With `forget`, the log is compacted once the transaction is
   * written and before it resolves, so no earlier version of a record it replaces stays in the file.
   */
  append(changes: LogChange[], revert?: () => void, forget?: boolean): Promise<void>;
  /** The JSON bytes at `loc`. */
  read(loc: Loc): Promise<Buffer>;
  /** What stopped the log from writing, if anything did: every later append rejects with it. */
  readonly failure: Error | undefined;
  /** Marks the log failed (the lock was lost, say): later appends reject with `error`. */
  fail(error: Error): void;
  /** Waits for pending appends, then closes the file. */
  close(): Promise<void>;
}

interface Pending {
  frame: Buffer;
  changes: LogChange[];
  revert: (() => void) | undefined;
  /** Whether the log is compacted before this transaction resolves (`append`'s `forget`). */
  forget: boolean;
  /** Offset of each put's JSON within the frame, to place the row once the frame is written. */
  puts: { row: Locatable; offset: number; length: number }[];
  resolve(): void;
  reject(error: Error): void;
}

function encodeFrame(changes: LogChange[]): Pick<Pending, 'frame' | 'puts'> {
  const parts: Buffer[] = [Buffer.alloc(FRAME_HEADER_SIZE)];
  const puts: Pending['puts'] = [];
  let offset = FRAME_HEADER_SIZE;
  changes.forEach((change, index) => {
    const isPut = 'json' in change;
    const prefix = Buffer.from(`${index === 0 ? '' : '\n'}${isPut ? '+' : '-'}${change.table} `, 'latin1');
    const body = Buffer.from(isPut ? change.json : JSON.stringify(change.id));
    parts.push(prefix, body);
    if (isPut) puts.push({ row: change.row, offset: offset + prefix.length, length: body.length });
    offset += prefix.length + body.length;
  });
  const frame = Buffer.concat(parts, offset);
  const payload = frame.subarray(FRAME_HEADER_SIZE);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(crc32(payload), 4);
  return { frame, puts };
}

function headerBytes(): Buffer {
  const header = Buffer.alloc(HEADER_SIZE);
  MAGIC.copy(header, 0);
  header.writeUInt32LE(VERSION, 8);
  return header;
}

async function readExactly(handle: FileHandle, length: number, position: number): Promise<Buffer> {
  const bytes = Buffer.allocUnsafe(length);
  for (let done = 0; done < length; ) {
    const { bytesRead } = await handle.read(bytes, done, length - done, position + done);
    if (bytesRead === 0) throw new Error(`The record log ends before ${position + length}: it changed under the store`);
    done += bytesRead;
  }
  return bytes;
}

/** Applies each line of a frame's payload, found at `payloadOffset` in `file`. */
function replayFrame(file: LogFile, payload: Buffer, payloadOffset: number, apply: (change: ReplayedChange) => void) {
  for (let start = 0; start < payload.length; ) {
    let end = payload.indexOf(0x0a, start);
    if (end === -1) end = payload.length;
    const space = payload.indexOf(0x20, start);
    const sign = payload[start];
    if (space === -1 || space > end || (sign !== 0x2b && sign !== 0x2d)) {
      throw new Error(`The record log holds a line it cannot read at byte ${payloadOffset + start}`);
    }
    const table = payload.toString('latin1', start + 1, space);
    const body = payload.toString('utf8', space + 1, end);
    if (sign === 0x2b)
      apply({
        table,
        json: body,
        loc: {
          file,
          offset: payloadOffset + space + 1,
          length: end - space - 1,
          frame: payloadOffset - FRAME_HEADER_SIZE,
        },
      });
    else apply({ table, id: JSON.parse(body) as string });
    start = end + 1;
  }
}

/** Bytes of a damaged log that whole frames follow: what `repair` drops. */
interface DamagedRange {
  from: number;
  to: number;
}

/**
 * A log damaged in its middle: a frame that does not hold, with whole frames after it. A crash
 * never leaves this (it can only cut the last write short), so the store does not open by itself.
 */
export class DamagedLogError extends Error {
  constructor(
    readonly file: string,
    readonly range: DamagedRange,
    /** For damage at the end: the size the log had when it was last closed, past the frames that hold. */
    closedAt?: number,
  ) {
    super(
      (closedAt === undefined
        ? `${file} is damaged at byte ${range.from}: the frame there does not hold (its checksum or length is wrong), and whole frames follow it from byte ${range.to}. `
        : `${file} is damaged at byte ${range.from}: the log was closed at ${closedAt} bytes, and its frames from byte ${range.from} on do not hold (their checksum or length is wrong, or they are gone). `) +
        'A crash never leaves this (a disk fault or an edit does), so the store does not open by itself. ' +
        `Restore the directory from a backup, or open it once with fsStorage({ dir, repair: true }) (standalone server: PORTAL_FS_REPAIR=1): ` +
        `that keeps every whole frame, drops the ${range.to - range.from} damaged bytes (saved beside the log as ${path.basename(file)}.damaged-<ms>) and names the records they held.`,
    );
    this.name = 'DamagedLogError';
  }
}

/** Whether a payload reads as change lines: its first line starts "+table " or "-table ". */
function looksLikeChanges(payload: Buffer): boolean {
  const sign = payload[0];
  if (sign !== 0x2b && sign !== 0x2d) return false;
  const space = payload.indexOf(0x20);
  return space > 1 && space < 64;
}

/**
 * Reads frames from `HEADER_SIZE` on, applying each whole one. A frame that does not hold (cut
 * off, a bad length or checksum) is the torn tail of a write a crash interrupted when no whole
 * frame follows it: the walk resolves where the valid part ends, and whether the rest is a plain
 * cut-off. When whole frames do follow it, the log is damaged in its middle: `DamagedLogError`,
 * unless `repair`, which skips the damaged bytes (listed in `damaged`) and goes on.
 */
async function replayFrames(
  file: LogFile,
  size: number,
  apply: (change: ReplayedChange) => void,
  options: { path: string; repair: boolean; damaged?: DamagedRange[] } = { path: '', repair: false },
) {
  let buffer: Buffer = Buffer.allocUnsafe(READ_CHUNK);
  let bufferStart = HEADER_SIZE;
  let bufferEnd = HEADER_SIZE;

  /** Makes bytes [start, start + length) of the file available in `buffer`. */
  async function load(start: number, length: number) {
    if (start + length <= bufferEnd) return;
    const capacity = Math.max(READ_CHUNK, length);
    const kept = bufferEnd - start;
    if (capacity > buffer.length) {
      const larger = Buffer.allocUnsafe(capacity);
      buffer.copy(larger, 0, start - bufferStart, bufferEnd - bufferStart);
      buffer = larger;
    } else {
      buffer.copyWithin(0, start - bufferStart, bufferEnd - bufferStart);
    }
    bufferStart = start;
    let filled = kept;
    while (filled < capacity && bufferStart + filled < size) {
      const { bytesRead } = await file.handle.read(buffer, filled, capacity - filled, bufferStart + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    bufferEnd = bufferStart + filled;
  }

  /** The frame at `position`: whole (with its payload), cut off by the end of the file, or bad. */
  async function frameAt(position: number): Promise<{ kind: 'whole'; payload: Buffer } | { kind: 'cut' | 'bad' }> {
    if (size - position < FRAME_HEADER_SIZE) return { kind: 'cut' };
    await load(position, FRAME_HEADER_SIZE);
    const length = buffer.readUInt32LE(position - bufferStart);
    const checksum = buffer.readUInt32LE(position - bufferStart + 4);
    if (length === 0 || length > MAX_FRAME_SIZE) return { kind: 'bad' };
    if (position + FRAME_HEADER_SIZE + length > size) return { kind: 'cut' };
    await load(position, FRAME_HEADER_SIZE + length);
    const from = position - bufferStart + FRAME_HEADER_SIZE;
    const payload = buffer.subarray(from, from + length);
    return crc32(payload) === checksum ? { kind: 'whole', payload } : { kind: 'bad' };
  }

  /** The first whole frame at or after `from`, its lines well formed; -1 when none is left. */
  async function nextWholeFrame(from: number): Promise<number> {
    for (let position = from; position + FRAME_HEADER_SIZE < size; position++) {
      await load(position, FRAME_HEADER_SIZE);
      // Most positions fail here, without reading a payload or summing one.
      const length = buffer.readUInt32LE(position - bufferStart);
      if (length === 0 || length > MAX_FRAME_SIZE || position + FRAME_HEADER_SIZE + length > size) continue;
      const frame = await frameAt(position);
      if (frame.kind === 'whole' && looksLikeChanges(frame.payload)) return position;
    }
    return -1;
  }

  let position = HEADER_SIZE;
  while (position < size) {
    const frame = await frameAt(position);
    if (frame.kind === 'whole') {
      replayFrame(file, frame.payload, position + FRAME_HEADER_SIZE, apply);
      position += FRAME_HEADER_SIZE + frame.payload.length;
      continue;
    }
    const next = await nextWholeFrame(position + 1);
    if (next === -1) return { end: position, cutOff: frame.kind === 'cut' };
    const range = { from: position, to: next };
    if (!options.repair) throw new DamagedLogError(options.path, range);
    options.damaged?.push(range);
    position = next;
  }
  return { end: position, cutOff: true };
}

/** Reads and checks the 16-byte header: rejects when `file` is not a record log of this version. */
async function checkHeader(handle: FileHandle, size: number, file: string): Promise<void> {
  const header = size >= HEADER_SIZE ? await readExactly(handle, HEADER_SIZE, 0) : Buffer.alloc(0);
  if (header.length < HEADER_SIZE || !header.subarray(0, 8).equals(MAGIC)) {
    throw new Error(`${file} is not a customer-portal record log`);
  }
  const version = header.readUInt32LE(8);
  if (version !== VERSION)
    throw new Error(`${file} is a record log of version ${version}; this version reads ${VERSION}`);
}

/**
 * Reads the log at `file` without taking it over: applies every whole frame in order, as an open
 * does, and stops where the valid part ends, but writes nothing (a torn tail stays, leftovers stay)
 * and needs no lock, so it may run beside the process that holds the store. The `loc` of each
 * change points into a file that is closed once this resolves.
 */
export async function readRecordLog(file: string, apply: (change: ReplayedChange) => void): Promise<void> {
  const handle = await open(file, 'r');
  try {
    const size = (await handle.stat()).size;
    await checkHeader(handle, size, file);
    await replayFrames({ handle, readers: 0, retired: true }, size, apply, { path: file, repair: false });
  } finally {
    await handle.close();
  }
}

/** Rows whose JSON is in memory sort last: they need no read. */
const offsetOf = (row: Locatable) =>
  row.value !== undefined || row.loc === undefined ? Number.MAX_SAFE_INTEGER : row.loc.offset;

/** Reads the JSON at ascending locations of `file` through one large window instead of one read each. */
function sequentialReader(file: LogFile, fileSize: number) {
  let window: Buffer = Buffer.alloc(0);
  let windowStart = 0;
  return async (loc: Loc): Promise<string> => {
    if (loc.offset < windowStart || loc.offset + loc.length > windowStart + window.length) {
      const stop = Math.min(fileSize, loc.offset + Math.max(4 * READ_CHUNK, loc.length));
      window = await readExactly(file.handle, stop - loc.offset, loc.offset);
      windowStart = loc.offset;
    }
    return window.toString('utf8', loc.offset - windowStart, loc.offset - windowStart + loc.length);
  };
}

/** Bytes of a cut tail read back to name its records (`onDiscard`); the whole tail is saved whatever its size. */
const DISCARD_READ_BYTES = 1 << 20;

/** The file that says a log was closed, and at what size. */
const closedMark = (file: string) => `${file}.closed`;

/** The size the log had when it was last closed, or `null` when it was not closed since it was last opened. */
async function cleanCloseOf(file: string): Promise<number | null> {
  let text: string;
  try {
    text = (await readFile(closedMark(file))).toString('utf8');
  } catch (error) {
    if (hasCode(error, 'ENOENT')) return null;
    throw error;
  }
  let size: unknown;
  try {
    size = (JSON.parse(text) as { size?: unknown }).size;
  } catch {
    return null;
  }
  return typeof size === 'number' && Number.isSafeInteger(size) && size >= HEADER_SIZE ? size : null;
}

/** Copies bytes [start, end) of `handle` to a new file `target`, durably. */
async function saveRange(handle: FileHandle, start: number, end: number, target: string) {
  const out = await open(target, 'wx', PRIVATE_FILE);
  try {
    for (let at = start; at < end; at += READ_CHUNK) {
      const bytes = await readExactly(handle, Math.min(READ_CHUNK, end - at), at);
      await writeAll(out, bytes, at - start);
    }
    await out.sync();
  } finally {
    await out.close();
  }
  await syncDirectory(path.dirname(target));
}

/**
 * Opens the log at `file` (creating it when absent), applying every stored change in order.
 * A torn tail is cut off; anything else found past the valid part (which no crash of ours
 * writes: a disk fault) is kept beside the log as `<file>.discarded-<ms>` before it is cut.
 */
export async function openRecordLog(
  file: string,
  options: RecordLogOptions,
  apply: (change: ReplayedChange) => void,
): Promise<RecordLog> {
  const compactTemp = `${file}.compact`;
  // Temp files a crash left: of a compaction (the log it was replacing is whole), or of the log's creation.
  const leftover = new RegExp(`^${path.basename(file).replace(/\./g, '\\.')}\\.(?:compact|\\d+\\.tmp)$`);
  for (const name of await readdir(path.dirname(file))) {
    if (leftover.test(name)) await rm(path.join(path.dirname(file), name), { force: true });
  }
  try {
    await stat(file);
  } catch (error) {
    if (!hasCode(error, 'ENOENT')) throw error;
    await writeFileAtomically(file, headerBytes());
  }

  const closedAt = await cleanCloseOf(file);
  let current: LogFile = { handle: await open(file, 'r+'), readers: 0, retired: false };
  let repairReport: RepairReport | undefined;
  let discardReport: DiscardReport | undefined;
  let size: number;
  try {
    size = (await current.handle.stat()).size;
    await checkHeader(current.handle, size, file);
    const damaged: DamagedRange[] = [];
    const { end } = await replayFrames(current, size, apply, { path: file, repair: options.repair === true, damaged });
    // A log closed at a size past its last whole frame lost committed frames: no crash of a process
    // that closed the log cuts what it had written. Damage like any other, with the same way out.
    const lostCommitted = closedAt !== null && closedAt > end;
    if (lostCommitted) {
      if (options.repair !== true) throw new DamagedLogError(file, { from: end, to: size }, closedAt);
      if (size > end) damaged.push({ from: end, to: size });
    }
    if (damaged.length > 0) {
      const savedAs = `${file}.damaged-${Date.now()}`;
      const parts = await Promise.all(damaged.map(({ from, to }) => readExactly(current.handle, to - from, from)));
      const bytes = Buffer.concat(parts);
      await writeFileAtomically(savedAs, bytes);
      repairReport = { file, damaged, savedAs, records: recordsNamedIn(bytes) };
      // What was dropped, beside the bytes themselves, for whoever looks later.
      await writeFileAtomically(`${savedAs}.json`, Buffer.from(JSON.stringify(repairReport, null, 2) + '\n'));
    }
    if (end < size) {
      if (!lostCommitted) {
        // The last write of a process that did not close the log: a crash cut it, or a fault damaged
        // a frame nothing vouches for. Kept aside either way, and told.
        const savedAs = `${file}.discarded-${Date.now()}`;
        await saveRange(current.handle, end, size, savedAs);
        // The records named in its first MiB: the whole of a torn transaction, read back within a bound.
        const named = await readExactly(current.handle, Math.min(size - end, DISCARD_READ_BYTES), end);
        discardReport = { file, from: end, to: size, savedAs, records: recordsNamedIn(named) };
      }
      await current.handle.truncate(end);
      await current.handle.sync();
      size = end;
    }
  } catch (error) {
    await current.handle.close();
    throw error;
  }

  let queue: Pending[] = [];
  let draining = false;
  let drained: Promise<void> = Promise.resolve();
  let failure: Error | undefined;
  let closed = false;
  /** A compaction that failed before its rename is retried only once the log has grown by half again. */
  let compactionFloor = 0;
  /** A write failed part-way (the disk was full): bytes past `size` are not a whole frame, and go before the next write. */
  let tornTail = false;

  /** Rejects `batch` and everything queued after it, reverting their changes in memory first, newest first. */
  function abandon(batch: Pending[], error: Error) {
    const dropped = [...batch, ...queue.splice(0)];
    for (let i = dropped.length - 1; i >= 0; i--) dropped[i]!.revert?.();
    for (const pending of dropped) pending.reject(error);
  }

  function fail(error: Error) {
    failure ??= error;
    abandon([], failure);
  }

  async function writeBatch(batch: Pending[]) {
    const bytes = batch.length === 1 ? batch[0]!.frame : Buffer.concat(batch.map((pending) => pending.frame));
    if (tornTail) {
      await current.handle.truncate(size);
      tornTail = false;
    }
    const base = size;
    await writeAll(current.handle, bytes, base);
    // fdatasync also makes the new file length durable; a crash before it leaves a tail replay drops.
    await current.handle.datasync();
    size += bytes.length;
    let frameStart = base;
    for (const pending of batch) {
      for (const put of pending.puts) {
        if (put.row.keep) continue;
        put.row.loc = { file: current, offset: frameStart + put.offset, length: put.length, frame: frameStart };
        put.row.value = undefined;
      }
      frameStart += pending.frame.length;
    }
  }

  /**
   * Group commit: every append that arrives while a batch is being written goes out in the next
   * one, under one fsync. `draining` drops in the same synchronous step as the last look at the
   * queue, so an append never finds it set with nobody left to write its frame.
   */
  async function drain() {
    try {
      while (queue.length > 0 && failure === undefined) {
        const batch = queue;
        queue = [];
        try {
          await writeBatch(batch);
        } catch (error) {
          if (isDiskFull(error)) {
            // Nothing of these transactions is kept, and the log goes on: the next write may find space.
            tornTail = true;
            abandon(batch, error as Error);
          } else {
            failure ??= error as Error;
            abandon(batch, error as Error);
          }
          return;
        }
        // A transaction that forgets resolves only once the log no longer holds what it replaced.
        const forget = batch.some((pending) => pending.forget);
        if (!forget) for (const pending of batch) pending.resolve();
        if (
          forget ||
          size >= Math.max(options.compactAfterBytes, 2 * options.liveBytes() + HEADER_SIZE, compactionFloor)
        ) {
          await compact().catch((error: Error) => fail(error));
        }
        if (forget) for (const pending of batch) pending.resolve();
      }
    } finally {
      draining = false;
    }
  }

  /**
   * Rewrites the log with only the live records: a temp file, fsync, rename over the log, fsync of
   * the directory. Runs between two batches, so the log file does not move meanwhile; appends wait.
   * The snapshot may include changes still queued: they are written again after it, and a change is
   * a whole record, so applying it twice gives the same state.
   */
  async function compact(): Promise<boolean> {
    const rows = durableSnapshot();
    const temp = await open(compactTemp, 'w+', PRIVATE_FILE);
    const next: LogFile = { handle: temp, readers: 0, retired: false };
    const placed: { row: Locatable; loc: Loc }[] = [];
    let position = HEADER_SIZE;
    try {
      await writeAll(temp, headerBytes(), 0);
      const readOld = sequentialReader(current, size);
      // A record copied from the old log is checked against its frame's checksum first: a compaction
      // must never carry a damaged record into a new log under a fresh checksum.
      const verified = new Set<number>();
      const source = current;
      const verifyFrame = async (frame: number) => {
        if (verified.has(frame)) return;
        const header = await readExactly(source.handle, FRAME_HEADER_SIZE, frame);
        const length = header.readUInt32LE(0);
        const payload =
          length > 0 && length <= MAX_FRAME_SIZE && frame + FRAME_HEADER_SIZE + length <= size
            ? await readExactly(source.handle, length, frame + FRAME_HEADER_SIZE)
            : null;
        if (payload === null || crc32(payload) !== header.readUInt32LE(4))
          throw new DamagedLogError(file, {
            from: frame,
            to: frame + FRAME_HEADER_SIZE + Math.max(0, Math.min(length, size - frame - FRAME_HEADER_SIZE)),
          });
        verified.add(frame);
      };
      // Records held only on disk are copied in file order, so the old log is read front to back.
      const ordered = rows.slice().sort((a, b) => offsetOf(a) - offsetOf(b));
      let changes: LogChange[] = [];
      let pendingBytes = 0;
      const flush = async () => {
        const { frame, puts } = encodeFrame(changes);
        await writeAll(temp, frame, position);
        for (const put of puts)
          placed.push({
            row: put.row,
            loc: { file: next, offset: position + put.offset, length: put.length, frame: position },
          });
        position += frame.length;
        changes = [];
        pendingBytes = 0;
      };
      for (const row of ordered) {
        if (row.value === undefined) await verifyFrame(row.loc!.frame);
        const json = row.value !== undefined ? JSON.stringify(row.value) : await readOld(row.loc!);
        changes.push({ table: row.table, json, row });
        pendingBytes += json.length;
        if (pendingBytes >= COMPACT_FRAME_SIZE) await flush();
      }
      if (changes.length > 0) await flush();
      await temp.sync();
      await rename(compactTemp, file);
    } catch (error) {
      // The old log is untouched and still the log: carry on with it, and try again later; but a
      // damaged record stops the store, with the error that says where and how to recover.
      await temp.close();
      await rm(compactTemp, { force: true });
      if (error instanceof DamagedLogError) throw error;
      compactionFloor = Math.ceil(size * 1.5);
      return false;
    }
    // From the rename on, the new file is the log: a failure now is a failure of the store.
    await syncDirectory(path.dirname(file));
    const old = current;
    current = next;
    size = position;
    for (const { row, loc } of placed) {
      if (row.keep) continue;
      row.loc = loc;
      row.value = undefined;
    }
    old.retired = true;
    if (old.readers === 0) await old.handle.close();
    return true;
  }

  /**
   * The live records as the disk holds them: memory's, except that a change still queued counts as
   * not made (it may yet fail, and must not reach the disk through a compaction first). Each queued
   * change's `previous` that is not itself queued is what the disk has under that id.
   */
  function durableSnapshot(): Locatable[] {
    const rows = options.snapshot();
    if (queue.length === 0) return rows;
    const queued = new Set<Locatable>();
    const onDisk: Locatable[] = [];
    for (const pending of queue) {
      for (const change of pending.changes) {
        if (change.previous !== undefined && !queued.has(change.previous)) onDisk.push(change.previous);
        if ('json' in change) queued.add(change.row);
      }
    }
    return [...rows.filter((row) => !queued.has(row)), ...onDisk];
  }

  async function read(loc: Loc): Promise<Buffer> {
    const { file: source } = loc;
    source.readers++;
    try {
      return await readExactly(source.handle, loc.length, loc.offset);
    } finally {
      source.readers--;
      if (source.retired && source.readers === 0) await source.handle.close();
    }
  }

  if (repairReport !== undefined) {
    // The damaged bytes leave the log now, before any write: the next open reads a whole log.
    if (!(await compact())) {
      await current.handle.close();
      throw new Error(`${file}: the repair could not rewrite the log without its damaged bytes; nothing was changed`);
    }
    options.onRepair?.(repairReport);
  }
  // From here the log is written again: until the next close, its end vouches for nothing.
  await rm(closedMark(file), { force: true });
  await syncDirectory(path.dirname(file));
  if (discardReport !== undefined) options.onDiscard?.(discardReport);

  return {
    get failure() {
      return failure;
    },
    fail,
    append(changes, revert, forget) {
      if (failure !== undefined) return Promise.reject(failure);
      if (closed) return Promise.reject(new Error('The record log is closed'));
      const encoded = encodeFrame(changes);
      return new Promise<void>((resolve, reject) => {
        queue.push({ ...encoded, changes, revert, forget: forget === true, resolve, reject });
        if (!draining) {
          draining = true;
          drained = drain();
        }
      });
    },
    read,
    async close() {
      closed = true;
      while (draining) await drained;
      // The size every acknowledged frame reaches: an open that finds less lost committed frames.
      // Without it (a full disk), the next open reads the log as a crash left it.
      if (failure === undefined) {
        await writeFileAtomically(
          closedMark(file),
          Buffer.from(`${JSON.stringify({ size: (await current.handle.stat()).size })}\n`),
        ).catch(() => {});
      }
      current.retired = true;
      if (current.readers === 0) await current.handle.close();
    },
  };
}
