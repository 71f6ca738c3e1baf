import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { promisify } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryStorage } from '../../adapters/memory/index.js';
import { newId } from '../../src/shared/ids.js';
import { asciiFallback } from '../../src/http/content-disposition.js';
import type { Attachment, BlobStore, Logger, PortalOptions } from '../../src/index.js';
import { patternBytes } from '../conformance/fixtures.js';
import { SIGNING_KEY_1, getLink } from '../helpers/download.js';
import { type TestPortal, json, withPortal } from '../helpers/server.js';

const SIZE = 10_000;
const BYTES = patternBytes(SIZE, 5);

async function withDownload(
  input: { name?: string; mime?: string; body?: Buffer },
  body: (context: { app: TestPortal; attachment: Attachment; link: string }) => Promise<void>,
  options: PortalOptions = {},
): Promise<void> {
  await withPortal({ signingKeys: [SIGNING_KEY_1], ...options }, async (app) => {
    const attachment = await app.portal.tickets.putAttachment('acct_a', {
      name: input.name ?? 'data.bin',
      mime: input.mime ?? 'application/octet-stream',
      body: input.body ?? BYTES,
    });
    const { link } = await getLink(app, attachment);
    await body({ app, attachment, link });
  });
}

const bytesOf = async (res: Response) => Buffer.from(await res.arrayBuffer());

test('GET on the link streams the exact bytes with the download headers', async () => {
  const big = patternBytes(3 * 1024 * 1024 + 7, 9);
  await withDownload(
    { name: 'Quarterly report.pdf', mime: 'application/pdf', body: big },
    async ({ attachment, link }) => {
      const res = await fetch(link);
      assert.is(res.status, 200);
      assert.ok((await bytesOf(res)).equals(big), 'byte-exact');
      assert.is(res.headers.get('content-type'), 'application/pdf');
      assert.is(res.headers.get('content-length'), String(big.length));
      assert.is(
        res.headers.get('content-disposition'),
        `attachment; filename="Quarterly report.pdf"; filename*=UTF-8''Quarterly%20report.pdf`,
      );
      assert.is(res.headers.get('accept-ranges'), 'bytes');
      assert.is(res.headers.get('x-content-type-options'), 'nosniff');
      assert.is(res.headers.get('cache-control'), 'private, no-store');
      assert.is(res.headers.get('etag'), `"${attachment.id}"`);
      assert.is(res.headers.get('content-range'), null);
    },
  );
});

test('one Range is answered 206 with exactly those bytes and a Content-Range', async () => {
  await withDownload({}, async ({ link }) => {
    const cases: [string, number, number][] = [
      ['bytes=0-99', 0, 99],
      ['bytes=100-', 100, SIZE - 1],
      ['bytes=-500', SIZE - 500, SIZE - 1],
      ['bytes=9999-9999', 9999, 9999],
      ['bytes=9990-20000', 9990, SIZE - 1],
      ['bytes=-20000', 0, SIZE - 1],
      ['bytes=0-', 0, SIZE - 1],
      ['Bytes=5-9', 5, 9],
    ];
    for (const [range, start, end] of cases) {
      const res = await fetch(link, { headers: { range } });
      assert.is(res.status, 206, range);
      assert.is(res.headers.get('content-range'), `bytes ${start}-${end}/${SIZE}`, range);
      assert.is(res.headers.get('content-length'), String(end - start + 1), range);
      assert.is(res.headers.get('content-type'), 'application/octet-stream', range);
      assert.ok((await bytesOf(res)).equals(BYTES.subarray(start, end + 1)), range);
    }
  });
});

test('a range past the end, or an empty suffix, is a 416 with Content-Range: bytes */size', async () => {
  await withDownload({}, async ({ link }) => {
    for (const range of [`bytes=${SIZE}-`, `bytes=${SIZE}-${SIZE + 10}`, 'bytes=-0', 'bytes=99999999999999999999-']) {
      const res = await fetch(link, { headers: { range } });
      assert.is(res.status, 416, range);
      assert.is(res.headers.get('content-range'), `bytes */${SIZE}`, range);
      assert.is(res.headers.get('content-type'), 'application/json; charset=utf-8', range);
      assert.match((await json(res)).message, /range/, range);
    }
  });
});

