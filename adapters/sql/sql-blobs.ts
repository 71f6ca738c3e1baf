import { randomUUID } from 'node:crypto';
import { takeBody } from '../shared/body.js';
import { Readable } from 'node:stream';
import type { BlobInfo, BlobStore } from '../../src/ports.js';
import { atom } from '../../src/shared/time.js';
import { lockWithin, wrapClient, type Db, type SqlClient } from './client.js';
import { guardUntilOpen } from './guard.js';
import { migrate, type Migration } from './migrations.js';
import { atomOf, resolveNames, type SqlOptions } from './schema.js';

/** Bytes per chunk row: big enough that a 5 MiB upload is 20 rows, small enough to hold in memory. */
export const CHUNK_SIZE = 256 * 1024;
/** Chunks fetched per query when reading: 1 MiB per round trip. */
const READ_BATCH = 4;
/** Blobs listed per query by `listBefore`. */
const LIST_PAGE = 500;
/** An upload unfinished for this long belonged to a process that died; `open()` removes it. */
const ABANDONED_AFTER = '1 day';

/**
 * A blob is a row in `blobs` and its bytes in `blob_chunks`. An upload writes its chunks under a
 * fresh row whose `key` is NULL, one statement per chunk (no connection or transaction is held
 * while waiting for the body), and a last transaction gives the row its key: until then nothing
 * can find it. A failed upload deletes its row, and the chunks go with it (ON DELETE CASCADE).
 */
const BLOB_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'chunked blobs',
    statements: ({ table }) => [
      `CREATE TABLE ${table('blobs')} (
        id text COLLATE "C" PRIMARY KEY,
        key text COLLATE "C" UNIQUE,
        size bigint,
        chunk_size integer NOT NULL,
        created_at timestamptz,
        started_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE INDEX portal_blobs_created ON ${table('blobs')} (created_at, key) WHERE key IS NOT NULL`,
      `CREATE TABLE ${table('blob_chunks')} (
        blob_id text COLLATE "C" NOT NULL REFERENCES ${table('blobs')} (id) ON DELETE CASCADE,
        seq integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (blob_id, seq)
      )`,
      // Documents and images rarely compress: skip the attempt, store out of line as they come.
      `ALTER TABLE ${table('blob_chunks')} ALTER COLUMN data SET STORAGE EXTERNAL`,
    ],
  },
];

export interface SqlBlobsOptions extends SqlOptions {
  /** A `pg.Pool`, a PGlite instance, or anything with `query(text, params) → Promise<{ rows }>`. Never closed here. */
  client: SqlClient;
  /** Dates the blobs written (`stat`, `listBefore`); default the system clock. */
  clock?: () => Date;
}

