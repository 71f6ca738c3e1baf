import { constants, createHash, createPrivateKey, privateEncrypt } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { completedCopy, copyPlan } from '../../src/domain/completed-copy.js';
import { type Sealer, createSealer } from '../../src/domain/sealing.js';
import { agreementRecord } from '../conformance/fixtures.js';
import { type TestPki, makePki, pdfText, pdfsig, pkiMissing, qpdfCheck, startTsa } from '../helpers/pki.js';
import { skipping } from '../helpers/skip.js';
import { REAL_PNG } from '../helpers/agreements.js';

/**
 * The completed copy of a signed PDF: the signature page appended by an incremental update (the
 * original a prefix of the copy), then a PAdES seal pdfsig accepts, with a CA it trusts: B-T with a
 * timestamp authority, B-B (and the reason) when it fails, and the same with a key the library
 * never holds (the host's `sign`).
 */

const missing = pkiMissing();
const it = missing === null ? test : skipping(test, missing);
let pki: TestPki;

test.before(() => {
  if (missing === null) pki = makePki();
});
test.after(() => pki?.close());

async function original(text: string, useXRefStream = false): Promise<Buffer> {
  const { PDF, StandardFonts } = await import('@libpdf/core');
  const pdf = PDF.create();
  for (let n = 1; n <= 3; n++)
    pdf
      .addPage({ size: 'a4' })
      .drawText(`${text}, page ${n}`, { x: 60, y: 760, size: 14, font: StandardFonts.Helvetica });
  return Buffer.from(await pdf.save({ useXRefStream }));
}

function signedAgreement(bytes: Buffer) {
  const record = agreementRecord({ status: 'signed', name: 'Lease Lindenstrasse 2026' });
  const at = '2026-12-05T10:00:00+00:00';
  record.signers = record.signers.map((signer) => ({
    ...signer,
    signature: REAL_PNG,
    signatureHash: 'a'.repeat(64),
    signedAt: at,
  }));
  const document = {
    ...record.documents[0]!,
    fileHash: createHash('sha256').update(bytes).digest('hex'),
    fileSize: bytes.length,
  };
  return { record: { ...record, documents: [document] }, document };
}

const NOW = new Date('2026-12-05T10:05:00Z');
/** The DER prefix of a SHA-256 DigestInfo (RFC 8017 §9.2): what PKCS#1 v1.5 signs, the digest after it. */
const SHA256_DIGEST_INFO = Buffer.from('3031300d060960864801650304020105000420', 'hex');

it('with a PKCS#12 key and a timestamp authority: B-T, valid, trusted, the whole file; the original a prefix; its text and the signers in it', async () => {
  const tsa = await startTsa(pki);
  try {
    const sealer = (await createSealer({ p12: pki.p12, password: pki.password, timestampUrl: tsa.url }))!;
    const bytes = await original('The lease of the flat');
    const { record, document } = signedAgreement(bytes);
    const copy = await completedCopy(bytes, copyPlan(record, document, NOW), sealer);
    assert.is(copy.level, 'B-T');
    assert.is(copy.degraded, null);
    assert.is(tsa.stamped, 1, 'the authority was asked');
    assert.ok(copy.bytes.subarray(0, bytes.length).equals(bytes), 'the original bytes are the prefix of the copy');
    assert.is(copy.hash, createHash('sha256').update(copy.bytes).digest('hex'));
    const report = pdfsig(pki, copy.bytes);
    assert.match(report, /Signature Validation: Signature is Valid\./);
    assert.match(report, /Certificate Validation: Certificate is Trusted\./);
    assert.match(report, /Total document signed/);
    assert.match(report, /Signature Type: ETSI\.CAdES\.detached/);
    assert.is(qpdfCheck(pki, copy.bytes).status, 0, qpdfCheck(pki, copy.bytes).output);
    const text = pdfText(pki, copy.bytes).replace(/\s+/g, ' ');
    for (const part of [
      'The lease of the flat, page 1',
      'The lease of the flat, page 3',
      'Signatures',
      ...record.signers.map((one) => `${one.firstName} ${one.lastName}`),
      document.fileHash,
    ]) {
      assert.ok(text.includes(part), `the copy's text holds ${part}`);
    }
  } finally {
    await tsa.close();
  }
});

