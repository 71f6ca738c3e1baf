/**
 * A process killed (SIGKILL) while it makes a completed copy, at a random moment from the last
 * signature on: after a restart, the agreement has exactly one recorded copy, sealed and valid,
 * and any copy the killed attempt wrote but never recorded is named by nothing (the orphan sweep's).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { buffer } from 'node:stream/consumers';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { memoryTransport } from '../../adapters/memory/index.js';
import { signer, validFormData, REAL_PNG } from '../helpers/agreements.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { removeDir, tempDir } from '../helpers/fs-dirs.js';
import { until } from '../helpers/notifier.js';
import { type TestPki, makePki, pdfsig, pkiMissing } from '../helpers/pki.js';
import { json, startPortal } from '../helpers/server.js';
import { skipping } from '../helpers/skip.js';
import { NEVER } from '../helpers/webhooks.js';

const CHILD = fileURLToPath(new URL('../helpers/seal-crash-child.js', import.meta.url));
const RUNS = 4;

const missing = pkiMissing();
const it = missing === null ? test : skipping(test, missing);
let pki: TestPki;
test.before(() => {
  if (missing === null) pki = makePki();
});
test.after(() => pki?.close());

/** A PDF long enough that stamping and sealing it take a while: the kill has a window to land in. */
async function longPdf(): Promise<Buffer> {
  const { PDF, StandardFonts } = await import('@libpdf/core');
  const pdf = PDF.create();
  for (let n = 1; n <= 120; n++) {
    const page = pdf.addPage({ size: 'a4' });
    for (let line = 0; line < 40; line++)
      page.drawText(`Clause ${n}.${line}: the tenant keeps the flat in good order.`, {
        x: 50,
        y: 800 - line * 18,
        size: 10,
        font: StandardFonts.Helvetica,
      });
  }
  return Buffer.from(await pdf.save());
}

const adapters = (dir: string) => ({
  storage: fsStorage({ dir: path.join(dir, 'records') }),
  blobs: fsBlobs({ dir: path.join(dir, 'blobs') }),
});

it(`killed while making the copy, ${RUNS} times at random moments: after a restart, exactly one copy, sealed`, async () => {
  const pdf = await longPdf();
  const outcomes: string[] = [];
  for (let run = 0; run < RUNS; run++) {
    const dir = tempDir('seal-crash');
    try {
      const first = await startPortal({
        ...adapters(dir),
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
        transport: memoryTransport(),
      });
      const agreement = await json(
        await first.api('/agreements', {
          method: 'POST',
          body: validFormData({ signers: [signer(1)], documents: [{ name: 'lease.pdf', bytes: pdf }] }),
        }),
      );
      await first.close();

      const p12 = path.join(pki.dir, 'seal.p12');
      const child = spawn(
        process.execPath,
        [CHILD, dir, agreement.id, agreement.signers[0].id, p12, pki.password, REAL_PNG],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        child.on('exit', (_code, signal) => resolve(signal)),
      );
      await new Promise<void>((resolve, reject) => {
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => chunk.includes('signed') && resolve());
        child.on('exit', () => reject(new Error(`the child ended before signing: ${stderr}`)));
      });
      // Spread over the making: at once, while stamping, while sealing, while recording, after.
      await new Promise((resolve) => setTimeout(resolve, (run / (RUNS - 1)) * 1500 + Math.random() * 100));
      child.kill('SIGKILL');
      assert.is(await exited, 'SIGKILL', stderr);

      // The restart: a claim the killed process held runs out after 10 minutes; this clock is past it.
      const { storage, blobs } = adapters(dir);
      const later = () => new Date(Date.now() + 11 * 60_000);
      const second = await startPortal({
        storage,
        blobs,
        clock: later,
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
        transport: memoryTransport(),
        sealing: { p12: pki.p12, password: pki.password },
      });
      try {
        const before = await second.portal.agreements.get('acct_a', agreement.id);
        outcomes.push(before!.documents[0]!.signedFileHash === null ? 'owed' : 'made before the kill');
        await until(
          async () => {
            await second.portal.worker!.tick();
            return (await second.portal.agreements.get('acct_a', agreement.id))!.documents[0]!.signedFileHash !== null;
          },
          'the copy after the restart',
          30_000,
        );
        const record = (await storage.getAgreement('acct_a', agreement.id))!;
        assert.is(record.completion, null, 'nothing more is owed');
        const key = record.documents[0]!.signedFileKey!;
        const copy = await buffer((await blobs.get(key))!);
        assert.match(pdfsig(pki, copy), /Total document signed[\s\S]*Signature is Valid\./);
        const copies: string[] = [];
        for await (const info of blobs.listBefore('9999-12-31T23:59:59+00:00'))
          if (info.key.startsWith('agx_')) copies.push(info.key);
        const named = [];
        for (const one of copies) if (await storage.isBlobReferenced(one)) named.push(one);
        assert.equal(named, [key], 'one copy is named; any other is an orphan');
      } finally {
        await second.close();
      }
    } finally {
      removeDir(dir);
    }
  }
  console.log(`  seal crash: ${outcomes.join(', ')}`);
  assert.ok(outcomes.includes('owed'), 'at least one kill landed before the copy was recorded');
});

test.run();
