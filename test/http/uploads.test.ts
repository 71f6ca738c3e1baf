import http from 'node:http';
import { text } from 'node:stream/consumers';
import { setTimeout } from 'node:timers/promises';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs } from '../../adapters/memory/index.js';
import { MAX_DOCUMENT_BYTES } from '../../src/domain/inputs.js';
import { atom } from '../../src/shared/time.js';
import { documentBytes } from '../helpers/agreements.js';
import { SIGNING_KEY_1, linkPath } from '../helpers/download.js';
import { KEY_A, KEY_B, json, withPortal, type TestPortal } from '../helpers/server.js';

const TICKET = 'tck_0123456789abcdefABCDEF';
const MESSAGE = 'tcm_0123456789abcdefABCDEF';
const attachmentPath = `/tickets/${TICKET}/message/${MESSAGE}/attachment`;

/** A multipart form of `parts` in order: text fields as strings, the file as [bytes, filename, type]. */
function form(parts: [string, string | [Buffer | string, string, string]][]): FormData {
  const body = new FormData();
  for (const [name, value] of parts) {
    if (typeof value === 'string') body.append(name, value);
    else body.append(name, new Blob([value[0]], { type: value[2] }), value[1]);
  }
  return body;
}
const post = (app: TestPortal, path: string, body: FormData | string, headers: Record<string, string> = {}) =>
  app.api(path, { method: 'POST', body, headers });
const postJson = (app: TestPortal, path: string, value: unknown) =>
  app.api(path, { method: 'POST', body: JSON.stringify(value), headers: { 'content-type': 'application/json' } });

test('POST /files streams one file into the root or a directory; POST /directories makes one', () =>
  withPortal(async (app) => {
    const made = await postJson(app, '/directories', { name: 'Contracts' });
    assert.is(made.status, 201);
    const directory = await json(made);
    assert.equal([directory.type, directory.name, directory.mime], ['directory', 'Contracts', 'inode/directory']);
    const nested = await postJson(app, '/directories', { name: 'Old', directoryId: directory.id });
    assert.is(nested.status, 201);

    const bytes = documentBytes(300_000, 5);
    const uploaded = await post(
      app,
      '/files',
      form([
        ['directoryId', directory.id],
        ['file', [bytes, 'lease.pdf', 'application/pdf']],
      ]),
    );
    assert.is(uploaded.status, 201);
    const entry = await json(uploaded);
    assert.equal(
      [entry.type, entry.name, entry.size, entry.mime],
      ['file', 'lease.pdf', bytes.length, 'application/pdf'],
    );
    const listed = await json(await app.api(`/files?directoryId=${directory.id}`));
    assert.equal(listed.data.map((item: { id: string }) => item.id).sort(), [entry.id, (await json(nested)).id].sort());

    // The parts in any order: a browser's FormData, or curl -F, may put the file first.
    const after = await post(
      app,
      '/files',
      form([
        ['file', ['late', 'after.txt', 'text/plain']],
        ['directoryId', directory.id],
      ]),
    );
    assert.is(after.status, 201);
    const placed = await json(after);
    assert.ok(
      (await json(await app.api(`/files?directoryId=${directory.id}`))).data.some(
        (item: { id: string }) => item.id === placed.id,
      ),
      'filed in the directory named after it',
    );

    const root = await post(app, '/files', form([['file', ['hello', 'note.txt', 'text/plain']]]));
    assert.is(root.status, 201);
    assert.ok((await json(await app.api('/files'))).data.some((item: { name: string }) => item.name === 'note.txt'));
    assert.is(
      (await json(await app.api('/files', { headers: { authorization: `Bearer ${KEY_B}` } }))).data.length,
      0,
      'another account sees none of it',
    );
  }));

