/** A portal on the fs adapters, over HTTP: what it stored is there after it is closed and started again. */
import path from 'node:path';
import { text } from 'node:stream/consumers';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { removeDir, tempDir } from '../helpers/fs-dirs.js';
import { startPortal, withPortal } from '../helpers/server.js';

const onDisk = (dir: string) => ({ storage: fsStorage({ dir }), blobs: fsBlobs({ dir: path.join(dir, 'blobs') }) });

test('webhooks, directories and files survive a restart of the portal', async () => {
  const dir = tempDir('portal');
  try {
    let running = await startPortal(onDisk(dir));
    const webhook = await running.portal.webhooks.create('acct_a', {
      type: 'customer-created',
      url: 'https://receiver.example/hook',
    });
    const directory = await running.portal.files.createDirectory('acct_a', { name: 'Contracts' });
    const file = await running.portal.files.put('acct_a', {
      name: 'lease.txt',
      mime: 'text/plain',
      directoryId: directory.id,
      body: 'the bytes',
    });
    await running.close();

    running = await startPortal(onDisk(dir));
    try {
      const listed = await running.api(`/files?directoryId=${directory.id}`);
      assert.is(listed.status, 200);
      assert.equal(await listed.json(), { data: [file] });
      assert.equal(await running.portal.webhooks.get('acct_a', webhook.id), webhook);
      const root = (await (await running.api('/files')).json()) as { data: { id: string }[] };
      assert.equal(
        root.data.map((entry) => entry.id),
        [directory.id],
      );
    } finally {
      await running.close();
    }
    const blobs = fsBlobs({ dir: path.join(dir, 'blobs') });
    assert.is(await text((await blobs.get(file.id))!), 'the bytes');
    await blobs.close!();
  } finally {
    removeDir(dir);
  }
});

test('a second portal on the same directory fails to start, naming the first', async () => {
  const dir = tempDir('portal');
  try {
    await withPortal(onDisk(dir), async (_first) => {
      let message = '';
      await startPortal(onDisk(dir)).catch((error: Error) => (message = error.message));
      assert.ok(message.includes(`process ${process.pid}`), message);
    });
  } finally {
    removeDir(dir);
  }
});

test.run();
