import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryTransport } from '../../adapters/memory/index.js';
import { signer, validFormData, REAL_PNG, blobKeysOf } from '../helpers/agreements.js';
import { openBackends } from '../helpers/backends.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { until } from '../helpers/notifier.js';
import { darkPixels, pageCount, pdfText, pdfTextIn, pdfsig, qpdfCheck, testPkiFor } from '../helpers/pki.js';
import { type TestPortal, json, startPortal } from '../helpers/server.js';
import { NEVER } from '../helpers/webhooks.js';

/**
 * Fields on every adapter: the `fields` part is checked against the form and the documents' pages
 * at creation (a 400 naming the part, nothing stored), then each signer's values are stamped where
 * their fields are, by the part or by text anchors, with no signature page appended; the copy is
 * still sealed and valid.
 */
const keys = testPkiFor('fields');
const missing = keys.missing;
const { list: backends, close } = await openBackends('fields', { s3: true });
const suites: ReturnType<typeof suite>[] = [];

/** A PDF of `pages` A4 pages, each with a line of text, and `extra` lines drawn on page 1 at the given points. */
async function pdfOf(pages: number, extra: { text: string; x: number; y: number }[] = []): Promise<Buffer> {
  const { PDF, StandardFonts } = await import('@libpdf/core');
  const pdf = PDF.create();
  for (let n = 1; n <= pages; n++)
    pdf
      .addPage({ size: 'a4' })
      .drawText(`Terms of the lease, page ${n}`, { x: 60, y: 780, size: 12, font: StandardFonts.Helvetica });
  for (const line of extra)
    pdf.getPage(0)!.drawText(line.text, { x: line.x, y: line.y, size: 11, font: StandardFonts.Helvetica });
  return Buffer.from(await pdf.save());
}

function formWith(documents: { name: string; bytes: Buffer }[], fields: unknown): FormData {
  const form = validFormData({ signers: [signer(1), signer(2)], documents });
  form.append('fields', typeof fields === 'string' ? fields : JSON.stringify(fields));
  return form;
}

async function signAll(app: TestPortal, agreement: { id: string; signers: { id: string }[] }) {
  for (const one of agreement.signers)
    await app.portal.agreements.sign('acct_a', agreement.id, one.id, { signature: REAL_PNG });
  await until(
    async () => (await json(await app.api(`/agreements/${agreement.id}`))).documents[0].signedFileHash !== null,
    'the completed copy',
    20_000,
  );
  const link = await json(
    await app.api(
      `/agreements/${agreement.id}/documents/${(agreement as unknown as { documents: { id: string }[] }).documents[0]!.id}/signed`,
    ),
  );
  return Buffer.from(await (await fetch(link.link)).arrayBuffer());
}