test('POST /files refuses, naming the problem, and keeps nothing', () => {
  const blobs = memoryBlobs();
  return withPortal({ blobs }, async (app) => {
    const refusals: [FormData | string, number, RegExp, Record<string, string>?][] = [
      [
        form([
          ['file', ['x', 'a.txt', 'text/plain']],
          ['directoryId', 'fsd_0123456789abcdefABCDEF'],
        ]),
        404,
        /No directory fsd_/,
      ],
      [
        form([
          ['file', ['x', 'a.txt', 'text/plain']],
          ['directoryId', 'nope'],
        ]),
        400,
        /directoryId/,
      ],
      [
        form([
          ['directoryId', 'fsd_0123456789abcdefABCDEF'],
          ['file', ['x', 'a.txt', 'text/plain']],
          ['directoryId', 'fsd_0123456789abcdefABCDEF'],
        ]),
        400,
        /directoryId: was given more than once/,
      ],
      [
        form([
          ['other', 'x'],
          ['file', ['x', 'a.txt', 'text/plain']],
        ]),
        400,
        /Unknown part "other"/,
      ],
      [form([['directoryId', 'nope']]), 400, /file: is required|directoryId/],
      [
        form([
          ['directoryId', 'nope'],
          ['file', ['x', 'a.txt', 'text/plain']],
        ]),
        400,
        /directoryId/,
      ],
      [
        form([
          ['directoryId', 'fsd_0123456789abcdefABCDEF'],
          ['file', ['x', 'a.txt', 'text/plain']],
        ]),
        404,
        /No directory fsd_/,
      ],
      [
        form([
          ['file', ['x', 'a.txt', 'text/plain']],
          ['file', ['y', 'b.txt', 'text/plain']],
        ]),
        400,
        /one file per request/,
      ],
      [
        form([['file', [documentBytes(MAX_DOCUMENT_BYTES + 1), 'big.bin', 'application/octet-stream']]]),
        413,
        /over the limit of 5 MiB/,
      ],
      ['{"name":"a"}', 415, /multipart\/form-data/, { 'content-type': 'application/json' }],
      [
        '--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--\r\n',
        400,
        /^Unknown part without a name;/,
        { 'content-type': 'multipart/form-data; boundary=b' },
      ],
      [
        '--b\r\nContent-Disposition: form-data; filename="a.txt"\r\n\r\nx\r\n--b--\r\n',
        400,
        /^Unknown part without a name;/,
        { 'content-type': 'multipart/form-data; boundary=b' },
      ],
    ];
    for (const [body, status, message, headers] of refusals) {
      const res = await post(app, '/files', body, headers);
      assert.is(res.status, status);
      assert.match((await json(res)).message, message);
    }
    assert.equal((await json(await app.api('/files'))).data, [], 'no entry');
    const kept: string[] = [];
    for await (const blob of blobs.listBefore(atom(new Date(Date.now() + 60_000)))) kept.push(blob.key);
    assert.equal(kept, [], 'no bytes');
  });
});

