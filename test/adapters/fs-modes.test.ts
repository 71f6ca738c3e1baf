import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { writeFileAtomically } from '../../adapters/fs/durable.js';
import { webhookRecord } from '../conformance/fixtures.js';
import { removeDir, tempDir } from '../helpers/fs-dirs.js';

/**
 * The record log holds every webhook secret in clear, and blobs are the tenants' files: with the usual
 * umask (022) they were 0644, readable by every local user. Directories the fs adapters create are
 * 0700, files (record log, blobs, lock, temp files) 0600.
 */
const modeOf = async (file: string) => (await stat(file)).mode & 0o777;

/** Every entry under `dir`, directories first, with its permission bits. */
async function modesUnder(dir: string): Promise<Map<string, number>> {
  const modes = new Map<string, number>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name);
    modes.set(path.relative(dir, full), await modeOf(full));
  }
  return modes;
}

test('fs adapters: the directories they create are 0700, the files 0600, under the usual umask', async () => {
  const previous = process.umask(0o022);
  const root = tempDir('modes');
  try {
    const dir = path.join(root, 'data', 'store');
    const storage = fsStorage({ dir, compactAfterBytes: 4096 });
    const blobs = fsBlobs({ dir: path.join(root, 'data', 'blobs', 'nested') });
    await storage.open!();
    await blobs.open!();
    for (let i = 0; i < 40; i++)
      await storage.insertWebhook(
        webhookRecord({ id: `wbh_modes${i}`, url: `https://hooks.example.com/${'x'.repeat(100)}` }),
      );
    await blobs.put('fsf_modes1', Readable.from([Buffer.from('private bytes')]));
    await blobs.put('tca_modes2', Readable.from([Buffer.alloc(70_000, 1)]));

    const modes = await modesUnder(path.join(root, 'data'));
    assert.ok(modes.has(path.join('store', 'records.log')), [...modes.keys()].join(', '));
    assert.ok(modes.has(path.join('store', 'storage.lock')));
    for (const [entry, mode] of modes) {
      const isDir = (await stat(path.join(root, 'data', entry))).isDirectory();
      assert.is(mode.toString(8), (isDir ? 0o700 : 0o600).toString(8), `${entry} (${isDir ? 'directory' : 'file'})`);
    }
    // The directories the adapters were given, made by them, are 0700 too.
    for (const made of ['data', 'data/store', 'data/blobs', 'data/blobs/nested']) {
      assert.is((await modeOf(path.join(root, made))).toString(8), '700', made);
    }
    await storage.close!();
    await blobs.close!();
  } finally {
    process.umask(previous);
    removeDir(root);
  }
});

test('fs adapters: a file written atomically (the temp file, then the file) is 0600 unless a mode is given', async () => {
  const previous = process.umask(0o022);
  const root = tempDir('modes');
  try {
    await writeFileAtomically(path.join(root, 'secret'), Buffer.from('x'));
    assert.is((await modeOf(path.join(root, 'secret'))).toString(8), '600');
  } finally {
    process.umask(previous);
    removeDir(root);
  }
});

test.run();
