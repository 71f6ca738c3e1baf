import { createHash } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryTransport } from '../../adapters/memory/index.js';
import { sqlAdapters } from '../../adapters/sql/index.js';
import type { BlobStore, PortalOptions } from '../../src/index.js';
import { signer, simplePdf, validFormData, REAL_PNG } from '../helpers/agreements.js';
import { openBackends } from '../helpers/backends.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { recordingNotifier, until } from '../helpers/notifier.js';
import { type TestPki, makePki, pdfText, pdfsig, pkiMissing, startTsa } from '../helpers/pki.js';
import { type TestPortal, json, startPortal } from '../helpers/server.js';
import { softHsmKey, softHsmMissing } from '../helpers/softhsm.js';
import { connectPostgres, dropSchema, freshSchema } from '../helpers/sql.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';

/**
 * Completed copies on every adapter: once the last signer signs, each PDF document gets a sealed
 * copy (pdfsig: valid, trusted, the whole file), kept and served through /signed, its hash on the
 * document; a document that is not a PDF has none; the certificate is sealed too; the completion
 * mail carries the copies. Two instances ticking at once make each copy once.
 */
const missing = pkiMissing();
const { list: backends, close } = await openBackends('completed copies', { s3: true });
const suites: ReturnType<typeof suite>[] = [];
let pki: TestPki | undefined;

async function signedAgreement(app: TestPortal) {
  const pdf = await simplePdf('The lease of the flat at Lindenstrasse 5');
  const form = validFormData({
    signers: [signer(1), signer(2)],
    documents: [
      { name: 'lease.pdf', bytes: pdf },
      { name: 'notes.txt', bytes: Buffer.from('not a PDF') },
    ],
  });
  const created = await app.api('/agreements', { method: 'POST', body: form });
  assert.is(created.status, 201);
  const agreement = await json(created);
  const early = await app.api(`/agreements/${agreement.id}/documents/${agreement.documents[0].id}/signed`);
  assert.is(early.status, 409, 'no copy while the agreement awaits signatures');
  // A link made before: the signer reads the agreement through it once it is complete.
  const made = await app.api(`/agreements/${agreement.id}/signers/${agreement.signers[0].id}/signing-link`, {
    method: 'POST',
  });
  const token = new URL((await json(made)).link).hash.slice(1);
  for (const one of agreement.signers)
    await app.portal.agreements.sign('acct_a', agreement.id, one.id, { signature: REAL_PNG });
  return { agreement, pdf, token };
}

