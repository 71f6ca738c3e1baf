import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryStorage } from '../../adapters/memory/index.js';
import { KEY_B, json, rejects, withPortal } from '../helpers/server.js';

const ENTRY_FIELDS = ['createdAt', 'fileShareId', 'id', 'mime', 'name', 'size', 'type'];

test('GET /files without directoryId lists the account root: directories first, then by name, case-insensitive', async () => {
  await withPortal({ clock: () => new Date('2026-03-04T05:06:07Z') }, async (app) => {
    const { files } = app.portal;
    const b = await files.put('acct_a', { name: 'b.txt', mime: 'text/plain', body: 'bee' });
    const a = await files.put('acct_a', { name: 'A.txt', mime: 'text/plain', body: 'a' });
    const zeta = await files.createDirectory('acct_a', { name: 'zeta' });
    const alpha = await files.createDirectory('acct_a', { name: 'Alpha' });
    const c = await files.put('acct_a', {
      name: 'c.pdf',
      mime: 'application/pdf',
      body: Buffer.alloc(10),
      fileShareId: 'fss_shared1',
    });
    await files.put('acct_b', { name: 'other.txt', mime: 'text/plain', body: 'x' });
    const res = await app.api('/files');
    assert.is(res.status, 200);
    const body = await json(res);
    assert.equal(Object.keys(body), ['data']);
    assert.equal(
      body.data.map((e: { id: string }) => e.id),
      [alpha.id, zeta.id, a.id, b.id, c.id],
    );
    for (const entry of body.data) assert.equal(Object.keys(entry).sort(), ENTRY_FIELDS);
    assert.equal(body.data[0], {
      id: alpha.id,
      type: 'directory',
      name: 'Alpha',
      size: 0,
      mime: 'inode/directory',
      fileShareId: null,
      createdAt: '2026-03-04T05:06:07+00:00',
    });
    assert.equal(body.data[4], {
      id: c.id,
      type: 'file',
      name: 'c.pdf',
      size: 10,
      mime: 'application/pdf',
      fileShareId: 'fss_shared1',
      createdAt: '2026-03-04T05:06:07+00:00',
    });
    assert.match(alpha.id, /^fsd_[0-9A-Za-z]{22}$/);
    assert.match(a.id, /^fsf_[0-9A-Za-z]{22}$/);
    assert.is(body.data[3].size, 3, 'size is the byte count of the body');
  });
});

test('equal names are ordered by id, so the listing is stable', async () => {
  await withPortal(async (app) => {
    const made = [];
    for (let i = 0; i < 6; i++)
      made.push(await app.portal.files.put('acct_a', { name: i % 2 ? 'same' : 'SAME', mime: 'text/plain', body: '' }));
    const listed = (await json(await app.api('/files'))).data.map((e: { id: string }) => e.id);
    assert.equal(listed, made.map((e) => e.id).sort());
  });
});

test('GET /files?directoryId= lists that directory only, every entry, no pagination', async () => {
  await withPortal(async (app) => {
    const { files } = app.portal;
    const dir = await files.createDirectory('acct_a', { name: 'Contracts' });
    const inner = await files.createDirectory('acct_a', { name: 'Inner', directoryId: dir.id });
    for (let i = 0; i < 150; i++)
      await files.put('acct_a', {
        name: `doc-${String(i).padStart(3, '0')}.txt`,
        mime: 'text/plain',
        directoryId: dir.id,
        body: 'x',
      });
    await files.put('acct_a', { name: 'deeper.txt', mime: 'text/plain', directoryId: inner.id, body: 'x' });
    const listed = (await json(await app.api(`/files?directoryId=${dir.id}`))).data;
    assert.is(listed.length, 151);
    assert.is(listed[0].id, inner.id);
    assert.is(listed[1].name, 'doc-000.txt');
    assert.is(listed[150].name, 'doc-149.txt');
    const root = (await json(await app.api('/files'))).data;
    assert.equal(
      root.map((e: { id: string }) => e.id),
      [dir.id],
    );
  });
});

