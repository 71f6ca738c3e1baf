import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { buffer } from 'node:stream/consumers';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { BlobReader, BlobStore } from '../../src/ports.js';
import type { BlobStoreFactory } from './types.js';
import { patternBytes } from './fixtures.js';
import { reopenable } from './reopen.js';

/** Runs every `BlobStore` behaviour against the adapter `factory` makes. */
export function blobStoreSuite(factory: BlobStoreFactory): void {
  const test = suite(`BlobStore conformance: ${factory.name}`);
  let now = new Date('2026-01-01T00:00:00Z');
  const clock = () => now;

  const withBlobs = (body: (blobs: BlobStore, swap: () => Promise<BlobStore>) => Promise<void>) => async () => {
    now = new Date('2026-01-01T00:00:00Z');
    let blobs = await factory.create({ clock });
    const swap = async () => (blobs = await factory.reopen!(blobs));
    try {
      await body(blobs, swap);
    } finally {
      await factory.destroy(blobs);
    }
  };

  test(
    'put resolves the size; get streams the same bytes back',
    withBlobs(async (blobs) => {
      const bytes = patternBytes(3 * 1024 * 1024 + 17);
      const { size } = await blobs.put('fsf_one', Readable.from(chunks(bytes, 64 * 1024)));
      assert.is(size, bytes.length);
      const read = await buffer((await blobs.get('fsf_one'))!);
      assert.ok(read.equals(bytes), 'bytes round-trip exactly');
      assert.equal(await blobs.stat('fsf_one'), {
        key: 'fsf_one',
        size: bytes.length,
        createdAt: '2026-01-01T00:00:00+00:00',
      });
    }),
  );

  test(
    'an empty blob is stored and read back empty',
    withBlobs(async (blobs) => {
      assert.equal(await blobs.put('fsf_empty', Readable.from([])), { size: 0 });
      assert.is((await buffer((await blobs.get('fsf_empty'))!)).length, 0);
    }),
  );

  test(
    'an async iterable body is accepted',
    withBlobs(async (blobs) => {
      async function* body() {
        yield Buffer.from('hello, ');
        yield new TextEncoder().encode('world');
      }
      await blobs.put('fsf_iter', body());
      assert.is(await text((await blobs.get('fsf_iter'))!), 'hello, world');
    }),
  );

  test(
    'a body that reuses its buffer for each chunk is stored as yielded',
    withBlobs(async (blobs) => {
      const bytes = patternBytes(2 * 1024 * 1024 + 5, 9);
      async function* reusing() {
        // One buffer, refilled for every chunk once the store asks for the next: the store must copy.
        const scratch = new Uint8Array(48 * 1024);
        for (let offset = 0; offset < bytes.length; offset += scratch.length) {
          const piece = bytes.subarray(offset, offset + scratch.length);
          scratch.set(piece);
          yield scratch.subarray(0, piece.length);
          scratch.fill(0xee);
        }
      }
      assert.equal(await blobs.put('fsf_reused', reusing()), { size: bytes.length });
      assert.ok(
        (await buffer((await blobs.get('fsf_reused'))!)).equals(bytes),
        'the bytes yielded, not the buffer refilled after',
      );
    }),
  );

  test(
    'a range reads exactly the bytes from start to end inclusive',
    withBlobs(async (blobs) => {
      const bytes = patternBytes(1_000_000);
      await blobs.put('fsf_range', Readable.from(chunks(bytes, 100_000)));
      for (const [start, end] of [
        [0, 0],
        [0, 99],
        [99_999, 100_000],
        [123_456, 654_321],
        [999_999, 999_999],
      ] as const) {
        const part = await buffer((await blobs.get('fsf_range', { start, end }))!);
        assert.ok(part.equals(bytes.subarray(start, end + 1)), `range ${start}-${end}`);
      }
    }),
  );

  /** Runs `body` on a store that reads into the caller's buffers (`BlobStore.reader`); says so and passes where the store has none. */
  const withReader = (body: (blobs: BlobStore, reader: NonNullable<BlobStore['reader']>) => Promise<void>) =>
    withBlobs(async (blobs) => {
      if (blobs.reader === undefined) {
        console.log(
          `skip: ${factory.name} has no reader (BlobStore.reader is optional), so its reads into the caller's buffers are not checked`,
        );
        return;
      }
      await body(blobs, blobs.reader.bind(blobs));
    });

  /** Every byte `reader` gives, read through one buffer of `size` bytes used again for each read, and how many reads gave bytes. */
  async function readAll(reader: BlobReader, size: number): Promise<{ bytes: Buffer; reads: number }> {
    const into = Buffer.alloc(size);
    const parts: Buffer[] = [];
    for (let count = await reader.read(into); count > 0; count = await reader.read(into))
      parts.push(Buffer.from(into.subarray(0, count)));
    assert.is(await reader.read(into), 0, 'still 0 after the end');
    await reader.close();
    return { bytes: Buffer.concat(parts), reads: parts.length };
  }

  test(
    "a reader reads the blob into the caller's buffer, then 0; over a range, exactly its bytes",
    withReader(async (blobs, reader) => {
      const bytes = patternBytes(1_000_000, 4);
      await blobs.put('fsf_reader', Readable.from(chunks(bytes, 100_000)));
      const whole = await readAll((await reader('fsf_reader'))!, 65_536);
      assert.ok(whole.bytes.equals(bytes), 'the whole blob, byte-exact');
      assert.ok(whole.reads >= Math.ceil(bytes.length / 65_536), 'never more than the buffer holds at a time');
      for (const [start, end] of [
        [0, 0],
        [65_535, 65_536],
        [123_456, 654_321],
        [999_999, 999_999],
      ] as const) {
        const part = await readAll((await reader('fsf_reader', { start, end }))!, 10_000);
        assert.ok(part.bytes.equals(bytes.subarray(start, end + 1)), `range ${start}-${end}`);
      }
      const empty = await blobs.put('fsf_readerEmpty', Readable.from([]));
      assert.is(empty.size, 0);
      assert.is(
        (await readAll((await reader('fsf_readerEmpty'))!, 1024)).bytes.length,
        0,
        'an empty blob reads as 0 at once',
      );
    }),
  );

  test(
    'a reader: null for an absent blob; closing again does nothing; a read after close rejects',
    withReader(async (blobs, reader) => {
      assert.is(await reader('fsf_absent'), null);
      assert.is(await reader('../../etc/passwd'), null, 'a key that is no record id names no file');
      await blobs.put('fsf_closed', Readable.from([Buffer.from('abc')]));
      const open = (await reader('fsf_closed'))!;
      await open.close();
      await open.close();
      let error: unknown;
      await open.read(Buffer.alloc(8)).catch((caught) => (error = caught));
      assert.instance(error, Error);
    }),
  );

  test(
    'an absent blob: get and stat are null, delete is false',
    withBlobs(async (blobs) => {
      assert.is(await blobs.get('fsf_absent'), null);
      assert.is(await blobs.stat('fsf_absent'), null);
      assert.is(await blobs.delete('fsf_absent'), false);
    }),
  );

  test(
    'delete removes the blob once',
    withBlobs(async (blobs) => {
      await blobs.put('fsf_del', Readable.from([Buffer.from('x')]));
      assert.is(await blobs.delete('fsf_del'), true);
      assert.is(await blobs.get('fsf_del'), null);
      assert.is(await blobs.delete('fsf_del'), false);
    }),
  );

  test(
    'a body that fails half-way rejects with its error and leaves nothing',
    withBlobs(async (blobs) => {
      async function* failing() {
        yield patternBytes(300_000);
        throw new Error('client went away');
      }
      let error: unknown;
      await blobs.put('fsf_broken', failing()).catch((caught) => (error = caught));
      assert.instance(error, Error);
      assert.is((error as Error).message, 'client went away');
      assert.is(await blobs.get('fsf_broken'), null);
      assert.is(await blobs.stat('fsf_broken'), null);
      const listed: string[] = [];
      for await (const info of blobs.listBefore('2100-01-01T00:00:00+00:00')) listed.push(info.key);
      assert.not.ok(listed.includes('fsf_broken'));
    }),
  );

  test(
    'a destroyed stream body rejects and leaves nothing',
    withBlobs(async (blobs) => {
      const body = new Readable({ read() {} });
      body.push(patternBytes(100_000));
      const put = blobs.put('fsf_destroyed', body);
      setTimeout(() => body.destroy(new Error('aborted')), 10);
      let rejected = false;
      await put.catch(() => (rejected = true));
      assert.ok(rejected);
      assert.is(await blobs.stat('fsf_destroyed'), null);
    }),
  );

  test(
    'a stream body that fails before the store reads it rejects the put, and the process lives on',
    withBlobs(async (blobs) => {
      const body = new Readable({ read() {} });
      const put = blobs.put('fsf_early', body);
      // At once: the store is still setting up (a temp file, a row, the SDK) and reads nothing yet.
      body.destroy(new Error('gone before the store read it'));
      let error: unknown;
      await put.catch((caught) => (error = caught));
      assert.instance(error, Error);
      assert.is(await blobs.stat('fsf_early'), null);
    }),
  );

  test(
    'listBefore yields exactly the blobs written before the given time',
    withBlobs(async (blobs) => {
      now = new Date('2026-01-01T00:00:00Z');
      await blobs.put('fsf_old', Readable.from([Buffer.from('old')]));
      now = new Date('2026-01-01T02:00:00Z');
      await blobs.put('fsf_new', Readable.from([Buffer.from('new')]));
      const listed = [];
      for await (const info of blobs.listBefore('2026-01-01T01:00:00+00:00')) listed.push(info);
      assert.equal(listed, [{ key: 'fsf_old', size: 3, createdAt: '2026-01-01T00:00:00+00:00' }]);
    }),
  );

  reopenable(test, factory)(
    'blobs survive a reopen',
    withBlobs(async (blobs, swap) => {
      const bytes = patternBytes(700_000, 3);
      await blobs.put('fsf_kept', Readable.from([bytes]));
      await blobs.put('fsf_gone', Readable.from([bytes]));
      await blobs.delete('fsf_gone');
      const reopened = await swap();
      assert.ok((await buffer((await reopened.get('fsf_kept'))!)).equals(bytes));
      assert.is(await reopened.get('fsf_gone'), null);
    }),
  );

  test.run();
}

function* chunks(bytes: Buffer, size: number) {
  for (let offset = 0; offset < bytes.length; offset += size) yield bytes.subarray(offset, offset + size);
}