for (const backend of backends) {
  const on = suite(`completed copies: ${backend.name}`);
  suites.push(on);

  on(
    'the last signature: a sealed copy of each PDF (B-T), kept and served; none for a text file; the certificate sealed; the copies mailed',
    async () => {
      if (missing !== null) return void console.log(`  skipped: ${missing}`);
      const { options, cleanup, dump } = await backend.options();
      const tsa = await startTsa(pki!);
      const notifier = recordingNotifier();
      const app = await startPortal({
        ...options,
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
        transport: memoryTransport(),
        notifier,
        sealing: { p12: pki!.p12, password: pki!.password, timestampUrl: tsa.url },
      });
      try {
        const { agreement, pdf, token } = await signedAgreement(app);
        const read = async () => json(await app.api(`/agreements/${agreement.id}`));
        await until(async () => (await read()).documents[0].signedFileHash !== null, 'the completed copy', 15_000);
        const [leaseDoc, notes] = (await read()).documents;
        assert.is(notes.signedFileHash, null, 'a text file has no copy');
        assert.is((await app.api(`/agreements/${agreement.id}/documents/${notes.id}/signed`)).status, 409);
        const linked = await app.api(`/agreements/${agreement.id}/documents/${leaseDoc.id}/signed`);
        assert.is(linked.status, 200);
        const download = await fetch((await json(linked)).link);
        assert.is(download.status, 200);
        assert.is(download.headers.get('content-type'), 'application/pdf');
        assert.match(download.headers.get('content-disposition') ?? '', /lease-signed\.pdf/);
        const copy = Buffer.from(await download.arrayBuffer());
        assert.is(
          createHash('sha256').update(copy).digest('hex'),
          leaseDoc.signedFileHash,
          'signedFileHash is the served bytes',
        );
        assert.ok(copy.subarray(0, pdf.length).equals(pdf), 'the original is the prefix of the copy');
        const report = pdfsig(pki!, copy);
        assert.match(report, /Signature is Valid\./);
        assert.match(report, /Certificate is Trusted\./);
        assert.match(report, /Total document signed/);
        assert.ok(tsa.stamped >= 1, 'timestamped');
        const text = pdfText(pki!, copy).replace(/\s+/g, ' ');
        assert.ok(text.includes('Lindenstrasse 5') && text.includes('Signer1 Lee') && text.includes('Signer2 Lee'));

        const view = await json(
          await fetch(`${app.url}/v1/signing`, { headers: { authorization: `Bearer ${token}` } }),
        );
        assert.is(view.documents[1].signedLink, null, 'the signer: no copy of the text file');
        const signerCopy = Buffer.from(await (await fetch(view.documents[0].signedLink)).arrayBuffer());
        assert.ok(signerCopy.equals(copy), 'the signer downloads the same completed copy');

        const certificate = Buffer.from(await (await app.api(`/agreements/${agreement.id}/certificate`)).arrayBuffer());
        assert.match(pdfsig(pki!, certificate), /Signature is Valid\.[\s\S]*Certificate is Trusted\./);

        await until(
          () => notifier.sent.filter((mail) => mail.kind === 'agreement-completed').length === 2,
          'the completion mails',
        );
        const mail = notifier.sent.find((one) => one.kind === 'agreement-completed')!;
        assert.equal(
          mail.attachments!.map((one) => one.filename),
          [`certificate-${agreement.id}.pdf`, 'lease-signed.pdf'],
        );
        assert.ok(mail.attachments![1]!.content.equals(copy), 'the copy itself');
        assert.ok((await dump()).includes(leaseDoc.signedFileHash));
      } finally {
        await app.close();
        await tsa.close();
        await cleanup();
      }
    },
  );

  on(
    'no sealing key: the copy is stamped, not sealed; a timestamp authority that is down: B-B and sealing.degraded',
    async () => {
      if (missing !== null) return void console.log(`  skipped: ${missing}`);
      const { options, cleanup } = await backend.options();
      const base: PortalOptions = {
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
        transport: memoryTransport(),
      };
      const stamped = await startPortal({ ...options, ...base });
      try {
        const { agreement } = await signedAgreement(stamped);
        await until(
          async () =>
            (await json(await stamped.api(`/agreements/${agreement.id}`))).documents[0].signedFileHash !== null,
          'the stamped copy',
          15_000,
        );
        const link = await json(
          await stamped.api(`/agreements/${agreement.id}/documents/${agreement.documents[0].id}/signed`),
        );
        const copy = Buffer.from(await (await fetch(link.link)).arrayBuffer());
        assert.not.match(pdfsig(pki!, copy), /Signature #1/);
        assert.ok(pdfText(pki!, copy).includes('Signatures'));
      } finally {
        await stamped.close();
      }
      await cleanup();
      const again = await backend.options();
      const degraded: unknown[] = [];
      const down = await startPortal({
        ...again.options,
        ...base,
        sealing: { p12: pki!.p12, password: pki!.password, timestampUrl: 'http://127.0.0.1:9/tsa' },
      });
      down.portal.on('sealing.degraded', (event) => void degraded.push(event));
      try {
        const { agreement } = await signedAgreement(down);
        await until(
          async () => (await json(await down.api(`/agreements/${agreement.id}`))).documents[0].signedFileHash !== null,
          'the B-B copy',
          15_000,
        );
        assert.is(degraded.length, 1);
        assert.equal((degraded[0] as { documentId: string }).documentId, agreement.documents[0].id);
      } finally {
        await down.close();
        await again.cleanup();
      }
    },
  );
}

const instances = suite('completed copies: two instances on one PostgreSQL');
instances('ticking at the same moment, two instances make each copy once', async () => {
  if (missing !== null) return void console.log(`  skipped: ${missing}`);
  const postgres = await connectPostgres();
  if (postgres.pool === undefined) return void console.log(`  skipped: ${postgres.reason}`);
  const schema = freshSchema();
  const time = manualClock();
  const shared = {
    signingKeys: [SIGNING_KEY_1],
    webhooks: { tick: NEVER },
    transport: memoryTransport(),
    clock: time.clock,
    sealing: { p12: pki!.p12, password: pki!.password },
  };
  // The first portal's kick after each signature races the two ticks below: whoever claims first
  // makes a copy, and the others find nothing owed or lose the final update and discard theirs.
  const one = await startPortal({ ...sqlAdapters({ client: postgres.pool, schema }), ...shared });
  const two = await startPortal({ ...sqlAdapters({ client: postgres.pool, schema }), ...shared });
  try {
    const agreements: { id: string }[] = [];
    for (let i = 0; i < 3; i++) agreements.push((await signedAgreement(one)).agreement);
    await Promise.all([
      one.portal.worker!.tick(),
      two.portal.worker!.tick(),
      one.portal.worker!.tick(),
      two.portal.worker!.tick(),
    ]);
    await until(
      async () => {
        for (const agreement of agreements) {
          if ((await one.portal.agreements.get('acct_a', agreement.id))!.documents[0]!.signedFileHash === null)
            return false;
        }
        return true;
      },
      'every copy',
      20_000,
    );
    const keys = await postgres.pool.query(
      `SELECT count(*)::int AS n FROM "${schema}".portal_agreement_documents WHERE signed_file_key IS NOT NULL`,
    );
    assert.is(keys.rows[0].n, 3, 'one copy recorded per PDF');
    // Every copy blob the store holds is one a document names: the losers deleted theirs.
    await one.portal.worker!.tick();
    const blobs = await postgres.pool.query(
      `SELECT count(*)::int AS n FROM "${schema}".portal_blobs WHERE starts_with(key, 'agx_')`,
    );
    assert.is(blobs.rows[0].n, 3, 'no stray copy kept');
  } finally {
    await one.close();
    await two.close();
    await dropSchema(postgres.pool, schema);
    await postgres.pool.end();
  }
});

const linked = suite('completed copies: a completion mail too big to carry them');
linked(
  'copies over 10 MiB with the certificate are linked in the mail, each link serving the copy for 7 days',
  async () => {
    if (missing !== null) return void console.log(`  skipped: ${missing}`);
    // The documents of one agreement are 5 MiB at most: a store that says each copy is 11 MiB stands in for a large one.
    const inner = memoryBlobs();
    const blobs: BlobStore = {
      ...inner,
      stat: async (key) => {
        const info = await inner.stat(key);
        return info !== null && key.startsWith('agx_') ? { ...info, size: 11 * 1024 * 1024 } : info;
      },
    };
    const notifier = recordingNotifier();
    const app = await startPortal({
      blobs,
      signingKeys: [SIGNING_KEY_1],
      webhooks: { tick: NEVER },
      transport: memoryTransport(),
      notifier,
      publicUrl: 'http://127.0.0.1:1/v1',
    });
    try {
      const { agreement } = await signedAgreement(app);
      await until(
        () => notifier.sent.filter((mail) => mail.kind === 'agreement-completed').length === 2,
        'the completion mails',
        20_000,
      );
      const mail = notifier.sent.find((one) => one.kind === 'agreement-completed')!;
      assert.equal(
        mail.attachments!.map((one) => one.filename),
        [`certificate-${agreement.id}.pdf`],
        'only the certificate rides along',
      );
      assert.match(mail.text, /over 10 MiB together, so they are linked instead/);
      const link = /lease-signed\.pdf: (\S+)/.exec(mail.text)?.[1];
      assert.ok(link !== undefined, mail.text);
      const served = await fetch(link!.replace('http://127.0.0.1:1', app.url));
      assert.is(served.status, 200);
      assert.match(served.headers.get('content-disposition') ?? '', /lease-signed\.pdf/, 'the link serves the copy');
      // Its bytes are fewer than the 11 MiB this store claims: the body is not read.
      await served.body?.cancel();
      const until7 = /serve until (\S+):/.exec(mail.text)![1]!;
      assert.ok(Math.abs(Date.parse(until7) - Date.now() - 7 * 24 * 3600_000) < 120_000, 'a week');
    } finally {
      await app.close();
    }
  },
);

const token = suite('completed copies: a key on a PKCS#11 token (SoftHSM2)');
token('the token signs each seal through sealing.sign; pdfsig: valid, trusted, the whole file', async () => {
  const absent = missing ?? softHsmMissing();
  if (absent !== null) return void console.log(`  skipped: ${absent}`);
  const hsm = softHsmKey(pki!.keyPem);
  const app = await startPortal({
    signingKeys: [SIGNING_KEY_1],
    webhooks: { tick: NEVER },
    transport: memoryTransport(),
    sealing: { certificate: pki!.chainPem, sign: hsm.sign },
  });
  try {
    const { agreement, pdf } = await signedAgreement(app);
    await until(
      async () => (await json(await app.api(`/agreements/${agreement.id}`))).documents[0].signedFileHash !== null,
      'the sealed copy',
      20_000,
    );
    const link = await json(await app.api(`/agreements/${agreement.id}/documents/${agreement.documents[0].id}/signed`));
    const copy = Buffer.from(await (await fetch(link.link)).arrayBuffer());
    assert.ok(copy.subarray(0, pdf.length).equals(pdf));
    const report = pdfsig(pki!, copy);
    assert.match(report, /Total document signed/, report);
    assert.match(report, /Signature is Valid\./, report);
    assert.match(report, /Certificate is Trusted\./, report);
    assert.match(report, /Signer Certificate Common Name: Portal Seal/);
    assert.ok(hsm.signatures >= 1, 'the token made the signature');
    const certificate = Buffer.from(await (await app.api(`/agreements/${agreement.id}/certificate`)).arrayBuffer());
    assert.match(pdfsig(pki!, certificate), /Signature is Valid\./, 'the certificate is sealed by the token too');
  } finally {
    await app.close();
    hsm.close();
  }
});

const setup = suite('completed copies: setup');
setup.before(() => {
  if (missing === null) pki = makePki();
  else console.log(`SKIP completed copies: ${missing}`);
});
setup('the test PKI is made', () => {
  if (missing === null) assert.ok(pki!.p12.length > 0);
});
setup.run();
for (const one of suites) one.run();
linked.run();
token.run();
instances.after(async () => {
  pki?.close();
  await close();
});
instances.run();
