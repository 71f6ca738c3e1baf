import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { pumpBlob } from '../../src/http/blob-pump.js';
import type { BlobReader } from '../../src/ports.js';
import { patternBytes } from '../conformance/fixtures.js';

/** A write the fake response holds: the bytes as written, the buffer written, and its callback, called when the test says. */
interface Held {
  copy: Buffer;
  chunk: Buffer;
  done: (error?: Error | null) => void;
}

/** A response whose writes the test lets go of one at a time, as a socket that drains slowly would. */
function slowResponse() {
  const res = new EventEmitter() as EventEmitter & {
    held: Held[];
    ended: Buffer | null;
    destroyed: Error | null | undefined;
  };
  res.held = [];
  res.ended = null;
  res.destroyed = undefined;
  Object.assign(res, {
    write(chunk: Buffer, done: Held['done']) {
      res.held.push({ copy: Buffer.from(chunk), chunk, done });
      return false;
    },
    end(chunk?: Buffer) {
      res.ended = Buffer.from(chunk ?? []);
      setImmediate(() => res.emit('close'));
    },
    destroy(error?: Error) {
      res.destroyed = error ?? null;
      setImmediate(() => res.emit('close'));
    },
  });
  return res;
}

/** A reader over `bytes` that records the buffer of every read, and whether it is closed. */
function recordingReader(bytes: Buffer) {
  let position = 0;
  const reads: Uint8Array[] = [];
  const state = { closed: false, readsAfterClose: 0 };
  const reader: BlobReader = {
    async read(into) {
      if (state.closed) state.readsAfterClose++;
      reads.push(into);
      const end = Math.min(bytes.length, position + into.byteLength);
      into.set(bytes.subarray(position, end));
      const count = end - position;
      position = end;
      return count;
    },
    async close() {
      state.closed = true;
    },
  };
  return { reader, reads, state };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

test('a buffer is read into again only once the write of it was called back, and the bytes go out in order', async () => {
  const bytes = patternBytes(10 * 65_536 + 123, 3);
  const res = slowResponse();
  const { reader, reads, state } = recordingReader(bytes);
  const pumped = pumpBlob(reader, res as unknown as ServerResponse, bytes.length);
  const written: Buffer[] = [];
  for (let turn = 0; turn < 100 && res.ended === null; turn++) {
    await settle();
    // Two buffers: with both written and neither called back, nothing more is read.
    assert.ok(res.held.length <= 2, `${res.held.length} writes held at once`);
    const pending = new Set(res.held.map((held) => held.chunk.buffer));
    const last = reads.at(-1);
    if (res.held.length === 2 && last !== undefined)
      assert.ok(pending.has(last.buffer), 'the last read is one of the held writes');
    const oldest = res.held.shift();
    if (oldest === undefined) continue;
    assert.ok(oldest.chunk.equals(oldest.copy), 'the bytes of a write stay as written until its callback');
    written.push(oldest.copy);
    oldest.done();
  }
  written.push(...res.held.map((held) => held.copy), res.ended ?? Buffer.alloc(0));
  await pumped;
  assert.ok(Buffer.concat(written).equals(bytes), 'every byte, in order');
  assert.is(new Set(reads.map((into) => into.buffer)).size, 2, 'two buffers for the whole blob');
  assert.ok(state.closed, 'the reader is closed');
  assert.is(state.readsAfterClose, 0);
});

test('a blob smaller than a chunk is read through one buffer its size; an empty one ends at once', async () => {
  const small = patternBytes(1000, 5);
  const res = slowResponse();
  const { reader, reads, state } = recordingReader(small);
  await pumpBlob(reader, res as unknown as ServerResponse, small.length);
  assert.ok(res.ended?.equals(small));
  assert.equal(
    reads.map((into) => into.byteLength),
    [1000],
  );
  assert.ok(state.closed);

  const empty = slowResponse();
  const none = recordingReader(Buffer.alloc(0));
  await pumpBlob(none.reader, empty as unknown as ServerResponse, 0);
  assert.is(empty.ended?.length, 0);
  assert.is(none.reads.length, 0, 'nothing read');
  assert.ok(none.state.closed);
});

test('a response closed mid-way: the read in progress finishes, then the reader is closed and nothing more is read', async () => {
  const bytes = patternBytes(10 * 65_536, 7);
  const res = slowResponse();
  const { reader, reads, state } = recordingReader(bytes);
  const pumped = pumpBlob(reader, res as unknown as ServerResponse, bytes.length);
  await settle();
  res.held.shift()!.done();
  res.emit('close');
  await pumped;
  await settle();
  assert.ok(state.closed);
  assert.is(state.readsAfterClose, 0);
  assert.ok(reads.length <= 3, `${reads.length} reads`);
  assert.is(res.destroyed, undefined, 'a client gone is not a failure');
});

test('a blob shorter than its length destroys the response and rejects', async () => {
  const res = slowResponse();
  const { reader, state } = recordingReader(patternBytes(100));
  let error: unknown;
  await pumpBlob(reader, res as unknown as ServerResponse, 70_000).catch((caught) => (error = caught));
  assert.instance(error, Error);
  assert.match((error as Error).message, 'ended 69900 bytes before its length');
  assert.instance(res.destroyed, Error);
  assert.ok(state.closed);
});

test.run();
