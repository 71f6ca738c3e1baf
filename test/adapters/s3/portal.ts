import { request } from 'undici';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { s3Blobs } from '../../../adapters/s3/index.js';
import type { Attachment } from '../../../src/index.js';
import { patternBytes } from '../../conformance/fixtures.js';
import { SIGNING_KEY_1, getLink } from '../../helpers/download.js';
import { emptyPrefix, type Moto } from '../../helpers/moto.js';
import { type TestPortal, json, withPortal } from '../../helpers/server.js';
import { validFormData } from '../../helpers/agreements.js';

const BYTES = patternBytes(300_000, 8);
const NAME = 'Kostenvoranschlag März.pdf';
const DISPOSITION = `attachment; filename="Kostenvoranschlag Marz.pdf"; filename*=UTF-8''Kostenvoranschlag%20M%C3%A4rz.pdf`;

const bytesOf = async (res: Response) => Buffer.from(await res.arrayBuffer());

/** Download links on a portal whose bytes are in S3: streamed through it, or redirected to the bucket. */
export function s3PortalTests(test: Test, context: { moto: Moto; bucket: string } | undefined): void {
  let run = 0;
  const withS3Portal =
    (
      redirect: boolean,
      body: (app: TestPortal, attachment: Attachment, advance: (ms: number) => void) => Promise<void>,
    ) =>
    async () => {
      const { moto, bucket } = context!;
      const prefix = `portal-${++run}-${Date.now()}/`;
      let offset = 0;
      const clock = () => new Date(Date.now() + offset);
      await withPortal(
        { signingKeys: [SIGNING_KEY_1], clock, blobs: s3Blobs({ client: moto.client, bucket, prefix, redirect }) },
        async (app) => {
          try {
            const attachment = await app.portal.tickets.putAttachment('acct_a', {
              name: NAME,
              mime: 'application/pdf',
              body: BYTES,
            });
            await body(app, attachment, (ms) => (offset += ms));
          } finally {
            await emptyPrefix(moto.client, bucket, prefix);
          }
        },
      );
    };

  test(
    "redirect: GET on the link answers 302 to a presigned URL valid no longer than the link, with the portal's headers",
    withS3Portal(true, async (app, attachment) => {
      const { link, expiresAt } = await getLink(app, attachment);
      // What the link had left when the request was sent: the portal presigns no longer than that.
      const left = (new Date(expiresAt).getTime() - Date.now()) / 1000;
      const res = await fetch(link, { redirect: 'manual' });
      assert.is(res.status, 302);
      assert.is(res.headers.get('cache-control'), 'private, no-store');
      const location = new URL(res.headers.get('location')!);
      assert.ok(location.href.startsWith(`${context!.moto.endpoint}/${context!.bucket}/`), location.href);
      const lifetime = Number(location.searchParams.get('X-Amz-Expires'));
      assert.ok(lifetime >= 1 && lifetime <= left, `presigned for ${lifetime} s, the link has ${left} s left`);
      assert.is(location.searchParams.get('response-content-disposition'), DISPOSITION);
      assert.is(location.searchParams.get('response-content-type'), 'application/pdf');

      // A presigned URL is signed for GET alone: a HEAD is answered by the portal, from the record.
      const head = await fetch(link, { method: 'HEAD', redirect: 'manual' });
      assert.is(head.status, 200);
      assert.is(head.headers.get('content-length'), String(BYTES.length));
      assert.is(head.headers.get('content-disposition'), DISPOSITION);

      // Followed: the bucket answers with the bytes. (AWS S3, R2 and MinIO answer with the headers the
      // response-* parameters above name, which the signature covers; moto ignores those parameters.)
      const followed = await fetch(link);
      assert.is(followed.status, 200);
      assert.ok((await bytesOf(followed)).equals(BYTES), 'byte-exact from the bucket');
      const ranged = await fetch(link, { headers: { range: 'bytes=1000-1999' } });
      assert.is(ranged.status, 206);
      assert.is(ranged.headers.get('content-range'), `bytes 1000-1999/${BYTES.length}`);
      assert.ok((await bytesOf(ranged)).equals(BYTES.subarray(1000, 2000)));
    }),
  );

  test(
    'redirect: the presigned URL lives as long as the link has left; under a second left, the portal streams instead',
    withS3Portal(true, async (app, attachment, advance) => {
      const { link } = await getLink(app, attachment);
      advance(200_000);
      const later = new URL((await fetch(link, { redirect: 'manual' })).headers.get('location')!);
      const lifetime = Number(later.searchParams.get('X-Amz-Expires'));
      assert.ok(lifetime >= 98 && lifetime <= 100, `${lifetime} s`);
      advance(99_500);
      const last = await fetch(link, { redirect: 'manual' });
      if (last.status === 200) assert.ok((await bytesOf(last)).equals(BYTES), 'streamed through the portal');
      else assert.is(last.status, 410, 'or the link has just expired');
    }),
  );

  test(
    "redirect: the link's own checks come first (403 altered, 410 expired, 404 removed)",
    withS3Portal(true, async (app, attachment, advance) => {
      const { link } = await getLink(app, attachment);
      assert.is(
        (await fetch(link.replace(/signature=[^&]+/, 'signature=' + 'A'.repeat(43)), { redirect: 'manual' })).status,
        403,
      );
      await app.portal.tickets.deleteAttachment('acct_a', attachment.id);
      assert.is((await fetch(link, { redirect: 'manual' })).status, 404);
      advance(301_000);
      assert.is((await fetch(link, { redirect: 'manual' })).status, 410);
    }),
  );

  test(
    'without redirect: GET and HEAD stream from the bucket through the portal, a Range answered 206',
    withS3Portal(false, async (app, attachment) => {
      const { link } = await getLink(app, attachment);
      const whole = await fetch(link, { redirect: 'manual' });
      assert.is(whole.status, 200);
      assert.ok((await bytesOf(whole)).equals(BYTES));
      assert.is(whole.headers.get('content-disposition'), DISPOSITION);
      assert.is(whole.headers.get('content-length'), String(BYTES.length));
      const ranged = await fetch(link, { headers: { range: 'bytes=-100' } });
      assert.is(ranged.status, 206);
      assert.is(ranged.headers.get('content-range'), `bytes ${BYTES.length - 100}-${BYTES.length - 1}/${BYTES.length}`);
      assert.ok((await bytesOf(ranged)).equals(BYTES.subarray(BYTES.length - 100)));
      const head = await fetch(link, { method: 'HEAD', headers: { range: 'bytes=0-9' } });
      assert.is(head.status, 206);
      assert.is(head.headers.get('content-length'), '10');
    }),
  );

  test('a file and an agreement document in the bucket: their links redirect there, and stream without redirect', async () => {
    for (const redirect of [true, false]) {
      await withS3Portal(redirect, async (app) => {
        const file = await app.portal.files.put('acct_a', { name: NAME, mime: 'application/pdf', body: BYTES });
        const form = validFormData({ documents: [{ name: 'lease.pdf', bytes: BYTES }] });
        const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
        const links = [
          (await json(await app.api(`/files/${file.id}/download`))).link,
          (await json(await app.api(`/agreements/${agreement.id}/documents/${agreement.documents[0].id}/download`)))
            .link,
        ];
        for (const link of links) {
          const first = await fetch(link, { redirect: 'manual' });
          assert.is(first.status, redirect ? 302 : 200, link);
          if (redirect)
            assert.ok(first.headers.get('location')!.startsWith(`${context!.moto.endpoint}/${context!.bucket}/`));
          else await first.arrayBuffer();
          const followed = await fetch(link);
          assert.ok((await bytesOf(followed)).equals(BYTES), 'byte-exact');
          // A script of the portal's own pages (the signing page drawing a document) cannot follow a
          // redirect to the bucket under the page's CSP: the portal streams the bytes itself.
          // (undici's `request`: its `fetch` sends a `Sec-Fetch-Mode` of its own.)
          const asked = (mode: string) =>
            request(link, { headers: { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': mode } });
          const fromPage = await asked('cors');
          assert.is(fromPage.statusCode, 200, link);
          assert.ok(Buffer.from(await fromPage.body.arrayBuffer()).equals(BYTES), 'byte-exact, from the portal');
          const navigated = await asked('navigate');
          assert.is(navigated.statusCode, redirect ? 302 : 200, 'a click on the link still goes to the bucket');
          await navigated.body.dump();
        }
      })();
    }
  });
}
