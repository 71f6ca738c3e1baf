import { request } from 'node:http';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { signer, simplePdf, validFormData, REAL_PNG } from '../helpers/agreements.js';
import { openBackends } from '../helpers/backends.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { until } from '../helpers/notifier.js';
import { startTsa, testPkiFor } from '../helpers/pki.js';
import { KEY_A, KEY_B, type TestPortal, json, startPortal } from '../helpers/server.js';
import { NEVER } from '../helpers/webhooks.js';

/**
 * POST /verify on every adapter: a completed copy this account issued is intact and sealed at its
 * level; the original, another account's view, and the copy with any one byte flipped are not
 * intact, and a flipped byte inside the signed range breaks the seal; an unsealed copy is intact
 * but not sealed; the body's type, size and bytes are checked.
 */
const keys = testPkiFor('verify');
const missing = keys.missing;
const { list: backends, close } = await openBackends('verify', { s3: true });
const suites: ReturnType<typeof suite>[] = [];

async function completedCopyOf(app: TestPortal, text: string) {
  const pdf = await simplePdf(text);
  const agreement = await json(
    await app.api('/agreements', {
      method: 'POST',
      body: validFormData({ signers: [signer(1)], documents: [{ name: 'lease.pdf', bytes: pdf }] }),
    }),
  );
  await app.portal.agreements.sign('acct_a', agreement.id, agreement.signers[0].id, { signature: REAL_PNG });
  await until(
    async () => (await json(await app.api(`/agreements/${agreement.id}`))).documents[0].signedFileHash !== null,
    'the completed copy',
    // Stamped and sealed in the PDF worker on PGlite: a machine busy with other files took over 20 s.
    60_000,
  );
  const link = await json(await app.api(`/agreements/${agreement.id}/documents/${agreement.documents[0].id}/signed`));
  return { agreement, pdf, copy: Buffer.from(await (await fetch(link.link)).arrayBuffer()) };
}

const verify = async (app: TestPortal, body: Buffer, headers: Record<string, string> = {}) =>
  app.api('/verify', { method: 'POST', body, headers: { 'content-type': 'application/pdf', ...headers } });

/** The byte ranges a seal covers, from the last /ByteRange of the file. */
function signedRanges(pdf: Buffer): [number, number][] {
  const all = [...pdf.toString('latin1').matchAll(/\/ByteRange\s*\[\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\]/g)];
  const [, a, b, c, d] = all[all.length - 1]!.map(Number);
  return [
    [a!, a! + b!],
    [c!, c! + d!],
  ];
}

