import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { documentBytes, validFormData } from '../helpers/agreements.js';
import { openBackends } from '../helpers/backends.js';
import { SIGNING_KEY_1, withParam } from '../helpers/download.js';
import { KEY_B, json, withPortal, type TestPortal } from '../helpers/server.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';
import { patternBytes } from '../conformance/fixtures.js';

/**
 * Files and agreement documents downloaded through their signed links, on every adapter: the link
 * route, the bytes whole, one range and HEAD, and the refusals (tampered, expired, another kind,
 * another account, a directory, a document of another agreement).
 */
const { list: backends, close } = await openBackends('downloads');

const FILE = patternBytes(70_000, 3);
const DOCUMENT = documentBytes(20_000, 7);

/** The signature with its first character changed (the first always carries bits of the MAC). */
const altered = (signature: string) => (signature[0] === 'A' ? 'B' : 'A') + signature.slice(1);

const bytesOf = async (res: Response) => Buffer.from(await res.arrayBuffer());

/** Uploads FILE with `POST /files`, the file part first and the directory after it, as a browser's FormData may. */
async function upload(app: TestPortal, directoryId: string) {
  const form = new FormData();
  form.append('file', new Blob([FILE], { type: 'application/pdf' }), 'Jahresbericht 2026.pdf');
  form.append('directoryId', directoryId);
  const res = await app.api('/files', { method: 'POST', body: form });
  assert.is(res.status, 201, await res.clone().text());
  return json(res);
}

/** Checks the whole, a range and HEAD through `link`. */
async function servesBytes(link: string, bytes: Buffer, type: string, name: string) {
  const whole = await fetch(link);
  assert.is(whole.status, 200);
  assert.ok((await bytesOf(whole)).equals(bytes), 'byte-exact');
  assert.is(whole.headers.get('content-type'), type);
  assert.match(whole.headers.get('content-disposition') ?? '', new RegExp(`^attachment; filename="${name}"`));
  const ranged = await fetch(link, { headers: { range: 'bytes=100-199' } });
  assert.is(ranged.status, 206);
  assert.is(ranged.headers.get('content-range'), `bytes 100-199/${bytes.length}`);
  assert.ok((await bytesOf(ranged)).equals(bytes.subarray(100, 200)));
  const head = await fetch(link, { method: 'HEAD' });
  assert.is(head.status, 200);
  assert.is(head.headers.get('content-length'), String(bytes.length));
  assert.is((await head.arrayBuffer()).byteLength, 0);
}

for (const backend of backends) {
  const on = suite(`downloads: ${backend.name}`);

  on(
    'a file and an agreement document download through their links; tampered, foreign and expired links are refused',
    async () => {
      const { options, cleanup } = await backend.options();
      const time = manualClock();
      try {
        await withPortal(
          { ...options, clock: time.clock, signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } },
          async (app) => {
            const directory = await app.portal.files.createDirectory('acct_a', { name: 'Reports' });
            const file = await upload(app, directory.id);
            assert.equal([file.name, file.size], ['Jahresbericht 2026.pdf', FILE.length]);
            assert.equal(
              (await app.portal.files.list('acct_a', directory.id)).map((entry) => entry.id),
              [file.id],
              'filed in the directory sent after it',
            );

            const fileLink = await app.api(`/files/${file.id}/download`);
            assert.is(fileLink.status, 200);
            const { link, expiresAt } = await json(fileLink);
            assert.is(Date.parse(expiresAt), time.now.getTime() + 300_000);
            await servesBytes(link, FILE, 'application/pdf', 'Jahresbericht 2026.pdf');

            const created = await app.api('/agreements', {
              method: 'POST',
              body: validFormData({ documents: [{ name: 'lease.pdf', bytes: DOCUMENT }] }),
            });
            assert.is(created.status, 201);
            const agreement = await json(created);
            const documentId = agreement.documents[0].id;
            const documentLink = await app.api(`/agreements/${agreement.id}/documents/${documentId}/download`);
            assert.is(documentLink.status, 200);
            const document = (await json(documentLink)).link;
            await servesBytes(document, DOCUMENT, 'application/pdf', 'lease.pdf');

            // Tampered: another id, an account, an agreement, a signature; a file's link with a document's id.
            const refused = [
              withParam(link, 'account', 'acct_b'),
              withParam(link, 'signature', altered(new URL(link).searchParams.get('signature')!)),
              link.replace(file.id, documentId),
              withParam(document, 'agreement', 'agr_other'),
              document.replace(documentId, file.id),
            ];
            for (const url of refused) assert.is((await fetch(url)).status, 403, url);
            assert.is((await fetch(withParam(link, 'ticket', 'tck_1'))).status, 403, 'a ticket on a file link');

            // Not found: a directory, another account's file, a document of another agreement.
            assert.is((await app.api(`/files/${directory.id}/download`)).status, 404);
            assert.is(
              (await app.api(`/files/${file.id}/download`, { headers: { authorization: `Bearer ${KEY_B}` } })).status,
              404,
            );
            assert.is(
              (
                await app.api(`/agreements/${agreement.id}/documents/${documentId}/download`, {
                  headers: { authorization: `Bearer ${KEY_B}` },
                })
              ).status,
              404,
            );
            const other = await json(await app.api('/agreements', { method: 'POST', body: validFormData() }));
            const crossed = await app.api(`/agreements/${other.id}/documents/${documentId}/download`);
            assert.is(crossed.status, 404);
            assert.match((await json(crossed)).message, `No document ${documentId} in agreement ${other.id}.`);
            assert.is((await app.api('/files/nope/download')).status, 400);

            // Expired from the second in expiresAt on; a file removed since is a 404.
            time.advance(300);
            assert.is((await fetch(link)).status, 410);
            assert.is((await fetch(document)).status, 410);
            time.advance(-300);
            assert.is(await app.portal.files.delete('acct_a', file.id), true);
            assert.is((await fetch(link)).status, 404);
            assert.equal(await json(await fetch(link)), { message: 'The file has been removed.' });
          },
        );
      } finally {
        await cleanup();
      }
    },
  );

  on.run();
}

const done = suite('downloads: shared clients');
done.after(close);
done('closed after the other suites', () => {});
done.run();