test("a bad part after the file's bytes were stored undoes the upload: no entry, no bytes", () => {
  const blobs = memoryBlobs();
  return withPortal({ blobs }, async (app) => {
    const boundary = 'late-part-boundary';
    const req = http.request(`${app.url}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
      req.on('response', async (res) => resolve({ status: res.statusCode!, body: await text(res) }));
      req.on('error', reject);
    });
    req.write(
      `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="a.txt"\r\ncontent-type: text/plain\r\n\r\nhello\r\n--${boundary}\r\n`,
    );
    // The file part has ended: its bytes are stored before the next part arrives, its entry only once every part is read.
    const stored = async () => {
      const keys: string[] = [];
      for await (const blob of blobs.listBefore(atom(new Date(Date.now() + 60_000)))) keys.push(blob.key);
      return keys;
    };
    for (let wait = 0; (await stored()).length === 0 && wait < 100; wait++) await setTimeout(20);
    assert.is((await stored()).length, 1, 'the bytes were stored before the bad part');
    assert.equal(await app.portal.files.list('acct_a', null), [], 'no entry before the form ends');
    req.end(`content-disposition: form-data; name="x"\r\n\r\nlate\r\n--${boundary}--\r\n`);
    const { status, body } = await answered;
    assert.is(status, 400);
    assert.match(JSON.parse(body).message, /Unknown part "x"/);
    assert.equal(await app.portal.files.list('acct_a', null), [], 'no entry');
    const kept: string[] = [];
    for await (const blob of blobs.listBefore(atom(new Date(Date.now() + 60_000)))) kept.push(blob.key);
    assert.equal(kept, [], 'no bytes');
  });
});

test('two files of one name sit side by side in a directory, each with its own bytes and link', () =>
  withPortal({ signingKeys: [SIGNING_KEY_1] }, async (app) => {
    const first = await json(await post(app, '/files', form([['file', ['first', 'report.txt', 'text/plain']]])));
    const second = await json(await post(app, '/files', form([['file', ['second', 'report.txt', 'text/plain']]])));
    assert.is.not(first.id, second.id);
    const listed = (await json(await app.api('/files'))).data;
    assert.equal(
      listed.map((entry: { name: string }) => entry.name),
      ['report.txt', 'report.txt'],
    );
    assert.equal(
      listed.map((entry: { id: string }) => entry.id),
      [first.id, second.id].sort(),
      'by name, then by id',
    );
    for (const [entry, bytes] of [
      [first, 'first'],
      [second, 'second'],
    ] as const) {
      const { link } = await json(await app.api(`/files/${entry.id}/download`));
      assert.is(await (await fetch(link)).text(), bytes);
    }
  }));

test('GET /files/{id}/download of a directory says it is a directory, not that it is missing', () =>
  withPortal(async (app) => {
    const directory = await json(await postJson(app, '/directories', { name: 'Box' }));
    const res = await app.api(`/files/${directory.id}/download`);
    assert.is(res.status, 404);
    assert.is(
      (await json(res)).message,
      `${directory.id} is a directory, not a file: only a file has a download link.`,
    );
    assert.match(
      (await json(await app.api('/files/fsf_0000000000000000000000/download'))).message,
      /^No file or directory/,
    );
  }));

test('DELETE /files/{id}: a file, an empty directory; a non-empty directory is 409, a missing one 404', () =>
  withPortal(async (app) => {
    const directory = await json(await postJson(app, '/directories', { name: 'Box' }));
    const file = await json(
      await post(
        app,
        '/files',
        form([
          ['directoryId', directory.id],
          ['file', ['x', 'a.txt', 'text/plain']],
        ]),
      ),
    );
    assert.is((await app.api(`/files/${directory.id}`, { method: 'DELETE' })).status, 409);
    const other = await app.api(`/files/${file.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${KEY_B}` },
    });
    assert.is(other.status, 404, "another account's file is missing to it");
    assert.is((await app.api(`/files/${file.id}`, { method: 'DELETE' })).status, 204);
    assert.is((await app.api(`/files/${directory.id}`, { method: 'DELETE' })).status, 204);
    const gone = await app.api(`/files/${directory.id}`, { method: 'DELETE' });
    assert.is(gone.status, 404);
    assert.match((await json(gone)).message, /No file or directory fsd_/);
    assert.is((await postJson(app, '/directories', { name: '' })).status, 400);
  }));

test('an attachment uploaded over HTTP gets an id, downloads through its link, and can be removed', () =>
  withPortal({ signingKeys: [SIGNING_KEY_1] }, async (app) => {
    const created = await post(app, attachmentPath, form([['file', ['attached bytes', 'notes.txt', 'text/plain']]]));
    assert.is(created.status, 201);
    const attachment = await json(created);
    assert.match(attachment.id, /^tca_/);
    assert.equal(
      [attachment.ticketId, attachment.messageId, attachment.name, attachment.size],
      [TICKET, MESSAGE, 'notes.txt', 14],
    );
    const { link } = await json(await app.api(linkPath(attachment)));
    assert.is(await (await fetch(link)).text(), 'attached bytes');

    const wrongTicket = `/tickets/tck_otherTicket0123456789/message/${MESSAGE}/attachment/${attachment.id}`;
    assert.is((await app.api(wrongTicket, { method: 'DELETE' })).status, 404);
    assert.is((await app.api(`${attachmentPath}/nope`, { method: 'DELETE' })).status, 400);
    assert.is((await app.api(`${attachmentPath}/${attachment.id}`, { method: 'DELETE' })).status, 204);
    assert.is((await fetch(link)).status, 404, 'the link answers 404 once the attachment is removed');
    assert.is((await app.api(`${attachmentPath}/${attachment.id}`, { method: 'DELETE' })).status, 404);

    assert.is(
      (
        await post(
          app,
          '/tickets/nope/message/tcm_x0123456789abcdef/attachment',
          form([['file', ['x', 'a.txt', 'text/plain']]]),
        )
      ).status,
      400,
    );
    const big = await post(
      app,
      attachmentPath,
      form([['file', [documentBytes(MAX_DOCUMENT_BYTES + 1), 'big.bin', 'application/octet-stream']]]),
    );
    assert.is(big.status, 413);
  }));

test('with extensions: false the upload routes are not served', () =>
  withPortal({ extensions: false }, async (app) => {
    assert.is((await post(app, '/files', form([['file', ['x', 'a.txt', 'text/plain']]]))).status, 405);
    assert.is((await postJson(app, '/directories', { name: 'x' })).status, 404);
    assert.is((await post(app, attachmentPath, form([['file', ['x', 'a.txt', 'text/plain']]]))).status, 404);
  }));

test.run();
