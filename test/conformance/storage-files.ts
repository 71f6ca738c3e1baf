import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import type { StorageFactory } from './types.js';
import { directoryRecord, fileRecord } from './fixtures.js';
import { reopenable } from './reopen.js';
import { withStorage } from './with-storage.js';

const ids = (entries: { id: string }[]) => entries.map((entry) => entry.id).sort();

export function fileStorageTests(test: Test, factory: StorageFactory): void {
  test(
    'files: insert then get returns an equal record; another account sees null',
    withStorage(factory, async (storage) => {
      const directory = directoryRecord();
      const file = fileRecord({ directoryId: directory.id, fileShareId: 'fss_share1' });
      await storage.insertFileEntry(directory);
      await storage.insertFileEntry(file);
      assert.equal(await storage.getFileEntry('acct_a', file.id), file);
      assert.equal(await storage.getFileEntry('acct_a', directory.id), directory);
      assert.is(await storage.getFileEntry('acct_b', file.id), null);
      assert.is(await storage.getFileEntry('acct_a', 'fsf_unknown'), null);
    }),
  );

  test(
    "files: listing holds exactly the directory's direct entries of the account",
    withStorage(factory, async (storage) => {
      const directory = directoryRecord();
      const nested = directoryRecord({ directoryId: directory.id, name: 'Nested' });
      const atRoot = fileRecord();
      const inDirectory = fileRecord({ directoryId: directory.id });
      const deeper = fileRecord({ directoryId: nested.id });
      const otherAccount = fileRecord({ accountId: 'acct_b' });
      for (const entry of [directory, nested, atRoot, inDirectory, deeper, otherAccount])
        await storage.insertFileEntry(entry);
      assert.equal(ids(await storage.listFileEntries('acct_a', null)), ids([directory, atRoot]));
      assert.equal(ids(await storage.listFileEntries('acct_a', directory.id)), ids([nested, inDirectory]));
      assert.equal(ids(await storage.listFileEntries('acct_a', nested.id)), ids([deeper]));
      assert.equal(ids(await storage.listFileEntries('acct_b', null)), ids([otherAccount]));
      assert.equal(await storage.listFileEntries('acct_b', directory.id), []);
    }),
  );

  test(
    'files: listed records are whole and equal to what was inserted',
    withStorage(factory, async (storage) => {
      const file = fileRecord({ name: 'Ünïcødé name.txt', mime: 'text/plain; charset=utf-8', size: 0 });
      await storage.insertFileEntry(file);
      assert.equal(await storage.listFileEntries('acct_a', null), [file]);
    }),
  );

  test(
    'files: delete removes within the account only, and from its listing',
    withStorage(factory, async (storage) => {
      const file = fileRecord();
      await storage.insertFileEntry(file);
      assert.is(await storage.deleteFileEntry('acct_b', file.id), false);
      assert.is(await storage.deleteFileEntry('acct_a', file.id), true);
      assert.is(await storage.getFileEntry('acct_a', file.id), null);
      assert.equal(await storage.listFileEntries('acct_a', null), []);
      assert.is(await storage.deleteFileEntry('acct_a', file.id), false);
    }),
  );

  test(
    'files: a listing of 2,000 entries is complete',
    withStorage(factory, async (storage) => {
      const directory = directoryRecord();
      await storage.insertFileEntry(directory);
      const entries = Array.from({ length: 2000 }, (_, i) => fileRecord({ directoryId: directory.id, name: `f${i}` }));
      for (const entry of entries) await storage.insertFileEntry(entry);
      assert.equal(ids(await storage.listFileEntries('acct_a', directory.id)), ids(entries));
    }),
  );

  reopenable(test, factory)(
    'files: entries, listings and deletions survive a reopen',
    withStorage(factory, async (storage, { swap }) => {
      const directory = directoryRecord();
      const kept = fileRecord({ directoryId: directory.id });
      const removed = fileRecord({ directoryId: directory.id });
      for (const entry of [directory, kept, removed]) await storage.insertFileEntry(entry);
      await storage.deleteFileEntry('acct_a', removed.id);
      const reopened = await swap();
      assert.equal(await reopened.getFileEntry('acct_a', kept.id), kept);
      assert.equal(await reopened.listFileEntries('acct_a', directory.id), [kept]);
      assert.is(await reopened.getFileEntry('acct_a', removed.id), null);
    }),
  );
}