it('a timestamp authority that fails: a B-B seal, still valid, and the reason', async () => {
  const sealer = (await createSealer({
    p12: pki.p12,
    password: pki.password,
    timestampUrl: 'http://127.0.0.1:9/tsa',
  }))!;
  const bytes = await original('Without a timestamp', true);
  const { record, document } = signedAgreement(bytes);
  const copy = await completedCopy(bytes, copyPlan(record, document, NOW), sealer);
  assert.is(copy.level, 'B-B');
  assert.ok(copy.degraded !== null && copy.degraded.length > 0, 'the reason is kept');
  assert.match(pdfsig(pki, copy.bytes), /Signature is Valid\.[\s\S]*Certificate is Trusted\./);
});

it("a key the library never holds: the host's sign gets a SHA-256 digest, and pdfsig accepts the seal", async () => {
  const key = createPrivateKey(pki.keyPem);
  const asked: { length: number; algorithm: string }[] = [];
  const sealer = (await createSealer({
    certificate: pki.chainPem,
    async sign(digest, algorithm) {
      asked.push({ length: digest.length, algorithm });
      // What an HSM does with a digest (CKM_RSA_PKCS): PKCS#1 v1.5 over the DigestInfo of SHA-256.
      return privateEncrypt({ key, padding: constants.RSA_PKCS1_PADDING }, Buffer.concat([SHA256_DIGEST_INFO, digest]));
    },
  }))!;
  const bytes = await original('Sealed by an external key');
  const { record, document } = signedAgreement(bytes);
  const copy = await completedCopy(bytes, copyPlan(record, document, NOW), sealer);
  assert.equal(asked, [{ length: 32, algorithm: 'RSA-SHA256' }]);
  const report = pdfsig(pki, copy.bytes);
  assert.match(report, /Total document signed/);
  assert.match(report, /Signature is Valid\.[\s\S]*Certificate is Trusted\./);
});

it('a document already signed: the copy keeps its signature valid and adds the seal', async () => {
  const sealer = (await createSealer({ p12: pki.p12, password: pki.password })) as Sealer;
  const first = await sealer.seal(await original('Signed before it was sent'), 'an earlier signature', NOW);
  const { record, document } = signedAgreement(first.bytes);
  const copy = await completedCopy(first.bytes, copyPlan(record, document, NOW), sealer);
  const report = pdfsig(pki, copy.bytes);
  assert.is((report.match(/Signature is Valid\./g) ?? []).length, 2, report);
  assert.match(report, /Signature #2:[\s\S]*Total document signed/);
});

it('without a sealing key the copy is stamped, not sealed; a document that is not a PDF, or a broken one, is refused plainly', async () => {
  const bytes = await original('Stamped only');
  const { record, document } = signedAgreement(bytes);
  const copy = await completedCopy(bytes, copyPlan(record, document, NOW), null);
  assert.is(copy.level, null);
  assert.ok(pdfText(pki, copy.bytes).includes('Signatures'));
  assert.not.match(pdfsig(pki, copy.bytes), /Signature #1/);
  try {
    await completedCopy(Buffer.from('plain text, not a PDF'), copyPlan(record, document, NOW), null);
    assert.unreachable('a text file has no copy');
  } catch (error) {
    assert.match((error as Error).message, /is not a PDF/);
  }
  const broken = Buffer.concat([
    Buffer.from('%PDF-1.7\n'),
    Buffer.alloc(2000, 0x41),
    Buffer.from('\nstartxref\n99999999\n%%EOF\n'),
  ]);
  await completedCopy(broken, copyPlan(record, document, NOW), null).then(
    () => assert.unreachable('a broken PDF has no copy'),
    (error: Error) => assert.ok(error instanceof Error),
  );
});

it('sealing options are checked at start', async () => {
  await createSealer({ p12: pki.p12, password: 'wrong' }).then(
    () => assert.unreachable(),
    (error: Error) => assert.match(error.message, /sealing\.p12 could not be opened/),
  );
  await createSealer({ certificate: 'not pem', sign: async () => Buffer.alloc(0) }).then(
    () => assert.unreachable(),
    (error: Error) => assert.match(error.message, /sealing\.certificate must be PEM/),
  );
  await createSealer({ p12: pki.p12, password: pki.password, timestampUrl: 'ftp://tsa.example' }).then(
    () => assert.unreachable(),
    (error: Error) => assert.match(error.message, /timestampUrl must be an http or https URL/),
  );
});

test.run();
