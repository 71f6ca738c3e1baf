import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryStorage } from '../../adapters/memory/index.js';
import { type BlobStore, createPortal, type Portal, type PortalOptions } from '../../src/index.js';
import { isId } from '../../src/shared/ids.js';
import { patternBytes } from '../conformance/fixtures.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { rejects } from '../helpers/server.js';

const NOW = new Date('2026-03-01T10:00:00.250Z');

async function blobKeys(blobs: BlobStore): Promise<string[]> {
  const keys: string[] = [];
  for await (const info of blobs.listBefore('2100-01-01T00:00:00+00:00')) keys.push(info.key);
  return keys;
}

async function withPortal(options: PortalOptions, body: (portal: Portal) => Promise<void>): Promise<void> {
  const portal = await createPortal({
    auth: { apiKeys: ['attachments-key-0123'] },
    signingKeys: [SIGNING_KEY_1],
    clock: () => NOW,
    ...options,
  });
  try {
    await body(portal);
  } finally {
    await portal.close();
  }
}

test('putAttachment streams the body into the blob store under the tca_ id and records it', async () => {
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  await withPortal({ storage, blobs }, async (portal) => {
    const bytes = patternBytes(1_500_001);
    const body = Readable.from(
      (function* () {
        for (let offset = 0; offset < bytes.length; offset += 65_536) yield bytes.subarray(offset, offset + 65_536);
      })(),
    );
    const attachment = await portal.tickets.putAttachment('acct_a', {
      ticketId: 'tck_host1',
      messageId: 'tcm_host1',
      name: 'scan.pdf',
      mime: 'application/pdf',
      body,
    });
    assert.ok(isId('tca', attachment.id), attachment.id);
    assert.equal(attachment, {
      id: attachment.id,
      ticketId: 'tck_host1',
      messageId: 'tcm_host1',
      name: 'scan.pdf',
      mime: 'application/pdf',
      size: bytes.length,
      createdAt: '2026-03-01T10:00:00+00:00',
    });
    assert.ok((await buffer((await blobs.get(attachment.id))!)).equals(bytes), 'bytes stored exactly');
    assert.equal(await storage.getAttachment('acct_a', attachment.id), { ...attachment, accountId: 'acct_a' });
  });
});

test('putAttachment makes ticket and message ids the host leaves out; a given ticket id is kept', async () => {
  await withPortal({}, async (portal) => {
    const both = await portal.tickets.putAttachment('acct_a', { name: 'a.txt', mime: 'text/plain', body: 'a' });
    assert.ok(isId('tck', both.ticketId), both.ticketId);
    assert.ok(isId('tcm', both.messageId), both.messageId);
    const inTicket = await portal.tickets.putAttachment('acct_a', {
      ticketId: both.ticketId,
      name: 'b.txt',
      mime: 'text/plain',
      body: 'b',
    });
    assert.is(inTicket.ticketId, both.ticketId);
    assert.ok(isId('tcm', inTicket.messageId));
    assert.is.not(inTicket.messageId, both.messageId);
  });
});

test('putAttachment accepts a Buffer, a string, a Uint8Array and an async iterable', async () => {
  const blobs = memoryBlobs();
  await withPortal({ blobs }, async (portal) => {
    async function* iterable() {
      yield new TextEncoder().encode('it');
      yield Buffer.from('erable');
    }
    const bodies = [Buffer.from('buffer'), 'string', new Uint8Array([1, 2, 3]), iterable()];
    const expected = [Buffer.from('buffer'), Buffer.from('string'), Buffer.from([1, 2, 3]), Buffer.from('iterable')];
    for (const [i, body] of bodies.entries()) {
      const attachment = await portal.tickets.putAttachment('acct_a', {
        name: `b${i}`,
        mime: 'application/octet-stream',
        body,
      });
      assert.is(attachment.size, expected[i]!.length);
      assert.ok((await buffer((await blobs.get(attachment.id))!)).equals(expected[i]!), `body ${i}`);
    }
  });
});