for (const backend of backends) {
  const on = suite(`verify: ${backend.name}`);
  suites.push(on);

  on(
    'a completed copy: intact and sealed, B-T with its time; the original, another account, a changed byte: not intact',
    async () => {
      if (missing !== null) return void console.log(`  skipped: ${missing}`);
      const { options, cleanup } = await backend.options();
      const tsa = await startTsa(keys.pki);
      const app = await startPortal({
        ...options,
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
        transport: memoryTransport(),
        sealing: { p12: keys.pki.p12, password: keys.pki.password, timestampUrl: tsa.url },
      });
      try {
        const { agreement, pdf, copy } = await completedCopyOf(app, 'The lease of the flat');
        const answer = await verify(app, copy);
        assert.is(answer.status, 200);
        const result = await json(answer);
        assert.equal(Object.keys(result), ['sealed', 'intact', 'level', 'signedAt', 'agreementId', 'documentId']);
        assert.is(result.sealed, true);
        assert.is(result.intact, true);
        assert.is(result.level, 'B-T');
        assert.match(result.signedAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/);
        assert.ok(Math.abs(Date.parse(result.signedAt) - Date.now()) < 120_000, 'the timestamp is of now');
        assert.is(result.agreementId, agreement.id);
        assert.is(result.documentId, agreement.documents[0].id);

        assert.equal(await json(await verify(app, pdf)), {
          sealed: false,
          intact: false,
          level: null,
          signedAt: null,
          agreementId: null,
          documentId: null,
        });
        const elsewhere = await json(await verify(app, copy, { authorization: `Bearer ${KEY_B}` }));
        assert.is(elsewhere.intact, false, 'another account did not issue it');
        assert.is(elsewhere.sealed, true, 'the seal is still a seal');

        // Ten bytes flipped inside the signed ranges, one at a time: never intact, never sealed.
        const ranges = signedRanges(copy);
        for (let n = 0; n < 10; n++) {
          const [start, end] = ranges[n % 2]!;
          const changed = Buffer.from(copy);
          const at = start + Math.floor(Math.random() * (end - start));
          changed[at] = changed[at]! ^ 0x01;
          const answer = await verify(app, changed);
          // A flip inside "%PDF-" makes it no PDF at all: refused, which is not intact either.
          if (at < 5) {
            assert.is(answer.status, 400, `byte ${at} flipped`);
            continue;
          }
          const flipped = await json(answer);
          assert.is(flipped.intact, false, `byte ${at} flipped`);
          assert.is(flipped.sealed, false, `byte ${at} flipped breaks the seal`);
        }
        // A byte appended after the seal: the seal no longer covers the file.
        const appended = await json(await verify(app, Buffer.concat([copy, Buffer.from('\n%')])));
        assert.equal([appended.intact, appended.sealed], [false, false]);
      } finally {
        await app.close();
        await tsa.close();
        await cleanup();
      }
    },
  );

  on(
    'an unsealed copy is intact, not sealed; the body is checked: 415, 413, 400; a hostile PDF is not sealed',
    async () => {
      if (missing !== null) return void console.log(`  skipped: ${missing}`);
      const { options, cleanup } = await backend.options();
      const app = await startPortal({
        ...options,
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
        transport: memoryTransport(),
      });
      try {
        const { agreement, copy } = await completedCopyOf(app, 'Stamped, not sealed');
        assert.equal(await json(await verify(app, copy)), {
          sealed: false,
          intact: true,
          level: null,
          signedAt: null,
          agreementId: agreement.id,
          documentId: agreement.documents[0].id,
        });
        const json415 = await app.api('/verify', {
          method: 'POST',
          body: copy,
          headers: { 'content-type': 'application/json' },
        });
        assert.is(json415.status, 415);
        assert.match((await json(json415)).message, /application\/pdf/);
        const notPdf = await verify(app, Buffer.from('hello'));
        assert.is(notPdf.status, 400);
        assert.match((await json(notPdf)).message, /not a PDF/);
        assert.is((await verify(app, Buffer.alloc(0))).status, 400);
        const large = await declaredTooLarge(app);
        assert.is(large.status, 413);
        assert.match(large.body, /25 MiB/);
        const hostile = Buffer.concat([
          Buffer.from('%PDF-1.7\n1 0 obj << /Length 99999999 >> stream\n'),
          Buffer.alloc(4096, 0x41),
          Buffer.from('\n%%EOF\n'),
        ]);
        assert.is((await json(await verify(app, hostile))).sealed, false);
      } finally {
        await app.close();
        await cleanup();
      }
    },
  );
}

const flips = suite('verify: 1,000 flipped bytes');
suites.push(flips);
flips('one byte flipped at 1,000 random places inside the signed range: never intact, never sealed', async () => {
  if (missing !== null) return void console.log(`  skipped: ${missing}`);
  const app = await startPortal({
    signingKeys: [SIGNING_KEY_1],
    webhooks: { tick: NEVER },
    transport: memoryTransport(),
    sealing: { p12: keys.pki.p12, password: keys.pki.password },
  });
  try {
    const { copy } = await completedCopyOf(app, 'A thousand changes');
    const ranges = signedRanges(copy);
    const size = ranges.reduce((sum, [start, end]) => sum + end - start, 0);
    const seen = { intact: 0, sealed: 0 };
    for (let n = 0; n < 1000; n++) {
      // Uniform over the signed bytes: the offset falls in the first range or, past its end, in the second.
      let offset = Math.floor(Math.random() * size);
      const [first, second] = ranges as [[number, number], [number, number]];
      const at = offset < first[1] - first[0] ? first[0] + offset : second[0] + (offset -= first[1] - first[0]);
      const changed = Buffer.from(copy);
      changed[at] = changed[at]! ^ (1 << (n % 8));
      const result = await app.portal.agreements
        .verify('acct_a', changed)
        .catch(() => ({ intact: false, sealed: false }));
      if (result.intact) seen.intact++;
      if (result.sealed) seen.sealed++;
    }
    assert.equal(seen, { intact: 0, sealed: 0 });
    assert.is((await app.portal.agreements.verify('acct_a', copy)).intact, true, 'the copy itself still is');
  } finally {
    await app.close();
  }
});

/** A request that declares 25 MiB and one byte: refused before its body is read. */
function declaredTooLarge(app: TestPortal): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const call = request(
      `${app.url}/v1/verify`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${KEY_A}`,
          'content-type': 'application/pdf',
          'content-length': String(26_214_401),
        },
      },
      (response) => {
        let body = '';
        response.on('data', (chunk) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode!, body }));
      },
    );
    call.on('error', reject);
    call.write(Buffer.alloc(1024));
  });
}

keys.run(suites, close);
