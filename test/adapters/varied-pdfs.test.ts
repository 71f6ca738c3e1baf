/**
 * Fifty PDFs of varied make (test/helpers/varied-pdfs.ts, and one already sealed) each get a
 * completed copy: qpdf finds no error in it, its text is kept, its seal is valid over the whole
 * file, and the earlier seal of the one already sealed stays valid.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { signer, validFormData, REAL_PNG } from '../helpers/agreements.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { until } from '../helpers/notifier.js';
import { type TestPki, makePki, pdfText, pdfsig, pkiMissing, qpdfCheck } from '../helpers/pki.js';
import { type TestPortal, json, startPortal } from '../helpers/server.js';
import { skipping } from '../helpers/skip.js';
import { libreOfficeMissing, variedPdfs } from '../helpers/varied-pdfs.js';
import { NEVER } from '../helpers/webhooks.js';

const missing = pkiMissing();
const it = missing === null ? test : skipping(test, missing);
let pki: TestPki;
test.before(() => {
  if (missing === null) pki = makePki();
  const noOffice = libreOfficeMissing();
  if (missing === null && noOffice !== null) console.log(`  varied PDFs: without LibreOffice's: ${noOffice}`);
});
test.after(() => pki?.close());

/** Creates and signs an agreement over `documents`; resolves each document's completed copy. */
async function copiesOf(app: TestPortal, documents: { name: string; bytes: Buffer }[]): Promise<Buffer[]> {
  const created = await app.api('/agreements', {
    method: 'POST',
    body: validFormData({ signers: [signer(1)], documents }),
  });
  assert.is(created.status, 201, await created.clone().text());
  const agreement = await json(created);
  await app.portal.agreements.sign('acct_a', agreement.id, agreement.signers[0].id, { signature: REAL_PNG });
  await until(
    async () =>
      (await app.portal.agreements.get('acct_a', agreement.id))!.documents.every(
        (document) => document.signedFileHash !== null,
      ),
    'every copy',
    60_000,
  );
  const copies: Buffer[] = [];
  for (const document of agreement.documents) {
    const link = await json(await app.api(`/agreements/${agreement.id}/documents/${document.id}/signed`));
    copies.push(Buffer.from(await (await fetch(link.link)).arrayBuffer()));
  }
  return copies;
}

it('50 PDFs of varied make, one already sealed: each copy checks, keeps its text, and every seal in it is valid', async () => {
  const app = await startPortal({
    signingKeys: [SIGNING_KEY_1],
    webhooks: { tick: NEVER },
    transport: memoryTransport(),
    sealing: { p12: pki.p12, password: pki.password },
  });
  try {
    const made = await variedPdfs(49);
    const [sealedBefore] = await copiesOf(app, [{ name: 'sealed-before.pdf', bytes: made[0]!.bytes }]);
    const all = [
      ...made,
      { name: 'already-sealed.pdf', maker: 'already sealed', bytes: sealedBefore!, text: made[0]!.text },
    ];
    const makers = new Set<string>();
    for (let start = 0; start < all.length; start += 5) {
      const batch = all.slice(start, start + 5);
      const copies = await copiesOf(app, batch);
      for (const [index, copy] of copies.entries()) {
        const { maker, bytes, text } = batch[index]!;
        makers.add(maker);
        assert.ok(copy.subarray(0, bytes.length).equals(bytes), `${maker}: the original is the prefix`);
        assert.not.equal(qpdfCheck(pki, copy).status, 2, `${maker}: qpdf finds no error`);
        // Against the original as pdftotext reads it: how a maker's substitute font extracts
        // (cairo with DejaVu Sans reads "C ontract") is the font's, not the copy's.
        const original = pdfText(pki, bytes);
        assert.ok(original.includes(text.slice(0, 8)) || original.includes(text.slice(2, 10)), `${maker}: readable`);
        assert.ok(pdfText(pki, copy).includes(original.trim().slice(0, 20)), `${maker}: the text is kept`);
        const report = pdfsig(pki, copy);
        const seals = report.match(/Signature Validation: Signature is Valid\./g)?.length ?? 0;
        assert.is(seals, maker === 'already sealed' ? 2 : 1, `${maker}: every seal valid\n${report}`);
        assert.match(report, /Total document signed/, maker);
      }
    }
    console.log(`  varied PDFs: ${all.length} copies, made by ${[...makers].join('; ')}`);
    assert.ok(all.length === 50);
  } finally {
    await app.close();
  }
});

test.run();
