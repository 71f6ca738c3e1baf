import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Logger } from '../../src/index.js';
import { json, startPortal } from '../helpers/server.js';
import {
  BLOB_KINDS,
  BOUNDARY,
  MULTIPART,
  documentBytes,
  multipart,
  observedBlobs,
  postHead,
  rawClient,
  sha256,
  trackedAdapters,
  validParts,
  type RawPart,
} from '../helpers/agreements.js';

const textParts = () => validParts().filter((part) => part.name !== 'documents');

/** A valid form whose last document has `bytes`, split where that document's bytes begin. */
function splitForm(bytes: Buffer, earlier: RawPart[] = []) {
  const head = multipart(
    [...textParts(), ...earlier, { name: 'documents', filename: 'big.bin', bytes: Buffer.alloc(0) }],
    { close: false },
  );
  // `head` ends with the empty document and its CRLF; cut those two bytes so the document follows.
  const before = head.subarray(0, head.length - 2);
  const after = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
  return { before, after, length: before.length + bytes.length + after.length };
}

async function stable(read: () => number): Promise<number> {
  // Waits until the value stops changing over a few polls: what arrives while the store holds.
  let last = -1;
  let same = 0;
  while (same < 5) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const now = read();
    same = now === last ? same + 1 : 0;
    last = now;
  }
  return last;
}