test("GET /files: 400 for a malformed or repeated directoryId, 404 for an unknown one, another account's, or a file id shaped as one", async () => {
  await withPortal(async (app) => {
    const dirOfB = await app.portal.files.createDirectory('acct_b', { name: 'B' });
    for (const query of [
      'directoryId=fsf_abc',
      'directoryId=abc',
      'directoryId=',
      'directoryId=fsd_%20x',
      'directoryId=fsd_a&directoryId=fsd_b',
    ]) {
      const res = await app.api(`/files?${query}`);
      assert.is(res.status, 400, query);
      assert.match((await json(res)).message, 'directoryId', query);
    }
    for (const id of ['fsd_unknown0000000000000', dirOfB.id]) {
      const res = await app.api(`/files?directoryId=${id}`);
      assert.is(res.status, 404, id);
      assert.equal(await json(res), { message: `No directory ${id} in this account.` });
    }
    const asB = await app.api(`/files?directoryId=${dirOfB.id}`, { headers: { authorization: `Bearer ${KEY_B}` } });
    assert.is(asB.status, 200);
  });
});

test('files.put streams a Readable into the blob store and records its size and mime', async () => {
  const blobs = memoryBlobs();
  await withPortal({ blobs }, async (app) => {
    const parts = Array.from({ length: 40 }, (_, i) => Buffer.alloc(64 * 1024, i));
    const entry = await app.portal.files.put('acct_a', {
      name: 'big.bin',
      mime: 'application/octet-stream',
      body: Readable.from(parts),
    });
    assert.is(entry.size, 40 * 64 * 1024);
    assert.is(entry.mime, 'application/octet-stream');
    const stored = await buffer((await blobs.get(entry.id))!);
    assert.ok(stored.equals(Buffer.concat(parts)));
  });
});

test('files.put: a failing body rejects and leaves neither entry nor blob', async () => {
  const blobs = memoryBlobs();
  await withPortal({ blobs }, async (app) => {
    async function* broken() {
      yield Buffer.from('partial');
      throw new Error('upstream closed');
    }
    await rejects(
      () => app.portal.files.put('acct_a', { name: 'x.bin', mime: 'application/octet-stream', body: broken() }),
      /upstream closed/,
    );
    assert.equal(await app.portal.files.list('acct_a'), []);
    const left = [];
    for await (const info of blobs.listBefore('2100-01-01T00:00:00+00:00')) left.push(info);
    assert.equal(left, []);
  });
});

test('files.put and createDirectory validate their input with 400s naming the field, and 404 for a missing parent', async () => {
  await withPortal(async (app) => {
    const { files } = app.portal;
    const cases: [() => Promise<unknown>, RegExp, number][] = [
      [() => files.put('acct_a', { name: '', mime: 'text/plain', body: 'x' }), /file\.name: must not be empty/, 400],
      [() => files.put('acct_a', { name: 'a/b', mime: 'text/plain', body: 'x' }), /file\.name: must not contain/, 400],
      [
        () => files.put('acct_a', { name: '..', mime: 'text/plain', body: 'x' }),
        /file\.name: must not be "\." or "\.\."/,
        400,
      ],
      [() => files.put('acct_a', { name: 'n'.repeat(256), mime: 'text/plain', body: 'x' }), /at most 255/, 400],
      [() => files.put('acct_a', { name: 'a', mime: 'text', body: 'x' }), /file\.mime: must be a media type/, 400],
      [
        () => files.put('acct_a', { name: 'a', mime: 'text/plain', body: undefined as never }),
        /file\.body: is required/,
        400,
      ],
      [
        () => files.put('acct_a', { name: 'a', mime: 'text/plain', fileShareId: 'share', body: 'x' }),
        /file\.fileShareId: must be a file share id/,
        400,
      ],
      [
        () => files.put('acct_a', { name: 'a', mime: 'text/plain', directoryId: 'fsf_x', body: 'x' }),
        /file\.directoryId: must be a directory id/,
        400,
      ],
      [
        () => files.put('acct_a', { name: 'a', mime: 'text/plain', directoryId: 'fsd_missing', body: 'x' }),
        /No directory fsd_missing/,
        404,
      ],
      [
        () => files.createDirectory('acct_a', { name: 'x', directoryId: 'fsd_missing' }),
        /No directory fsd_missing/,
        404,
      ],
      [() => files.createDirectory('acct_a', {} as never), /directory\.name: is required/, 400],
    ];
    for (const [call, pattern, status] of cases)
      assert.is((await rejects(call, pattern)).status, status, pattern.source);
    assert.equal(await files.list('acct_a'), []);
  });
});

