import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { newId } from '../../src/shared/ids.js';
import { attachmentRecord } from './fixtures.js';
import type { StorageFactory } from './types.js';
import { reopenable } from './reopen.js';
import { withStorage } from './with-storage.js';

export function attachmentStorageTests(test: Test, factory: StorageFactory): void {
  test(
    'attachments: insert then get returns an equal record; another account or an unknown id is null',
    withStorage(factory, async (storage) => {
      const record = attachmentRecord();
      await storage.insertAttachment(record);
      assert.equal(await storage.getAttachment('acct_a', record.id), record);
      assert.is(await storage.getAttachment('acct_b', record.id), null);
      assert.is(await storage.getAttachment('acct_a', 'tca_unknown'), null);
    }),
  );

  test(
    'attachments: names, media type parameters and zero sizes are kept exactly',
    withStorage(factory, async (storage) => {
      const record = attachmentRecord({
        name: 'Résumé "final" 日本語 😀.txt',
        mime: 'text/plain; charset=utf-8',
        size: 0,
      });
      await storage.insertAttachment(record);
      assert.equal(await storage.getAttachment('acct_a', record.id), record);
    }),
  );

  test(
    'attachments: records are copied in and out',
    withStorage(factory, async (storage) => {
      const record = attachmentRecord();
      const original = { ...record };
      await storage.insertAttachment(record);
      record.name = 'changed-after-insert.pdf';
      const read = (await storage.getAttachment('acct_a', record.id))!;
      assert.equal(read, original);
      read.messageId = 'tcm_changed';
      assert.equal(await storage.getAttachment('acct_a', record.id), original);
    }),
  );

  test(
    'attachments: inserting an id twice rejects and keeps the first',
    withStorage(factory, async (storage) => {
      const record = attachmentRecord();
      await storage.insertAttachment(record);
      let rejected = false;
      await storage.insertAttachment({ ...record, name: 'second.pdf' }).catch(() => (rejected = true));
      assert.ok(rejected);
      assert.is((await storage.getAttachment('acct_a', record.id))!.name, record.name);
    }),
  );

  test(
    'attachments: delete removes within the account only, once',
    withStorage(factory, async (storage) => {
      const record = attachmentRecord();
      const neighbour = attachmentRecord({ ticketId: record.ticketId, messageId: record.messageId });
      await storage.insertAttachment(record);
      await storage.insertAttachment(neighbour);
      assert.is(await storage.deleteAttachment('acct_b', record.id), false);
      assert.ok(await storage.getAttachment('acct_a', record.id));
      assert.is(await storage.deleteAttachment('acct_a', record.id), true);
      assert.is(await storage.getAttachment('acct_a', record.id), null);
      assert.is(await storage.deleteAttachment('acct_a', record.id), false);
      assert.equal(await storage.getAttachment('acct_a', neighbour.id), neighbour);
    }),
  );

  test(
    'attachments: the same ticket and message ids in two accounts stay apart',
    withStorage(factory, async (storage) => {
      const mine = attachmentRecord();
      const theirs = attachmentRecord({
        accountId: 'acct_b',
        ticketId: mine.ticketId,
        messageId: mine.messageId,
        name: 'theirs.pdf',
      });
      await storage.insertAttachment(mine);
      await storage.insertAttachment(theirs);
      assert.equal(await storage.getAttachment('acct_a', mine.id), mine);
      assert.equal(await storage.getAttachment('acct_b', theirs.id), theirs);
      assert.is(await storage.getAttachment('acct_a', theirs.id), null);
      assert.is(await storage.deleteAttachment('acct_a', theirs.id), false);
      assert.equal(await storage.getAttachment('acct_b', theirs.id), theirs);
    }),
  );

  test(
    'attachments: an attachment id is a referenced blob key until the record is deleted',
    withStorage(factory, async (storage) => {
      const record = attachmentRecord();
      assert.is(await storage.isBlobReferenced(record.id), false);
      await storage.insertAttachment(record);
      assert.is(await storage.isBlobReferenced(record.id), true);
      assert.is(await storage.isBlobReferenced(newId('tca')), false);
      await storage.deleteAttachment('acct_a', record.id);
      assert.is(await storage.isBlobReferenced(record.id), false);
    }),
  );

  reopenable(test, factory)(
    'attachments: records and deletions survive a reopen',
    withStorage(factory, async (storage, { swap }) => {
      const kept = attachmentRecord({ name: 'Ünïcødé.txt', mime: 'text/plain; charset=utf-8' });
      const removed = attachmentRecord();
      await storage.insertAttachment(kept);
      await storage.insertAttachment(removed);
      await storage.deleteAttachment('acct_a', removed.id);
      const reopened = await swap();
      assert.equal(await reopened.getAttachment('acct_a', kept.id), kept);
      assert.is(await reopened.getAttachment('acct_a', removed.id), null);
      assert.is(await reopened.isBlobReferenced(kept.id), true);
      assert.is(await reopened.isBlobReferenced(removed.id), false);
    }),
  );
}
