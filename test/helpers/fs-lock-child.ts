/**
 * A second process for the lock tests: `node fs-lock-child.js <storage|blobs> <dir> <try|hold>`.
 * `try` opens the store, closes it and prints `{"ok":true}`, or prints the error, and exits; `hold` opens it,
 * writes one record (or blob), prints `{"ready":true,"id":…}` and waits to be killed.
 */
import { Readable } from 'node:stream';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { webhookRecord } from '../conformance/fixtures.js';

const [kind, dir, mode] = process.argv.slice(2) as ['storage' | 'blobs', string, 'try' | 'hold'];
const storage = kind === 'storage' ? fsStorage({ dir }) : undefined;
const blobs = kind === 'blobs' ? fsBlobs({ dir }) : undefined;
const store = storage ?? blobs!;
const print = (line: object) => process.stdout.write(JSON.stringify(line) + '\n');

try {
  await store.open!();
} catch (error) {
  print({ name: (error as Error).name, message: (error as Error).message });
  process.exit(0);
}
if (mode === 'try') {
  // Closed before the word: whoever reads it may remove the directory at once.
  await store.close!();
  print({ ok: true });
} else {
  const webhook = webhookRecord();
  if (storage) await storage.insertWebhook(webhook);
  else await blobs!.put('fsf_held', Readable.from([Buffer.from('held')]));
  print({ ready: true, id: storage ? webhook.id : 'fsf_held', pid: process.pid });
  setInterval(() => {}, 60_000);
}
