import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import type { SqlClient } from '../../../adapters/sql/index.js';
import { sqlBlobs } from '../../../adapters/sql/index.js';
import { CHUNK_SIZE } from '../../../adapters/sql/sql-blobs.js';
import type { BlobStore } from '../../../src/ports.js';
import { patternBytes } from '../../conformance/fixtures.js';
import { dropSchema, freshSchema } from '../../helpers/sql.js';
import { rowsOf, type SqlBackend } from './context.js';

/** Every statement a client ran, for tests that check what was asked of the database. */
function spying(client: SqlClient) {
  const log: { text: string; params: unknown[] }[] = [];
  const spy: SqlClient & Record<string, unknown> = {
    // On a pool the adapter sends pg's config form ({ name, text, values }); both are logged alike.
    query(text: string | { text: string; values: unknown[] }, params?: unknown[]) {
      log.push(typeof text === 'string' ? { text, params: params ?? [] } : { text: text.text, params: text.values });
      return (client.query as (text: unknown, params?: unknown[]) => Promise<{ rows: unknown[] }>)(text, params);
    },
  } as SqlClient & Record<string, unknown>;
  // Keep the client's kind (PGlite's transaction, a pool's connect) so the adapter treats it alike.
  for (const method of ['transaction', 'connect'] as const) {
    const own = (client as unknown as Record<string, unknown>)[method];
    if (typeof own === 'function') spy[method] = own.bind(client);
  }
  if ('totalCount' in client)
    Object.defineProperty(spy, 'totalCount', { get: () => (client as { totalCount: number }).totalCount });
  return { spy, log };
}

function withBlobs(
  backend: SqlBackend,
  body: (blobs: BlobStore, schema: string, log: { text: string; params: unknown[] }[]) => Promise<void>,
) {
  return async () => {
    const schema = freshSchema();
    const { spy, log } = spying(backend.client);
    const blobs = sqlBlobs({ client: spy, schema });
    await blobs.open!();
    try {
      await body(blobs, schema, log);
    } finally {
      await blobs.close!();
      await dropSchema(backend.client, schema);
    }
  };
}

/** Pieces of `size` bytes, the last one shorter. */
function* pieces(bytes: Buffer, size: number) {
  for (let offset = 0; offset < bytes.length; offset += size) yield bytes.subarray(offset, offset + size);
}