test('several ranges, another unit or a malformed Range get the whole attachment, 200', async () => {
  await withDownload({}, async ({ link }) => {
    for (const range of [
      'bytes=0-1,5-6',
      'bytes=0-1, 500-',
      'items=0-9',
      'bytes=abc',
      'bytes=5-2',
      'bytes=-',
      'bytes=1-2-3',
      '',
    ]) {
      const res = await fetch(link, { headers: { range } });
      assert.is(res.status, 200, range);
      assert.is(res.headers.get('content-range'), null, range);
      assert.ok((await bytesOf(res)).equals(BYTES), range);
    }
  });
});

test('If-Range: the range is honoured only when it names this ETag', async () => {
  await withDownload({}, async ({ link, attachment }) => {
    const matching = await fetch(link, { headers: { range: 'bytes=0-9', 'if-range': `"${attachment.id}"` } });
    assert.is(matching.status, 206);
    assert.is((await bytesOf(matching)).length, 10);
    for (const ifRange of ['"tca_other"', new Date().toUTCString()]) {
      const other = await fetch(link, { headers: { range: 'bytes=0-9', 'if-range': ifRange } });
      assert.is(other.status, 200, ifRange);
      assert.is((await bytesOf(other)).length, SIZE, ifRange);
    }
  });
});

test('HEAD answers the headers GET would, and no body', async () => {
  await withDownload({ name: 'notes.txt', mime: 'text/plain' }, async ({ link }) => {
    const get = await fetch(link);
    await get.arrayBuffer();
    const head = await fetch(link, { method: 'HEAD' });
    assert.is(head.status, 200);
    for (const name of [
      'content-type',
      'content-length',
      'content-disposition',
      'accept-ranges',
      'etag',
      'cache-control',
      'x-content-type-options',
    ]) {
      assert.is(head.headers.get(name), get.headers.get(name), name);
    }
    assert.is((await head.arrayBuffer()).byteLength, 0);
    const ranged = await fetch(link, { method: 'HEAD', headers: { range: 'bytes=-500' } });
    assert.is(ranged.status, 206);
    assert.is(ranged.headers.get('content-range'), `bytes ${SIZE - 500}-${SIZE - 1}/${SIZE}`);
    assert.is(ranged.headers.get('content-length'), '500');
    const unsatisfiable = await fetch(link, { method: 'HEAD', headers: { range: `bytes=${SIZE}-` } });
    assert.is(unsatisfiable.status, 416);
  });
});

test('an empty attachment downloads as zero bytes; any range of it is unsatisfiable', async () => {
  await withDownload({ body: Buffer.alloc(0) }, async ({ link }) => {
    const res = await fetch(link);
    assert.is(res.status, 200);
    assert.is(res.headers.get('content-length'), '0');
    assert.is((await bytesOf(res)).length, 0);
    const ranged = await fetch(link, { headers: { range: 'bytes=-500' } });
    assert.is(ranged.status, 416);
    assert.is(ranged.headers.get('content-range'), 'bytes */0');
  });
});

test('a unicode name: exact in filename*, an ASCII stand-in in filename', async () => {
  const name = 'Résumé 日本語 "final" 100% (v2)\'s.pdf';
  await withDownload({ name }, async ({ link }) => {
    const header = (await fetch(link, { method: 'HEAD' })).headers.get('content-disposition')!;
    const fallback = /filename="([^"]*)"/.exec(header)?.[1];
    const extended = /filename\*=UTF-8''([A-Za-z0-9!#$&+\-.^_`|~%]+)$/.exec(header)?.[1];
    assert.is(fallback, "Resume ___ _final_ 100_ (v2)'s.pdf");
    assert.ok(extended !== undefined, header);
    assert.is(decodeURIComponent(extended!), name);
    assert.ok(/^[\x20-\x7e]*$/.test(header), 'the header itself is ASCII');
  });
});

