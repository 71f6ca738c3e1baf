import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SIGNER, signer, validFormData, REAL_PNG } from '../helpers/agreements.js';
import { memoryBlobs, memoryStorage } from '../../adapters/memory/index.js';
import { certificateKey } from '../../src/domain/certificates.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { HOSTILE_IMAGES } from '../helpers/hostile-images.js';
import { type TestPortal, json, withPortal } from '../helpers/server.js';
import { NEVER, waitFor } from '../helpers/webhooks.js';
import { recordingNotifier, until } from '../helpers/notifier.js';

/** A real 1×1 PNG: the certificate draws signature images, so a test image must decode. */

const pdftotext = spawnSync('pdftotext', ['-v'], { stdio: 'ignore' }).error === undefined;
const reason = "pdftotext (Debian's poppler-utils) is not installed to read the certificate back";

/** The certificate's text, as pdftotext reads it. */
function textOf(pdf: Buffer): string {
  const dir = mkdtempSync(join(tmpdir(), 'portal-certificate-'));
  try {
    writeFileSync(join(dir, 'c.pdf'), pdf);
    return execFileSync('pdftotext', ['-layout', join(dir, 'c.pdf'), '-'], { encoding: 'utf8' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function signThrough(
  app: TestPortal,
  agreementId: string,
  signerId: string,
  path: '/sign' | '/decline',
  body: object,
) {
  const made = await json(
    await app.api(`/agreements/${agreementId}/signers/${signerId}/signing-link`, { method: 'POST' }),
  );
  const token = new URL(made.link).hash.slice(1);
  const res = await fetch(`${app.url}/v1/signing${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'user-agent': 'Certificate-Test/1.0',
    },
    body: JSON.stringify(body),
  });
  assert.is(res.status, 200, await res.clone().text());
}

test('the certificate of completion: 409 while open; once signed, a PDF with the agreement, documents, signers and trail', async () => {
  if (!pdftotext) return void console.log(`  skipped: ${reason}`);
  await withPortal({ signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
    const form = validFormData({ signers: [SIGNER, signer(2)] });
    form.set('name', 'Lease Lindenstraße 2026');
    const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
    const open = await app.api(`/agreements/${agreement.id}/certificate`);
    assert.is(open.status, 409);
    assert.match((await json(open)).message, /still awaiting signatures/);

    for (const one of agreement.signers) await signThrough(app, agreement.id, one.id, '/sign', { signature: REAL_PNG });
    const res = await app.api(`/agreements/${agreement.id}/certificate`);
    assert.is(res.status, 200);
    assert.is(res.headers.get('content-type'), 'application/pdf');
    assert.is(res.headers.get('content-disposition'), `attachment; filename="certificate-${agreement.id}.pdf"`);
    const pdf = Buffer.from(await res.arrayBuffer());
    assert.is(pdf.subarray(0, 5).toString(), '%PDF-');
    assert.ok(
      (pdf.toString('latin1').match(/\/Subtype \/Image/g) ?? []).length >= 3,
      "the signers' and the sender's signatures drawn",
    );
    const text = textOf(pdf);
    const stored = (await app.portal.agreements.get('acct_a', agreement.id))!;
    const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
    const expected = [
      'Certificate of completion',
      'Lease Lindenstraße 2026',
      'signed by every signer',
      agreement.documents[0].documentName,
      `${agreement.documents[0].fileSize} bytes`,
      agreement.documents[0].fileHash,
      ...stored.signers.flatMap((one) => [`${one.firstName} ${one.lastName}`, one.email, `signed at ${one.signedAt}`]),
      '127.0.0.1, Certificate-Test/1.0',
      audit.data.at(-1).hash,
      'verified',
      stored.signerSignatureHash,
      `by ${stored.signers[0]!.firstName} ${stored.signers[0]!.lastName} (${stored.signers[0]!.id})`,
      'by the sender (account:acct_a)',
    ];
    for (const value of expected) assert.ok(text.includes(value), `the certificate shows ${value}`);
    for (const entry of audit.data) assert.ok(text.includes(entry.hash), `entry ${entry.action} and its hash`);
  });
});

test("a declined agreement has a certificate too, with the reason; another account's is a 404", async () => {
  if (!pdftotext) return void console.log(`  skipped: ${reason}`);
  await withPortal({ signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await json(await app.api('/agreements', { method: 'POST', body: validFormData() }));
    await signThrough(app, agreement.id, agreement.signers[0].id, '/decline', { reason: 'The rent is too high.' });
    const res = await app.api(`/agreements/${agreement.id}/certificate`);
    assert.is(res.status, 200);
    const text = textOf(Buffer.from(await res.arrayBuffer()));
    for (const value of ['closed, declined', 'The rent is too high.', 'declined at'])
      assert.ok(text.includes(value), value);
    assert.is(
      (
        await app.api(`/agreements/${agreement.id}/certificate`, {
          headers: { authorization: 'Bearer key-of-account-b' },
        })
      ).status,
      404,
    );
    assert.is((await app.api('/agreements/nope/certificate')).status, 404);
  });
});

test('a hostile image stored by an earlier version is never handed to the PDF library: the certificate is made, the process lives', async () => {
  if (!pdftotext) return void console.log(`  skipped: ${reason}`);
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  await withPortal({ storage, blobs, signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await json(
      await app.api('/agreements', { method: 'POST', body: validFormData({ signers: [SIGNER, signer(2)] }) }),
    );
    for (const one of agreement.signers) await signThrough(app, agreement.id, one.id, '/sign', { signature: REAL_PNG });
    // What the signature check let through before images were redrawn: a 73-byte PNG whose data is not zlib, and a 3000 × 3000 bomb.
    const [garbled, bomb] = [HOSTILE_IMAGES[0]![1], HOSTILE_IMAGES[2]![1]];
    await storage.updateAgreement('acct_a', agreement.id, (current) => ({
      agreement: {
        ...current,
        signers: current.signers.map((one, index) => ({ ...one, signature: index === 0 ? garbled : bomb })),
      },
      events: [],
    }));
    // An earlier version kept no certificate: this one is made at the request, from the stored images.
    await waitFor(
      async () => (await blobs.stat(certificateKey(agreement.id))) !== null,
      'the certificate made as the agreement closed',
    );
    await blobs.delete(certificateKey(agreement.id));
    const before = process.memoryUsage().rss;
    const res = await app.api(`/agreements/${agreement.id}/certificate`);
    assert.is(res.status, 200);
    const text = textOf(Buffer.from(await res.arrayBuffer()));
    assert.is(text.match(/the signature image could not be read/g)?.length, 2, 'neither image is drawn');
    assert.ok(process.memoryUsage().rss - before < 100 * 1024 * 1024, 'the bomb was not inflated');
  });
});

test('the certificate is made once, as the agreement closes, and kept: a request reads it, never makes another', async () => {
  const blobs = memoryBlobs();
  await withPortal({ blobs, signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await json(
      await app.api('/agreements', { method: 'POST', body: validFormData({ signers: [SIGNER] }) }),
    );
    assert.is(await blobs.stat(certificateKey(agreement.id)), null, 'none while it is open');
    await signThrough(app, agreement.id, agreement.signers[0].id, '/sign', { signature: REAL_PNG });
    await waitFor(
      async () => (await blobs.stat(certificateKey(agreement.id))) !== null,
      'the certificate kept as the agreement closed',
    );
    const kept = await blobs.get(certificateKey(agreement.id));
    const bytes = Buffer.concat(await kept!.toArray());
    const answers = await Promise.all(
      [1, 2, 3].map(async () =>
        Buffer.from(await (await app.api(`/agreements/${agreement.id}/certificate`)).arrayBuffer()),
      ),
    );
    for (const answer of answers) assert.ok(answer.equals(bytes), 'each request serves the kept bytes');
  });
});

test("a portal closed right after the last signature still keeps the agreement's certificate: close waits for its making", async () => {
  const blobs = memoryBlobs();
  let agreementId = '';
  await withPortal({ blobs, signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await json(
      await app.api('/agreements', { method: 'POST', body: validFormData({ signers: [SIGNER] }) }),
    );
    agreementId = agreement.id;
    await signThrough(app, agreement.id, agreement.signers[0].id, '/sign', { signature: REAL_PNG });
  });
  assert.ok(await blobs.stat(certificateKey(agreementId)), 'kept before close resolved');
});

test('the PDF library is imported only when the first PDF is made (a certificate, a completed copy), by pdf-layout alone', () => {
  // Megabytes of heap that every collection of the process would mark again.
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const importers = readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.js') && (file.startsWith('src/') || file.startsWith('adapters/')))
    .filter((file) =>
      /\bfrom ['"]@libpdf\/core['"]|\bimport ['"]@libpdf\/core['"]|require\(['"]@libpdf\/core['"]\)/.test(
        readFileSync(join(root, file), 'utf8'),
      ),
    );
  assert.equal(importers, [], 'no module loads @libpdf/core when it is loaded');
  assert.match(readFileSync(join(root, 'src/domain/pdf-layout.js'), 'utf8'), "import('@libpdf/core')");
});

test("the certificate shows each signer's identification: the method and the time", async () => {
  if (!pdftotext) return void console.log(`  skipped: ${reason}`);
  await withPortal({ signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await json(
      await app.api('/agreements', {
        method: 'POST',
        body: validFormData({ signers: [{ ...SIGNER, shouldIdentify: true }, signer(2)] }),
      }),
    );
    const [first, second] = agreement.signers;
    const link = await json(
      await app.api(`/agreements/${agreement.id}/signers/${first.id}/signing-link`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ accessCode: 'tide-pool-88' }),
      }),
    );
    const token = new URL(link.link).hash.slice(1);
    const asFirst = (path: string, body: object) =>
      fetch(`${app.url}/v1/signing${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const identified = await json(await asFirst('/identify', { code: 'tide-pool-88' }));
    assert.is(
      (await asFirst('/sign', { signature: REAL_PNG, consent: { disclosureVersion: identified.disclosure.version } }))
        .status,
      200,
    );
    await signThrough(app, agreement.id, second.id, '/sign', { signature: REAL_PNG });
    const text = textOf(Buffer.from(await (await app.api(`/agreements/${agreement.id}/certificate`)).arrayBuffer()));
    const flat = text.replace(/\s+/g, ' ');
    assert.ok(
      flat.includes(`by an access code the sender gave the signer, at ${identified.identification.at}`),
      'the method and time of the first',
    );
    assert.ok(flat.includes('none required (the signing link alone)'), 'the second needed none');
    assert.ok(flat.includes('consented to sign electronically'), 'the consent, in the trail');
    assert.not.ok(text.includes('tide-pool-88'), 'never the code');
  });
});

test("a French agreement under a company's branding: the mails, the disclosure and the certificate in French, the company named", async () => {
  if (!pdftotext) return void console.log(`  skipped: ${reason}`);
  const notifier = recordingNotifier();
  await withPortal(
    {
      signingKeys: [SIGNING_KEY_1],
      webhooks: { tick: NEVER },
      notifier,
      publicUrl: 'https://portal.example',
      branding: { name: 'Maison Dupont', supportEmail: 'aide@dupont.example', logoUrl: REAL_PNG },
    },
    async (app) => {
      const form = validFormData({ signers: [SIGNER] });
      form.set('name', 'Bail 2026');
      form.append('locale', 'fr');
      const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
      const made = await app.api(`/agreements/${agreement.id}/signers/${agreement.signers[0].id}/signing-link`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ send: true }),
      });
      assert.is(made.status, 201);
      await until(() => notifier.sent.some((mail) => mail.kind === 'signing-invitation'), 'the invitation');
      const invitation = notifier.sent.find((mail) => mail.kind === 'signing-invitation')!;
      assert.is(invitation.subject, 'Maison Dupont vous demande de signer « Bail 2026 »');
      assert.match(invitation.text, /^Bonjour Bo Lee,/);
      assert.match(invitation.text, /Le lien fonctionne jusqu’au \d+ \p{L}+ \d{4}/u);
      assert.match(invitation.text, /Une question \? Écrivez à aide@dupont\.example\./);

      const token = new URL((await json(made)).link).hash.slice(1);
      const view = await json(await fetch(`${app.url}/v1/signing`, { headers: { authorization: `Bearer ${token}` } }));
      assert.is(view.disclosure.version, '2026-12-05-fr');
      assert.match(view.disclosure.text, /^Vous acceptez de signer électroniquement\./);
      const signed = await fetch(`${app.url}/v1/signing/sign`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ signature: REAL_PNG, consent: { disclosureVersion: '2026-12-05' } }),
      });
      assert.is(signed.status, 409, 'the English disclosure is not the one shown');
      const accepted = await fetch(`${app.url}/v1/signing/sign`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ signature: REAL_PNG, consent: { disclosureVersion: '2026-12-05-fr' } }),
      });
      assert.is(accepted.status, 200);

      await until(
        () => notifier.sent.some((mail) => mail.kind === 'agreement-completed'),
        'the completion mail',
        20_000,
      );
      const completed = notifier.sent.find((mail) => mail.kind === 'agreement-completed')!;
      assert.is(completed.subject, '« Bail 2026 » est signé');
      const text = textOf(completed.attachments![0]!.content);
      for (const expected of [
        'Maison Dupont',
        'Certificat d’achèvement',
        'Contrat',
        'signé par tous les signataires',
        'Signataires',
        'Piste d’audit',
        'consentement à la signature électronique',
        'vérifiée : chaque entrée',
      ])
        assert.ok(text.includes(expected), `the certificate says "${expected}"\n${text}`);
    },
  );
});

test.run();
