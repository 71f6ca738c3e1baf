/**
 * A portal on the fs adapters in `dir` that signs for the last signer of an agreement, so that its
 * completed copy is made at once in this process, and prints `signed` when the signature is stored:
 * the parent kills it with SIGKILL while the copy is being stamped, sealed or recorded
 * (test/adapters/seal-crash.test.ts).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { memoryTransport } from '../../adapters/memory/index.js';
import { createPortal } from '../../src/index.js';
import { SIGNING_KEY_1 } from './download.js';
import { NEVER } from './webhooks.js';

const [dir, agreementId, signerId, p12Path, password, signature] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
];
const portal = await createPortal({
  storage: fsStorage({ dir: path.join(dir, 'records') }),
  blobs: fsBlobs({ dir: path.join(dir, 'blobs') }),
  auth: { apiKeys: { 'key-of-the-crash-child': 'acct_a' } },
  signingKeys: [SIGNING_KEY_1],
  webhooks: { tick: NEVER },
  transport: memoryTransport(),
  sealing: { p12: readFileSync(p12Path), password },
});
await portal.agreements.sign('acct_a', agreementId, signerId, { signature });
process.stdout.write('signed\n');
// The copy is being made; the parent kills this process at a moment of its choosing.
setInterval(() => {}, 1000);