test('the ASCII stand-in: one _ per character it cannot show, never empty', () => {
  assert.is(asciiFallback('😀.png'), '_.png');
  assert.is(asciiFallback('Ñandú\\x.txt'), 'Nandu_x.txt');
  assert.is(asciiFallback('\u0301'), 'download');
});

/** A blob store whose `get` hands out `source` for every key: the test decides when bytes flow. */
function gatedBlobs(source: () => Readable): BlobStore {
  const inner = memoryBlobs();
  return { ...inner, get: async (key) => ((await inner.stat(key)) === null ? null : source()) };
}

test('bytes reach the client as the blob store yields them, before the blob has been read to the end', async () => {
  const source = new Readable({ read() {} });
  await withDownload(
    { body: Buffer.alloc(2 * 65_536, 1) },
    async ({ link }) => {
      source.push(Buffer.alloc(65_536, 1));
      const res = await fetch(link);
      assert.is(res.status, 200);
      const reader = res.body!.getReader();
      let received = 0;
      while (received < 65_536) {
        const { value, done } = await reader.read();
        assert.not.ok(done, 'the body is still open');
        received += value!.length;
      }
      assert.is(received, 65_536, 'the first half arrived while the second is not yet read from the store');
      assert.not.ok(source.readableEnded);
      source.push(Buffer.alloc(65_536, 1));
      source.push(null);
      while (!(await reader.read()).done);
    },
    { blobs: gatedBlobs(() => source) },
  );
});

test('a client that goes away mid-download stops the read from the blob store, and is no error', async () => {
  const errors: string[] = [];
  const logger: Logger = { debug() {}, info() {}, warn() {}, error: (_object, message) => errors.push(message ?? '') };
  const source = new Readable({ read() {} });
  const closed = new Promise<void>((resolve) => source.once('close', resolve));
  await withDownload(
    { body: Buffer.alloc(10 * 65_536) },
    async ({ app, link }) => {
      source.push(Buffer.alloc(65_536));
      const abort = new AbortController();
      const res = await fetch(link, { signal: abort.signal });
      await res.body!.getReader().read();
      abort.abort();
      await closed;
      assert.ok(source.destroyed, 'the blob stream was destroyed');
      assert.is((await app.api('/files')).status, 200, 'the server serves on');
      assert.equal(errors, []);
    },
    { blobs: gatedBlobs(() => source), logger },
  );
});

test('a blob stream that fails after the headers went out cuts the connection and is logged', async () => {
  const errors: string[] = [];
  const logger: Logger = { debug() {}, info() {}, warn() {}, error: (_object, message) => errors.push(message ?? '') };
  const source = new Readable({ read() {} });
  await withDownload(
    { body: Buffer.alloc(4 * 65_536) },
    async ({ link }) => {
      source.push(Buffer.alloc(65_536));
      const res = await fetch(link);
      assert.is(res.status, 200);
      source.destroy(new Error('disk gone'));
      let failed = false;
      await res.arrayBuffer().catch(() => (failed = true));
      assert.ok(failed, 'the client sees a truncated body, not a complete one');
      assert.equal(errors, ['response failed after headers were sent']);
    },
    { blobs: gatedBlobs(() => source), logger },
  );
});

/**
 * A blob store that reads into the caller's buffers (`BlobStore.reader`), over memory blobs: it
 * records each buffer read into, waits for `gate` before every read past the first `free` reads, and
 * may fail a read or end early; `closed` resolves when the reader is closed.
 */
function readerBlobs(options: { free?: number; gate?: () => Promise<void>; failAt?: number; endAt?: number } = {}) {
  const inner = memoryBlobs();
  const buffers = new Set<ArrayBufferLike>();
  let reads = 0;
  let closeReader!: () => void;
  const closed = new Promise<void>((resolve) => (closeReader = resolve));
  const blobs: BlobStore = {
    ...inner,
    async reader(key, range) {
      const stream = await inner.get(key, range);
      if (stream === null) return null;
      const bytes = await buffer(stream);
      let position = 0;
      return {
        async read(into) {
          buffers.add(into.buffer);
          reads++;
          if (reads > (options.free ?? Number.POSITIVE_INFINITY)) await options.gate?.();
          if (reads === options.failAt) throw new Error('disk gone');
          const end = Math.min(bytes.length, options.endAt ?? bytes.length, position + into.byteLength);
          into.set(bytes.subarray(position, end));
          const count = end - position;
          position = end;
          return count;
        },
        async close() {
          closeReader();
        },
      };
    },
  };
  return { blobs, buffers, closed, reads: () => reads };
}