for (const kind of BLOB_KINDS) {
  test(`${kind.name}: documents are streamed: the blob store has bytes before the client has sent the rest`, async () => {
    const observed = observedBlobs(kind);
    const app = await startPortal({ blobs: observed.blobs });
    try {
      const bytes = documentBytes(3 * 1024 * 1024);
      const form = splitForm(bytes);
      const client = rawClient(app.url);
      await client.send(postHead({ 'Content-Type': MULTIPART, 'Content-Length': form.length }));
      await client.send(Buffer.concat([form.before, bytes.subarray(0, 1024 * 1024)]));
      await observed.until(() => observed.firstChunkSeen);
      await client.send(Buffer.concat([bytes.subarray(1024 * 1024), form.after]));
      const res = await client.response;
      assert.is(res.status, 201, res.body);
      assert.is(JSON.parse(res.body).documents[0].fileHash, sha256(bytes));
      client.socket.destroy();
    } finally {
      await app.close();
      observed.dispose();
    }
  });

  test(`${kind.name}: backpressure: while the blob store does not read, the server stops reading the socket`, async () => {
    const observed = observedBlobs(kind);
    const release = observed.hold();
    const app = await startPortal({ blobs: observed.blobs });
    let serverSocket: Socket | undefined;
    app.server.on('connection', (socket) => (serverSocket = socket));
    try {
      const bytes = documentBytes(4 * 1024 * 1024, 9);
      const form = splitForm(bytes);
      const client = rawClient(app.url);
      void client.send(
        Buffer.concat([
          Buffer.from(postHead({ 'Content-Type': MULTIPART, 'Content-Length': form.length })),
          form.before,
          bytes,
          form.after,
        ]),
      );
      await observed.until(() => observed.started.length === 1);
      const readWhileHeld = await stable(() => serverSocket!.bytesRead);
      assert.ok(readWhileHeld < 1024 * 1024, `read ${readWhileHeld} bytes of ${form.length} while the store held`);
      release();
      const res = await client.response;
      assert.is(res.status, 201, res.body);
      assert.is(JSON.parse(res.body).documents[0].fileHash, sha256(bytes));
      client.socket.destroy();
    } finally {
      await app.close();
      observed.dispose();
    }
  });

  test(`${kind.name}: a failure while the store has not begun to read its body: a 400 once it has, and no crash`, async () => {
    const observed = observedBlobs(kind);
    const release = observed.hold();
    const tracked = trackedAdapters({ blobs: observed.blobs });
    const app = await startPortal({ storage: tracked.storage, blobs: tracked.blobs });
    try {
      // The document is small enough to pass through whole, so the bad part after it is parsed
      // while the store's `put` still waits: the body it was given is destroyed before it reads.
      const body = multipart([...validParts(), { name: 'comment', value: 'not a part' }]);
      const answer = app.api('/agreements', { method: 'POST', headers: { 'content-type': MULTIPART }, body });
      await observed.until(() => observed.started.length === 1);
      await new Promise((resolve) => setImmediate(resolve));
      release();
      const res = await answer;
      assert.is(res.status, 400);
      assert.match((await json(res)).message, /^Unknown part "comment"/);
      assert.equal(await tracked.blobKeys(), []);
      assert.is(tracked.inserted.length, 0);
    } finally {
      await app.close();
      observed.dispose();
    }
  });

  test(`${kind.name}: a client that aborts half-way leaves no record and no blob, also of documents it had finished`, async () => {
    for (const finishedDocuments of [0, 2]) {
      const observed = observedBlobs(kind);
      const tracked = trackedAdapters({ blobs: observed.blobs });
      const app = await startPortal({ storage: tracked.storage, blobs: tracked.blobs });
      try {
        const bytes = documentBytes(2 * 1024 * 1024);
        const complete = Array.from({ length: finishedDocuments }, (_, i) => ({
          name: 'documents',
          filename: `done${i}.pdf`,
          bytes: documentBytes(300_000, i),
        }));
        const form = splitForm(bytes, complete);
        const client = rawClient(app.url);
        await client.send(postHead({ 'Content-Type': MULTIPART, 'Content-Length': form.length }));
        await client.send(Buffer.concat([form.before, bytes.subarray(0, 1024 * 1024)]));
        await observed.until(() => observed.started.length === finishedDocuments + 1 && observed.firstChunkSeen);
        client.socket.destroy();
        await observed.until(() => observed.started.every((key) => observed.deleted.includes(key)));
        assert.equal(await tracked.blobKeys(), []);
        assert.is(tracked.inserted.length, 0);
        assert.is(observed.started.length, finishedDocuments + 1);
      } finally {
        await app.close();
        observed.dispose();
      }
    }
  });

  test(`${kind.name}: a 413 while the client is still sending: answered with Connection: close, read by the client, then closed`, async () => {
    const tracked = trackedAdapters({ kind });
    const app = await startPortal({ storage: tracked.storage, blobs: tracked.blobs });
    try {
      const bytes = documentBytes(6 * 1024 * 1024);
      const form = splitForm(bytes);
      const client = rawClient(app.url);
      const sent = client.send(
        Buffer.concat([
          Buffer.from(postHead({ 'Content-Type': MULTIPART, 'Content-Length': form.length })),
          form.before,
          bytes,
          form.after,
        ]),
      );
      const res = await client.response;
      assert.is(res.status, 413);
      assert.match(res.head, /\r\nconnection: close/i);
      assert.is(JSON.parse(res.body).message, 'The documents are over the limit of 5 MiB (5242880 bytes) in total.');
      await sent;
      await client.closed;
      assert.equal(await tracked.blobKeys(), []);
      assert.is(tracked.inserted.length, 0);
    } finally {
      await app.close();
      tracked.dispose();
    }
  });

  test(`${kind.name}: a Content-Length far over the limit is refused before a byte of the body is read`, async () => {
    const observed = observedBlobs(kind);
    const app = await startPortal({ blobs: observed.blobs });
    try {
      const client = rawClient(app.url);
      await client.send(postHead({ 'Content-Type': MULTIPART, 'Content-Length': 50_000_000 }));
      const res = await client.response;
      assert.is(res.status, 413);
      assert.match(res.head, /\r\nconnection: close/i);
      assert.is(
        JSON.parse(res.body).message,
        'The request body of 50000000 bytes is over the 6815744 bytes a valid form can take: documents may total at most 5 MiB (5242880 bytes).',
      );
      assert.is(observed.started.length, 0);
      client.socket.destroy();
    } finally {
      await app.close();
      observed.dispose();
    }
  });

  test(`${kind.name}: a chunked body that grows past what any valid form can be is a 413 even before a document`, async () => {
    const observed = observedBlobs(kind);
    const app = await startPortal({ blobs: observed.blobs });
    try {
      // A preamble of 8 MiB: no part has begun, yet the body is already larger than a valid form.
      const preamble = Readable.from(
        (function* () {
          for (let i = 0; i < 128; i++) yield Buffer.alloc(64 * 1024, 0x2e);
          yield multipart(validParts());
        })(),
      );
      const res = await app.api('/agreements', {
        method: 'POST',
        headers: { 'content-type': MULTIPART },
        body: Readable.toWeb(preamble) as ReadableStream,
        duplex: 'half',
      } as RequestInit);
      assert.is(res.status, 413);
      assert.match((await json(res)).message, /^The request body is over the 6815744 bytes a valid form can take/);
      assert.is(observed.started.length, 0);
    } finally {
      await app.close();
      observed.dispose();
    }
  });

  test(`${kind.name}: a blob store that fails mid-upload: 500, logged, documents already written are removed, no record`, async () => {
    const errors: object[] = [];
    const logger: Logger = { debug() {}, info() {}, warn() {}, error: (object) => errors.push(object) };
    let puts = 0;
    const tracked = trackedAdapters({ kind });
    const inner = tracked.blobs.put;
    tracked.blobs.put = async (key, body) => {
      if (++puts < 2) return inner(key, body);
      for await (const _chunk of body as AsyncIterable<Uint8Array>) throw new Error('disk full');
      throw new Error('disk full');
    };
    const app = await startPortal({ storage: tracked.storage, blobs: tracked.blobs, logger });
    try {
      const parts = [...validParts(), { name: 'documents', filename: 'second.pdf', bytes: documentBytes(500_000) }];
      const client = rawClient(app.url);
      const body = multipart(parts);
      await client.send(
        Buffer.concat([
          Buffer.from(
            postHead({ 'Content-Type': MULTIPART, 'Content-Length': body.length, 'X-Request-Id': 'upload-1' }),
          ),
          body,
        ]),
      );
      const res = await client.response;
      assert.is(res.status, 500);
      assert.equal(JSON.parse(res.body), { message: 'Internal error' });
      assert.is(puts, 2);
      assert.equal(await tracked.blobKeys(), []);
      assert.is(tracked.inserted.length, 0);
      assert.ok(errors.some((entry: any) => entry.requestId === 'upload-1' && entry.err?.message === 'disk full'));
      client.socket.destroy();
    } finally {
      await app.close();
      tracked.dispose();
    }
  });

  test(`${kind.name}: storage that cannot insert the agreement: 500 and the stored documents are removed`, async () => {
    const tracked = trackedAdapters({
      kind,
      storage: {
        async insertAgreement() {
          throw new Error('database down');
        },
      },
    });
    const app = await startPortal({ storage: tracked.storage, blobs: tracked.blobs });
    try {
      const body = multipart(validParts());
      const res = await app.api('/agreements', { method: 'POST', headers: { 'content-type': MULTIPART }, body });
      assert.is(res.status, 500);
      assert.equal(await tracked.blobKeys(), []);
    } finally {
      await app.close();
      tracked.dispose();
    }
  });
}

test.run();