test('putAttachment refuses malformed input with a 400 naming the field, and stores nothing', async () => {
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  await withPortal({ storage, blobs }, async (portal) => {
    const valid = { name: 'a.txt', mime: 'text/plain', body: 'x' };
    const cases: [object, RegExp][] = [
      [{ ...valid, ticketId: 'tcm_wrongprefix' }, /attachment\.ticketId: must be a ticket id/],
      [{ ...valid, ticketId: 'tck_has-dash' }, /attachment\.ticketId/],
      [{ ...valid, ticketId: 'tck1', messageId: 'tcm_x' }, /attachment\.ticketId/],
      [{ ...valid, ticketId: 'tck_ok', messageId: 'tck_wrong' }, /attachment\.messageId: must be a message id/],
      [{ ...valid, messageId: 'tcm_alone' }, /attachment\.ticketId: is required when messageId is given/],
      [{ ...valid, name: '' }, /attachment\.name/],
      [{ ...valid, name: '../etc/passwd' }, /attachment\.name/],
      [{ ...valid, mime: 'not a type' }, /attachment\.mime/],
      [{ name: 'a.txt', mime: 'text/plain' }, /attachment\.body: is required/],
      [{ mime: 'text/plain', body: 'x' }, /attachment\.name: is required/],
      [null as never, /attachment: must be an object/],
    ];
    for (const [input, pattern] of cases) {
      const error = await rejects(() => portal.tickets.putAttachment('acct_a', input as never), pattern);
      assert.is(error.status, 400, pattern.source);
    }
    await rejects(() => portal.tickets.putAttachment('', valid), /accountId/);
    assert.equal(await blobKeys(blobs), []);
  });
});

test('putAttachment removes the bytes again when the record cannot be stored', async () => {
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  storage.insertAttachment = async () => {
    throw new Error('disk full');
  };
  await withPortal({ storage, blobs }, async (portal) => {
    await rejects(
      () => portal.tickets.putAttachment('acct_a', { name: 'a.txt', mime: 'text/plain', body: 'x' }),
      /disk full/,
    );
    assert.equal(await blobKeys(blobs), []);
  });
});

test("putAttachment rejects with the body's error and leaves neither record nor bytes", async () => {
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  const inserted: string[] = [];
  const insert = storage.insertAttachment.bind(storage);
  storage.insertAttachment = async (record) => {
    inserted.push(record.id);
    return insert(record);
  };
  await withPortal({ storage, blobs }, async (portal) => {
    async function* failing() {
      yield Buffer.from('partial');
      throw new Error('upload cut');
    }
    await rejects(
      () => portal.tickets.putAttachment('acct_a', { name: 'a.txt', mime: 'text/plain', body: failing() }),
      /upload cut/,
    );
    assert.equal(inserted, []);
    assert.equal(await blobKeys(blobs), []);
  });
});

test('getAttachment is null for another account or an unknown id', async () => {
  await withPortal({}, async (portal) => {
    const attachment = await portal.tickets.putAttachment('acct_a', { name: 'a.txt', mime: 'text/plain', body: 'x' });
    assert.equal(await portal.tickets.getAttachment('acct_a', attachment.id), attachment);
    assert.is(await portal.tickets.getAttachment('acct_b', attachment.id), null);
    assert.is(await portal.tickets.getAttachment('acct_a', 'tca_unknown'), null);
  });
});

test('deleteAttachment removes the record and the bytes, within the account only', async () => {
  const blobs = memoryBlobs();
  await withPortal({ blobs }, async (portal) => {
    const attachment = await portal.tickets.putAttachment('acct_a', { name: 'a.txt', mime: 'text/plain', body: 'x' });
    assert.is(await portal.tickets.deleteAttachment('acct_b', attachment.id), false);
    assert.ok(await blobs.stat(attachment.id));
    assert.is(await portal.tickets.deleteAttachment('acct_a', attachment.id), true);
    assert.is(await portal.tickets.getAttachment('acct_a', attachment.id), null);
    assert.is(await blobs.stat(attachment.id), null);
    assert.is(await portal.tickets.deleteAttachment('acct_a', attachment.id), false);
  });
});

test.run();