export function blobTests(test: Test, backend: SqlBackend): void {
  const chunkRows = async (schema: string) =>
    (await rowsOf(backend.client, schema, 'blob_chunks'))
      .map((row) => [Number(row.seq), (row.data as Uint8Array).byteLength])
      .sort((a, b) => a[0]! - b[0]!);

  for (const size of [1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 2 * CHUNK_SIZE, 3 * CHUNK_SIZE + 5]) {
    test(
      `blobs: ${size} bytes in odd pieces make full ${CHUNK_SIZE}-byte chunks and one short last chunk`,
      withBlobs(backend, async (blobs, schema) => {
        const bytes = patternBytes(size, 5);
        assert.equal(await blobs.put('fsf_sized', Readable.from(pieces(bytes, 100_003))), { size });
        const expected = Array.from({ length: Math.ceil(size / CHUNK_SIZE) }, (_, seq) => [
          seq,
          Math.min(CHUNK_SIZE, size - seq * CHUNK_SIZE),
        ]);
        assert.equal(await chunkRows(schema), expected);
        assert.ok((await buffer((await blobs.get('fsf_sized'))!)).equals(bytes));
      }),
    );
  }

  test(
    'blobs: one piece far larger than a chunk is split, not held whole per row',
    withBlobs(backend, async (blobs, schema) => {
      const bytes = patternBytes(5 * CHUNK_SIZE + 3, 2);
      await blobs.put('fsf_big', Readable.from([bytes]));
      assert.equal(
        (await chunkRows(schema)).map(([, length]) => length),
        [CHUNK_SIZE, CHUNK_SIZE, CHUNK_SIZE, CHUNK_SIZE, CHUNK_SIZE, 3],
      );
      assert.ok((await buffer((await blobs.get('fsf_big'))!)).equals(bytes));
    }),
  );

  test(
    'blobs: ranges across chunk edges are exact, and fetch only the chunks they cover',
    withBlobs(backend, async (blobs, _schema, log) => {
      const bytes = patternBytes(10 * CHUNK_SIZE + 100, 4);
      await blobs.put('fsf_ranges', Readable.from(pieces(bytes, 65_536)));
      const cases: [number, number, number, number][] = [
        // start, end, first chunk, last chunk
        [CHUNK_SIZE - 1, CHUNK_SIZE, 0, 1],
        [CHUNK_SIZE, 2 * CHUNK_SIZE - 1, 1, 1],
        [7 * CHUNK_SIZE + 10, 7 * CHUNK_SIZE + 20, 7, 7],
        [3 * CHUNK_SIZE - 1, 9 * CHUNK_SIZE + 1, 2, 9],
        [10 * CHUNK_SIZE, 10 * CHUNK_SIZE + 99, 10, 10],
      ];
      for (const [start, end, first, last] of cases) {
        log.length = 0;
        const part = await buffer((await blobs.get('fsf_ranges', { start, end }))!);
        assert.ok(part.equals(bytes.subarray(start, end + 1)), `range ${start}-${end}`);
        const fetched = log
          .filter((entry) => entry.text.includes('blob_chunks'))
          .flatMap((entry) => {
            const [, from, to] = entry.params as [string, number, number];
            return Array.from({ length: to - from + 1 }, (_, i) => from + i);
          });
        assert.equal(
          fetched,
          Array.from({ length: last - first + 1 }, (_, i) => first + i),
          `chunks for ${start}-${end}`,
        );
      }
      // A range running past the end stops at the last byte.
      const tail = await buffer(
        (await blobs.get('fsf_ranges', { start: bytes.length - 3, end: bytes.length + 1000 }))!,
      );
      assert.ok(tail.equals(bytes.subarray(bytes.length - 3)));
    }),
  );

  test(
    'blobs: a body failing after several chunks rejects and leaves no row in either table',
    withBlobs(backend, async (blobs, schema) => {
      await blobs.put('fsf_other', Readable.from([Buffer.from('stays')]));
      async function* failing() {
        yield patternBytes(3 * CHUNK_SIZE + 10);
        throw new Error('upload cut off');
      }
      await blobs.put('fsf_cut', failing()).then(
        () => assert.unreachable('put should reject'),
        (error: Error) => assert.is(error.message, 'upload cut off'),
      );
      assert.equal(
        (await rowsOf(backend.client, schema, 'blobs')).map((row) => row.key),
        ['fsf_other'],
      );
      assert.is((await rowsOf(backend.client, schema, 'blob_chunks')).length, 1);
    }),
  );

  test(
    'blobs: an upload in progress is invisible until its last byte is stored',
    withBlobs(backend, async (blobs, schema) => {
      const body = new Readable({ read() {} });
      const put = blobs.put('fsf_slow', body);
      put.catch(() => {}); // awaited below; a rejection meanwhile must not go unhandled
      body.push(patternBytes(2 * CHUNK_SIZE + 7));
      // Wait until the chunks are in the table: the upload is well under way.
      for (let i = 0; i < 200 && (await rowsOf(backend.client, schema, 'blob_chunks')).length < 2; i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.is((await rowsOf(backend.client, schema, 'blob_chunks')).length, 2);
      assert.is(await blobs.get('fsf_slow'), null);
      assert.is(await blobs.stat('fsf_slow'), null);
      const listed: string[] = [];
      for await (const info of blobs.listBefore('2100-01-01T00:00:00+00:00')) listed.push(info.key);
      assert.equal(listed, []);
      body.push(null);
      assert.equal(await put, { size: 2 * CHUNK_SIZE + 7 });
      assert.is((await blobs.stat('fsf_slow'))!.size, 2 * CHUNK_SIZE + 7);
    }),
  );

  test(
    'blobs: writing a key again replaces the blob and leaves no chunk of the old one',
    withBlobs(backend, async (blobs, schema) => {
      await blobs.put('fsf_twice', Readable.from([patternBytes(2 * CHUNK_SIZE, 1)]));
      const second = patternBytes(100, 2);
      await blobs.put('fsf_twice', Readable.from([second]));
      assert.ok((await buffer((await blobs.get('fsf_twice'))!)).equals(second));
      assert.is((await rowsOf(backend.client, schema, 'blobs')).length, 1);
      assert.equal(await chunkRows(schema), [[0, 100]]);
    }),
  );

  test(
    'blobs: a blob deleted while it is read ends the stream with an error, not short',
    withBlobs(backend, async (blobs) => {
      await blobs.put('fsf_vanishing', Readable.from([patternBytes(12 * CHUNK_SIZE)]));
      const stream = (await blobs.get('fsf_vanishing'))!;
      const iterator = stream[Symbol.asyncIterator]();
      await iterator.next();
      await blobs.delete('fsf_vanishing');
      let received = CHUNK_SIZE;
      const error = await (async () => {
        try {
          for (let step = await iterator.next(); !step.done; step = await iterator.next())
            received += (step.value as Buffer).length;
        } catch (caught) {
          return caught as Error;
        }
        return null;
      })();
      assert.ok(error, `the stream ended without an error after ${received} bytes`);
      assert.match(error!.message, /removed or replaced/);
    }),
  );

  test(
    'blobs: listBefore pages through more blobs than one query returns',
    withBlobs(backend, async (_blobs, schema) => {
      let now = new Date('2026-01-01T00:00:00Z');
      const dated = sqlBlobs({ client: backend.client, schema, clock: () => now });
      await dated.open!();
      const keys: string[] = [];
      for (let i = 0; i < 1203; i++) {
        // Many share a second: the listing must not lose or repeat blobs with equal times.
        now = new Date(Date.UTC(2026, 0, 1, 0, 0, Math.floor(i / 7)));
        const key = `fsf_${String(i).padStart(5, '0')}`;
        keys.push(key);
        await dated.put(key, Readable.from([Buffer.from([i & 0xff])]));
      }
      const listed: string[] = [];
      for await (const info of dated.listBefore('2026-01-01T00:02:00+00:00')) listed.push(info.key);
      assert.equal(listed, keys.slice(0, 120 * 7));
      await dated.close!();
    }),
  );
}