/** Blobs in PostgreSQL (through `pg`) or PGlite, as chunked `bytea` rows streamed both ways. */
export function sqlBlobs(options: SqlBlobsOptions): BlobStore {
  const who = 'sqlBlobs';
  const db = wrapClient(
    options?.client,
    who,
    options?.preparedStatements ?? true,
    options?.waitForDatabaseMs ?? 10_000,
  );
  const names = resolveNames(options, who);
  const clock = options.clock ?? (() => new Date());
  const { table } = names;

  const sql = {
    // The writes of an upload can each run twice with the same result (see `replayable` below).
    start: `INSERT INTO ${table('blobs')} (id, chunk_size) VALUES ($1::text, $2::int) ON CONFLICT (id) DO NOTHING`,
    writeChunk: `INSERT INTO ${table('blob_chunks')} (blob_id, seq, data) VALUES ($1::text, $2::int, $3::bytea)
      ON CONFLICT (blob_id, seq) DO UPDATE SET data = EXCLUDED.data`,
    // Two finishes of one key one after the other, so the second replaces the first cleanly.
    replace: `DELETE FROM ${table('blobs')} WHERE key = $1::text AND id <> $2::text`,
    finish: `UPDATE ${table('blobs')} SET key = $2::text, size = $3::bigint, created_at = $4::timestamptz WHERE id = $1::text`,
    abandon: `DELETE FROM ${table('blobs')} WHERE id = $1::text`,
    find: `SELECT id, size, chunk_size FROM ${table('blobs')} WHERE key = $1::text`,
    readChunks: `SELECT seq, data FROM ${table('blob_chunks')} WHERE blob_id = $1::text AND seq BETWEEN $2::int AND $3::int ORDER BY seq`,
    stat: `SELECT size, ${atomOf('created_at')} AS created_at FROM ${table('blobs')} WHERE key = $1::text`,
    delete: `DELETE FROM ${table('blobs')} WHERE key = $1::text RETURNING id`,
    list: `SELECT key, size, ${atomOf('created_at')} AS created_at FROM ${table('blobs')}
      WHERE key IS NOT NULL AND created_at < $1::timestamptz
        AND ($2::timestamptz IS NULL OR (created_at, key) > ($2::timestamptz, $3::text))
      ORDER BY created_at, key
      LIMIT ${LIST_PAGE}`,
    sweep: `DELETE FROM ${table('blobs')} WHERE key IS NULL AND started_at < now() - interval '${ABANDONED_AFTER}'`,
  };
  const LOCK_CLASS = 0x63706f62; // 'cpob'
  /**
   * An upload's statements may each run again after a connection broke under them with no word
   * from the server: a chunk written twice is the same chunk, and a blob row inserted twice is
   * one row. (The finish, a transaction, is settled by its transaction id; it also only removes
   * other rows of the key.) The upload then survives a database restart.
   */
  const REPLAYABLE = { replayable: true } as const;

  async function writeChunks(id: string, body: AsyncIterable<Uint8Array | string>): Promise<number> {
    let pending: Buffer[] = [];
    let pendingLength = 0;
    let seq = 0;
    let size = 0;
    const take = (length: number): Buffer => {
      const parts: Buffer[] = [];
      let need = length;
      while (need > 0) {
        const head = pending[0]!;
        if (head.length <= need) {
          parts.push(head);
          pending.shift();
          need -= head.length;
        } else {
          parts.push(head.subarray(0, need));
          pending[0] = head.subarray(need);
          need = 0;
        }
      }
      pendingLength -= length;
      return parts.length === 1 ? parts[0]! : Buffer.concat(parts, length);
    };
    // Awaiting each row before pulling more is the backpressure: the body is read as fast as the
    // database takes it, and at most one chunk plus the body's last piece is held in memory.
    for await (const piece of body) {
      // Copied: a producer may reuse its buffer once the loop asks for the next piece.
      const bytes = Buffer.from(piece as Uint8Array);
      pending.push(bytes);
      pendingLength += bytes.length;
      size += bytes.length;
      while (pendingLength >= CHUNK_SIZE) await db.query(sql.writeChunk, [id, seq++, take(CHUNK_SIZE)], REPLAYABLE);
    }
    if (pendingLength > 0) await db.query(sql.writeChunk, [id, seq++, take(pendingLength)], REPLAYABLE);
    pending = [];
    return size;
  }

  async function* readChunks(
    db: Db,
    id: string,
    first: number,
    last: number,
    start: number,
    end: number,
    chunkSize: number,
  ) {
    for (let from = first; from <= last; from += READ_BATCH) {
      const to = Math.min(from + READ_BATCH - 1, last);
      const rows = await db.query(sql.readChunks, [id, from, to]);
      if (rows.length !== to - from + 1) throw new Error('The blob was removed or replaced while it was being read');
      for (const row of rows) {
        const seq = Number(row.seq);
        const data = row.data as Uint8Array;
        const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
        const offset = seq * chunkSize;
        // Trim the first and last chunk to the range; the ones between pass whole.
        yield bytes.subarray(Math.max(0, start - offset), Math.min(bytes.length, end - offset + 1));
      }
    }
  }

  const blobs: BlobStore = {
    async put(key, body) {
      takeBody(body);
      const id = randomUUID();
      await db.query(sql.start, [id, CHUNK_SIZE], REPLAYABLE);
      try {
        const size = await writeChunks(id, body);
        const createdAt = atom(clock());
        await db.transaction(async (tx) => {
          await lockWithin(tx, LOCK_CLASS, key);
          await tx.query(sql.replace, [key, id]);
          await tx.query(sql.finish, [id, key, size, createdAt]);
        });
        return { size };
      } catch (error) {
        // Should this fail too, the row is left unnamed, invisible, and swept by a later open().
        await db.query(sql.abandon, [id], REPLAYABLE).catch(() => {});
        throw error;
      }
    },
    async get(key, range) {
      const [row] = await db.query(sql.find, [key]);
      if (row === undefined) return null;
      const size = Number(row.size);
      const chunkSize = Number(row.chunk_size);
      const start = range?.start ?? 0;
      const end = Math.min(range?.end ?? size - 1, size - 1);
      if (size === 0 || start > end) return Readable.from([], { objectMode: false });
      const first = Math.floor(start / chunkSize);
      const last = Math.floor(end / chunkSize);
      return Readable.from(readChunks(db, row.id as string, first, last, start, end, chunkSize), { objectMode: false });
    },
    async stat(key) {
      const [row] = await db.query(sql.stat, [key]);
      return row === undefined ? null : { key, size: Number(row.size), createdAt: row.created_at as string };
    },
    async delete(key) {
      return (await db.query(sql.delete, [key])).length === 1;
    },
    async *listBefore(before): AsyncIterable<BlobInfo> {
      // Keyset pages: no cursor or connection is held while the caller works through them.
      // Written times have whole seconds (ATOM), so the ATOM text is an exact cursor.
      let after: { at: string; key: string } | null = null;
      for (;;) {
        const rows = await db.query(sql.list, [before, after?.at ?? null, after?.key ?? null]);
        for (const row of rows)
          yield { key: row.key as string, size: Number(row.size), createdAt: row.created_at as string };
        const lastRow = rows.at(-1);
        if (rows.length < LIST_PAGE || lastRow === undefined) return;
        after = { at: lastRow.created_at as string, key: lastRow.key as string };
      }
    },
  };

  return guardUntilOpen(
    who,
    blobs,
    async () => {
      await migrate(db, names, 'blobs', BLOB_MIGRATIONS);
      await db.query(sql.sweep);
    },
    ['listBefore'],
  );
}