test('from a store that reads into buffers: a slow client gets every byte, through two buffers for the whole download', async () => {
  const big = patternBytes(3 * 1024 * 1024 + 7, 11);
  const store = readerBlobs();
  await withDownload(
    { body: big },
    async ({ link }) => {
      // The client reads nothing for a while, then everything. (Loopback sockets take in megabytes:
      // that a buffer is read into only once the socket let go of it is checked in blob-pump.test.)
      const received = await new Promise<Buffer>((resolve, reject) => {
        http
          .get(link, (res) => {
            res.pause();
            setTimeout(() => {
              const parts: Buffer[] = [];
              res.on('data', (chunk: Buffer) => parts.push(chunk));
              res.on('end', () => resolve(Buffer.concat(parts)));
              res.resume();
            }, 200);
          })
          .on('error', reject);
      });
      assert.is(received.length, big.length);
      assert.ok(received.equals(big), 'byte-exact');
      await store.closed;
      assert.ok(store.reads() >= big.length / 65_536, `${store.reads()} reads of at most 64 KiB`);
      assert.ok(store.buffers.size <= 2, `read into ${store.buffers.size} buffers`);
      const ranged = await fetch(link, { headers: { range: 'bytes=65530-200000' } });
      assert.is(ranged.status, 206);
      assert.ok((await bytesOf(ranged)).equals(big.subarray(65_530, 200_001)), 'a range, byte-exact');
    },
    { blobs: store.blobs },
  );
});

test('from a store that reads into buffers: a client that goes away closes the reader, and is no error', async () => {
  const errors: string[] = [];
  const logger: Logger = { debug() {}, info() {}, warn() {}, error: (_object, message) => errors.push(message ?? '') };
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const store = readerBlobs({ free: 2, gate: () => opened });
  await withDownload(
    { body: Buffer.alloc(20 * 65_536) },
    async ({ app, link }) => {
      // A connection of its own, so that the server's side of it can be seen closed before the store reads on.
      const accepted = once(app.server, 'connection') as Promise<[net.Socket]>;
      const request = http.get(link, { agent: false });
      const [serverSide] = await accepted;
      const [res] = (await once(request, 'response')) as [http.IncomingMessage];
      await once(res, 'data');
      // Not `once`: the server's side may see the reset as an 'error' before its 'close'.
      const seen = new Promise((resolve) => serverSide.once('close', resolve));
      // The client's own side of leaving (ECONNRESET, aborted) is not what is under test.
      request.on('error', () => {});
      res.on('error', () => {});
      request.destroy();
      await seen;
      open();
      await within(store.closed, 2000, 'the reader was never closed');
      assert.ok(store.reads() <= 3, `read on after the client left: ${store.reads()} reads, the third waited for it`);
      assert.is((await app.api('/files')).status, 200, 'the server serves on');
      assert.equal(errors, []);
    },
    { blobs: store.blobs, logger },
  );
});

/** `promise`, or a rejection with `message` once `ms` have passed without it. */
async function within<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