for (const backend of backends) {
  const on = suite(`fields: ${backend.name}`);
  suites.push(on);

  on(
    'a field that names no signer, document or page, or lies off the page: 400 naming it, and nothing stored',
    async () => {
      if (missing !== null) return void console.log(`  skipped: ${missing}`);
      const { options, cleanup } = await backend.options();
      const blobs = options.blobs ?? memoryBlobs();
      const app = await startPortal({
        ...options,
        blobs,
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
        transport: memoryTransport(),
      });
      try {
        const pdf = await pdfOf(2);
        const documents = [
          { name: 'lease.pdf', bytes: pdf },
          { name: 'notes.txt', bytes: Buffer.from('plain text') },
        ];
        const box = { x: 10, y: 10, width: 20, height: 5 };
        const cases: [unknown, RegExp][] = [
          [[{ signer: 2, document: 0, page: 1, ...box }], /^fields\[0\]\.signer: is 2, but the form has 2 signers/],
          [
            [
              { signer: 0, document: 0, page: 1, ...box },
              { signer: 0, document: 2, page: 1, ...box },
            ],
            /^fields\[1\]\.document: is 2, but the form has 2 documents/,
          ],
          [[{ signer: 0, document: 0, page: 3, ...box }], /^fields\[0\]\.page: is 3, but documents\[0\] has 2 pages/],
          [[{ signer: 0, document: 0, page: 1, ...box, x: 90 }], /^fields\[0\]: x \+ width must be at most 100/],
          [[{ signer: 0, document: 0, page: 1, ...box, y: 96 }], /^fields\[0\]: y \+ height must be at most 100/],
          [[{ signer: 0, document: 0, page: 1, ...box, width: 0 }], /^fields\[0\]\.width: must be more than 0/],
          [[{ signer: 0, document: 0, page: 0, ...box }], /^fields\[0\]\.page: must be at least 1/],
          [
            [{ signer: 0, document: 0, page: 1, ...box, type: 'stamp' }],
            /^fields\[0\]\.type: must be one of: signature, name, date, initials/,
          ],
          [[{ signer: 0, document: 0, page: 1, ...box, colour: 'red' }], /^fields\[0\] has an unknown field "colour"/],
          [[{ signer: 0, document: 1, page: 1, ...box }], /^fields\[0\]\.document: documents\[1\] is not a PDF/],
          [{ signer: 0 }, /^fields: must be a JSON array/],
          ['[{', /^fields: is not valid JSON/],
          [
            Array.from({ length: 101 }, () => ({ signer: 0, document: 0, page: 1, ...box })),
            /^fields: must hold at most 100 fields/,
          ],
        ];
        for (const [fields, message] of cases) {
          const response = await app.api('/agreements', { method: 'POST', body: formWith(documents, fields) });
          assert.is(response.status, 400, JSON.stringify(fields).slice(0, 80));
          assert.match((await json(response)).message, message);
        }
        const broken = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(3000, 0x20), Buffer.from('\n%%EOF\n')]);
        const unreadable = await app.api('/agreements', {
          method: 'POST',
          body: formWith([{ name: 'broken.pdf', bytes: broken }], [{ signer: 0, document: 0, page: 1, ...box }]),
        });
        assert.is(unreadable.status, 400);
        assert.match((await json(unreadable)).message, /^documents\[0\]: is not a PDF that can be read/);
        assert.is((await json(await app.api('/agreements'))).data.length, 0, 'no agreement stored');
        assert.equal(await blobKeysOf(blobs), [], 'no document kept');
      } finally {
        await app.close();
        await cleanup();
      }
    },
  );

  on(
    'fields of the part and text anchors: each signer stamped where their fields are, no page added, the seal valid',
    async () => {
      if (missing !== null) return void console.log(`  skipped: ${missing}`);
      const { options, cleanup } = await backend.options();
      const app = await startPortal({
        ...options,
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
        transport: memoryTransport(),
        sealing: { p12: keys.pki.p12, password: keys.pki.password },
      });
      try {
        const pdf = await pdfOf(2);
        const boxes = {
          signature: { x: 10, y: 70, width: 40, height: 10 },
          name: { x: 10, y: 82, width: 40, height: 3 },
          date: { x: 55, y: 82, width: 20, height: 3 },
          initials: { x: 85, y: 95, width: 10, height: 3 },
        };
        const fields = [
          { signer: 0, document: 0, page: 2, ...boxes.signature },
          { signer: 0, document: 0, page: 2, ...boxes.name, type: 'name' },
          { signer: 0, document: 0, page: 2, ...boxes.date, type: 'date' },
          { signer: 1, document: 0, page: 1, ...boxes.initials, type: 'initials' },
        ];
        const created = await app.api('/agreements', {
          method: 'POST',
          body: formWith([{ name: 'lease.pdf', bytes: pdf }], fields),
        });
        assert.is(created.status, 201);
        const agreement = await json(created);
        const copy = await signAll(app, agreement);
        assert.ok(copy.subarray(0, pdf.length).equals(pdf), 'the original is the prefix');
        assert.is(pageCount(keys.pki, copy), 2, 'no signature page when the document has fields');
        const today = (await json(await app.api(`/agreements/${agreement.id}`))).signers[0].signedAt.slice(0, 10);
        assert.match(pdfTextIn(keys.pki, copy, 2, boxes.signature), /Signer1 Lee/);
        assert.match(pdfTextIn(keys.pki, copy, 2, boxes.name), /Signer1 Lee/);
        assert.match(pdfTextIn(keys.pki, copy, 2, boxes.date), new RegExp(today));
        assert.match(pdfTextIn(keys.pki, copy, 1, boxes.initials), /SL/);
        assert.not.match(pdfTextIn(keys.pki, copy, 1, boxes.signature), /Signer/, 'nothing where no field is');
        const report = pdfsig(keys.pki, copy);
        assert.match(report, /Total document signed[\s\S]*Signature is Valid\./, report);
        assert.is(qpdfCheck(keys.pki, copy).status, 0);

        // A page shown turned a quarter: the box is measured on the page as shown, the name upright in it.
        const { PDF, StandardFonts } = await import('@libpdf/core');
        const turnedDoc = PDF.create();
        const turnedPage = turnedDoc.addPage({ size: 'a4' });
        turnedPage.drawText('A page shown in landscape', { x: 60, y: 700, size: 12, font: StandardFonts.Helvetica });
        turnedPage.setRotation(90);
        const turned = Buffer.from(await turnedDoc.save());
        const landscapeBox = { x: 60, y: 70, width: 30, height: 6 };
        const third = await json(
          await app.api('/agreements', {
            method: 'POST',
            body: formWith(
              [{ name: 'turned.pdf', bytes: turned }],
              [{ signer: 1, document: 0, page: 1, ...landscapeBox, type: 'name' }],
            ),
          }),
        );
        const turnedCopy = await signAll(app, third);
        assert.match(
          pdfTextIn(keys.pki, turnedCopy, 1, landscapeBox),
          /Signer2 Lee/,
          'the name where the box is on the page as shown',
        );
        assert.not.match(pdfTextIn(keys.pki, turnedCopy, 1, { x: 0, y: 0, width: 50, height: 50 }), /Signer2/);

        // Anchors instead: {{signature:2}} and {{date:1}} where the text stands; {{name:7}} names no signer.
        const anchored = await pdfOf(1, [
          { text: 'Tenant: {{signature:2}}', x: 60, y: 300 },
          { text: 'Date: {{date:1}}', x: 60, y: 200 },
          { text: 'Witness: {{name:7}}', x: 60, y: 120 },
        ]);
        const second = await json(
          await app.api('/agreements', {
            method: 'POST',
            body: validFormData({ signers: [signer(1), signer(2)], documents: [{ name: 'a.pdf', bytes: anchored }] }),
          }),
        );
        const stamped = await signAll(app, second);
        assert.is(pageCount(keys.pki, stamped), 1, 'anchors are fields: no page appended');
        // 841.89 points high: y = 300 is 64.4 % from the top; the signature sits on the anchor's line.
        const line = (y: number, height = 4) => ({
          x: 8,
          y: ((841.89 - y) / 841.89) * 100 - height + 1,
          width: 60,
          height,
        });
        // The anchor stays in the text layer under its white box: pdftotext reads it between the name's words.
        assert.match(pdfTextIn(keys.pki, stamped, 1, line(300)), /Signer2\s[\s\S]*Lee/);
        assert.match(pdfTextIn(keys.pki, stamped, 1, line(200)), /\d{4}-\d{2}-\d{2}/);
        // {{name:7}} is covered in white and nothing drawn over it; the word before it is still there.
        const witness = { x: 60, y: 841.89 - 120 - 10, width: 40, height: 12 };
        assert.ok(darkPixels(keys.pki, stamped, 1, witness) > 20, 'the text before the anchor shows');
        assert.ok(
          darkPixels(keys.pki, anchored, 1, { ...witness, x: 106, width: 50 }) > 20,
          'the anchor shows in the original',
        );
        assert.is(
          darkPixels(keys.pki, stamped, 1, { ...witness, x: 106, width: 50 }),
          0,
          'the anchor is hidden in the copy',
        );
        const text = pdfText(keys.pki, stamped);
        assert.ok(text.includes('Tenant:') && text.includes('Witness:'), 'the text around the anchors stays');
        assert.match(pdfsig(keys.pki, stamped), /Signature is Valid\./);
      } finally {
        await app.close();
        await cleanup();
      }
    },
  );
}

keys.run(suites, close);
