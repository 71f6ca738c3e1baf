import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { KEY_A, withPortal } from '../helpers/server.js';
import { PNG_SIGNATURE, SIGNER, documentBytes, sha256, signer, trackedAdapters } from '../helpers/agreements.js';

const curlFound = spawnSync('curl', ['--version']).status === 0;
const curlTest = curlFound ? test : test.skip;
if (!curlFound) console.log('agreements-curl: skipping every test: curl is not on PATH (.ci/run installs it).');

/** Runs curl, resolving the status code and body it printed (`-w` puts the status on the last line). */
function curl(args: string[]): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      'curl',
      ['-sS', '-w', '\n%{http_code}', ...args],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`curl failed: ${stderr || error.message}`));
        const cut = stdout.lastIndexOf('\n');
        resolve({ status: Number(stdout.slice(cut + 1)), body: stdout.slice(0, cut) });
      },
    );
  });
}

async function withFiles(files: Record<string, string | Buffer>, body: (dir: string) => Promise<void>) {
  const dir = await mkdtemp(join(tmpdir(), 'agreements-curl-'));
  try {
    for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), content);
    await body(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

curlTest('curl -F: the README example creates the agreement, hashes match the files', async () => {
  await withPortal(async (app) => {
    const lease = documentBytes(1_500_000, 4);
    const annex = documentBytes(12_345, 5);
    await withFiles({ 'lease.pdf': lease, 'annex.pdf': annex, 'signature.txt': PNG_SIGNATURE }, async (dir) => {
      const res = await curl([
        '-H',
        `Authorization: Bearer ${KEY_A}`,
        '-F',
        'name=Lease 2026',
        '-F',
        'signerName=Ann Owner',
        '-F',
        `signerSignatureData=<${join(dir, 'signature.txt')}`,
        '-F',
        `signers=${JSON.stringify(SIGNER)};type=application/json`,
        '-F',
        `signers=${JSON.stringify(signer(2))};type=application/json`,
        '-F',
        `documents=@${join(dir, 'lease.pdf')};type=application/pdf`,
        '-F',
        `documents=@${join(dir, 'annex.pdf')}`,
        `${app.url}/v1/agreements`,
      ]);
      assert.is(res.status, 201, res.body);
      const body = JSON.parse(res.body);
      assert.is(body.name, 'Lease 2026');
      assert.is(body.signerSignature, PNG_SIGNATURE);
      assert.equal(
        body.signers.map((item: any) => item.email),
        ['bo@example.com', 's2@example.com'],
      );
      assert.equal(
        body.documents.map((document: any) => [document.documentName, document.fileSize, document.fileHash]),
        [
          ['lease.pdf', lease.length, sha256(lease)],
          ['annex.pdf', annex.length, sha256(annex)],
        ],
      );
    });
  });
});

curlTest('curl -F with documents over 5 MiB: 413 (curl sends Expect: 100-continue), and no blob is left', async () => {
  const tracked = trackedAdapters();
  await withPortal({ storage: tracked.storage, blobs: tracked.blobs }, async (app) => {
    await withFiles(
      { 'a.bin': documentBytes(3 * 1024 * 1024), 'b.bin': documentBytes(2 * 1024 * 1024 + 1, 2) },
      async (dir) => {
        const res = await curl([
          '-H',
          `Authorization: Bearer ${KEY_A}`,
          '-F',
          'name=Too big',
          '-F',
          'signerName=Ann Owner',
          // Unquoted, curl would read `;base64,…` as a part parameter and cut the value there.
          '-F',
          `signerSignatureData="${PNG_SIGNATURE}"`,
          '-F',
          `signers=${JSON.stringify(SIGNER)}`,
          '-F',
          `documents=@${join(dir, 'a.bin')}`,
          '-F',
          `documents=@${join(dir, 'b.bin')}`,
          `${app.url}/v1/agreements`,
        ]);
        assert.is(res.status, 413, res.body);
        assert.match(JSON.parse(res.body).message, '5 MiB');
      },
    );
    assert.equal(await tracked.blobKeys(), []);
    assert.is(tracked.inserted.length, 0);
  });
});

curlTest('curl -F with an unknown part: 400 naming it', async () => {
  await withPortal(async (app) => {
    const res = await curl([
      '-H',
      `Authorization: Bearer ${KEY_A}`,
      '-F',
      'name=x',
      '-F',
      'title=y',
      `${app.url}/v1/agreements`,
    ]);
    assert.is(res.status, 400);
    assert.match(JSON.parse(res.body).message, 'Unknown part "title"');
  });
});

test.run();