test('a client gone while the blob is being opened: the stream, or the reader, is released all the same', async () => {
  let opened!: () => void;
  let opening!: Promise<void>;
  let asked!: () => void;
  let asking!: Promise<void>;
  const stream = new Readable({ read() {} });
  const streamClosed = once(stream, 'close');
  const store = readerBlobs();
  const inner = store.blobs;
  const gated: BlobStore = {
    ...inner,
    get: async (key, range) => (asked(), await opening, (await inner.get(key, range)) === null ? null : stream),
    reader: async (key, range) => (asked(), await opening, inner.reader!(key, range)),
  };
  for (const blobs of [{ ...gated, reader: undefined }, gated]) {
    opening = new Promise<void>((resolve) => (opened = resolve));
    asking = new Promise<void>((resolve) => (asked = resolve));
    await withDownload(
      { body: Buffer.alloc(4 * 65_536) },
      async ({ app, link }) => {
        // A raw socket, closed once the route waits on the store, and seen closed by the server before the store answers.
        const url = new URL(link);
        const accepted = once(app.server, 'connection') as Promise<[net.Socket]>;
        const socket = net.connect(Number(url.port), url.hostname);
        const [serverSide] = await accepted;
        socket.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
        await asking;
        const seen = once(serverSide, 'close');
        socket.destroy();
        await seen;
        opened();
        assert.is((await app.api('/files')).status, 200, 'the server serves on');
      },
      { blobs },
    );
  }
  await within(streamClosed, 2000, 'the stream opened for a client gone was never destroyed');
  await within(store.closed, 2000, 'the reader opened for a client gone was never closed');
  assert.is(store.reads(), 0, 'nothing read for a client gone');
});

for (const [name, failure] of [
  ['fails', { failAt: 3 }],
  ['ends before its length', { endAt: 3 * 65_536 + 10 }],
] as const) {
  test(`from a store that reads into buffers: a blob that ${name} after the headers went out cuts the connection and is logged`, async () => {
    const errors: string[] = [];
    const logger: Logger = {
      debug() {},
      info() {},
      warn() {},
      error: (_object, message) => errors.push(message ?? ''),
    };
    const store = readerBlobs(failure);
    await withDownload(
      { body: Buffer.alloc(8 * 65_536) },
      async ({ link }) => {
        const res = await fetch(link);
        assert.is(res.status, 200);
        let failed = false;
        await res.arrayBuffer().catch(() => (failed = true));
        assert.ok(failed, 'the client sees a truncated body, not a complete one');
        await store.closed;
        assert.equal(errors, ['response failed after headers were sent']);
      },
      { blobs: store.blobs, logger },
    );
  });
}

const curlAvailable = spawnSync('curl', ['--version']).status === 0;
const curlTest = curlAvailable ? test : test.skip;
if (!curlAvailable)
  console.log('skip: curl is not installed, so "curl -O -J gets the file with its name" is not checked');

curlTest('curl -O -J, given only the link, saves the file under its name', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'portal-curl-'));
  try {
    for (const [name, saved] of [
      ['Quarterly report.pdf', 'Quarterly report.pdf'],
      ['Résumé.pdf', 'Resume.pdf'],
    ] as const) {
      await withDownload({ name, mime: 'application/pdf' }, async ({ link }) => {
        await promisify(execFile)('curl', ['--silent', '--show-error', '--fail', '-O', '-J', link], { cwd: dir });
      });
      assert.ok((await readdir(dir)).includes(saved), `${name} saved as ${saved}: ${await readdir(dir)}`);
      assert.ok((await readFile(join(dir, saved))).equals(BYTES), name);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('an attachment stored before media types were checked downloads as application/octet-stream, not 500', async () => {
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  await withPortal({ signingKeys: [SIGNING_KEY_1], storage, blobs }, async (app) => {
    const id = newId('tca');
    await blobs.put(id, Readable.from([Buffer.from('old bytes')]));
    await storage.insertAttachment({
      id,
      accountId: 'acct_a',
      ticketId: 'tck_old',
      messageId: 'tcm_old',
      name: 'old.txt',
      mime: 'text/plain\u2028; a="b\r\nc"',
      size: 9,
      createdAt: '2026-01-01T00:00:00+00:00',
    });
    const attachment = (await app.portal.tickets.getAttachment('acct_a', id))!;
    const { link } = await getLink(app, attachment);
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(link, { method });
      assert.is(res.status, 200, method);
      assert.is(res.headers.get('content-type'), 'application/octet-stream', method);
      if (method === 'GET') assert.is(await res.text(), 'old bytes');
    }
  });
});

test.run();