test("a file cannot be a parent, and another account's directory is not found", async () => {
  await withPortal(async (app) => {
    const { files } = app.portal;
    const file = await files.put('acct_a', { name: 'f', mime: 'text/plain', body: 'x' });
    const dirOfB = await files.createDirectory('acct_b', { name: 'B' });
    await rejects(
      () => files.createDirectory('acct_a', { name: 'x', directoryId: file.id.replace('fsf_', 'fsd_') }),
      /No directory/,
    );
    await rejects(
      () => files.put('acct_a', { name: 'x', mime: 'text/plain', directoryId: dirOfB.id, body: 'x' }),
      /No directory/,
    );
  });
});

test('files.delete removes a file and its bytes; a directory only when empty; another account cannot', async () => {
  const blobs = memoryBlobs();
  await withPortal({ blobs }, async (app) => {
    const { files } = app.portal;
    const dir = await files.createDirectory('acct_a', { name: 'D' });
    const file = await files.put('acct_a', { name: 'f', mime: 'text/plain', directoryId: dir.id, body: 'bytes' });
    assert.is(await files.delete('acct_b', file.id), false);
    assert.is((await rejects(() => files.delete('acct_a', dir.id), /not empty/)).status, 409);
    assert.is(await files.delete('acct_a', file.id), true);
    assert.is(await blobs.stat(file.id), null);
    assert.is(await files.delete('acct_a', file.id), false);
    assert.is(await files.delete('acct_a', dir.id), true);
    assert.equal(await files.list('acct_a'), []);
    assert.is(await files.get('acct_a', dir.id), null);
  });
});

test('GET /files answers every change to the directory at once, though listings are reused in between', async () => {
  await withPortal(async (app) => {
    const { files } = app.portal;
    const listed = async (path: string) => (await json(await app.api(path))).data.map((e: { name: string }) => e.name);
    const dir = await files.createDirectory('acct_a', { name: 'Reports' });
    const path = `/files?directoryId=${dir.id}`;
    assert.equal(await listed(path), []);
    const first = await files.put('acct_a', { name: 'b.txt', mime: 'text/plain', directoryId: dir.id, body: 'x' });
    assert.equal(await listed(path), ['b.txt']);
    assert.equal(await listed(path), ['b.txt'], 'asked again, unchanged');
    await files.createDirectory('acct_a', { name: 'a-inner', directoryId: dir.id });
    assert.equal(await listed(path), ['a-inner', 'b.txt']);
    assert.equal(await listed('/files'), ['Reports'], 'the root is listed apart');
    assert.is(
      (await app.api(path, { headers: { authorization: `Bearer ${KEY_B}` } })).status,
      404,
      'another account, after the listing was kept',
    );
    assert.is(await files.delete('acct_a', first.id), true);
    assert.equal(await listed(path), ['a-inner']);
    const head = await app.api(path, { method: 'HEAD' });
    assert.is(head.status, 200);
    assert.is(
      Number(head.headers.get('content-length')),
      JSON.stringify({ data: await files.list('acct_a', dir.id) }).length,
    );
    const inner = (await files.list('acct_a', dir.id))[0]!;
    assert.is(await files.delete('acct_a', inner.id), true);
    assert.is(await files.delete('acct_a', dir.id), true);
    assert.is((await app.api(path)).status, 404, 'a deleted directory is not served from an earlier listing');
  });
});

test('GET /files reads every listing afresh: a file put through the portal object is listed at once', async () => {
  const unversioned = memoryStorage();
  await withPortal({ storage: unversioned }, async (app) => {
    const { files } = app.portal;
    const dir = await files.createDirectory('acct_a', { name: 'Plain' });
    const path = `/files?directoryId=${dir.id}`;
    assert.equal((await json(await app.api(path))).data, []);
    const file = await files.put('acct_a', { name: 'one.txt', mime: 'text/plain', directoryId: dir.id, body: '1' });
    assert.equal((await json(await app.api(path))).data, [file]);
  });
});

test.run();
