import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { isPortalError } from '../../src/errors.js';
import { newId } from '../../src/shared/ids.js';
import type { StorageFactory } from './types.js';
import { webhookRecord } from './fixtures.js';
import { reopenable } from './reopen.js';
import { withStorage } from './with-storage.js';

export function webhookStorageTests(test: Test, factory: StorageFactory): void {
  test('webhooks: insert then get returns an equal record', withStorage(factory, async (storage, { db }) => {
    const record = webhookRecord();
    await storage.insertWebhook(record);
    assert.equal(await storage.getWebhook('acct_a', record.id), record);
    assert.equal(await db.webhook(record.id), record, 'stored as given');
  }));

  test('webhooks: a record of another account, or an unknown id, is null', withStorage(factory, async (storage) => {
    const record = webhookRecord();
    await storage.insertWebhook(record);
    assert.is(await storage.getWebhook('acct_b', record.id), null);
    assert.is(await storage.getWebhook('acct_a', 'wbh_unknown'), null);
  }));

  test('webhooks: a returned record is a copy; changing it changes nothing stored', withStorage(factory, async (storage) => {
    const record = webhookRecord();
    await storage.insertWebhook(record);
    const read = (await storage.getWebhook('acct_a', record.id))!;
    read.url = 'https://changed.example/';
    record.url = 'https://changed-too.example/';
    assert.is((await storage.getWebhook('acct_a', record.id))!.url, 'https://receiver.example/hook');
  }));

  test('webhooks: with maxPerAccount, an insert past the limit rejects with WEBHOOKS_LIMIT and stores nothing', withStorage(factory, async (storage, { db }) => {
    for (let i = 0; i < 3; i++) await storage.insertWebhook(webhookRecord(), { maxPerAccount: 3 });
    const refused = webhookRecord();
    let code: unknown;
    await storage.insertWebhook(refused, { maxPerAccount: 3 }).catch((error) => (code = isPortalError(error, 'WEBHOOKS_LIMIT') && error.status));
    assert.is(code, 409);
    assert.is(await db.webhook(refused.id), null);
    assert.is((await storage.listWebhooks('acct_a')).length, 3);
    await storage.insertWebhook(webhookRecord({ accountId: 'acct_b' }), { maxPerAccount: 3 });
    await storage.insertWebhook(webhookRecord(), { maxPerAccount: 4 });
    await storage.insertWebhook(webhookRecord(), {});
    assert.is((await storage.listWebhooks('acct_a')).length, 5, 'without a limit nothing is counted');
  }));

  test('webhooks: concurrent inserts never pass maxPerAccount together', withStorage(factory, async (storage) => {
    const results = await Promise.allSettled(Array.from({ length: 12 }, () => storage.insertWebhook(webhookRecord(), { maxPerAccount: 5 })));
    assert.is(results.filter((result) => result.status === 'fulfilled').length, 5);
    for (const result of results) {
      if (result.status === 'rejected') assert.ok(isPortalError(result.reason, 'WEBHOOKS_LIMIT'), String(result.reason));
    }
    assert.is((await storage.listWebhooks('acct_a')).length, 5);
  }));

  test('webhooks: inserting an id twice rejects and keeps the first', withStorage(factory, async (storage, { db }) => {
    const record = webhookRecord();
    await storage.insertWebhook(record);
    let rejected = false;
    await storage.insertWebhook({ ...record, url: 'https://second.example/' }).catch((error) => (rejected = isPortalError(error, 'RECORD_EXISTS')));
    assert.ok(rejected);
    assert.is((await storage.getWebhook('acct_a', record.id))!.url, record.url);
    assert.equal(await db.webhook(record.id), record);
  }));

  test('webhooks: list is the account\'s own, oldest first', withStorage(factory, async (storage) => {
    const first = webhookRecord({ createdAt: '2026-01-01T00:00:00+00:00' });
    const second = webhookRecord({ createdAt: '2026-01-02T00:00:00+00:00' });
    const other = webhookRecord({ accountId: 'acct_b' });
    await storage.insertWebhook(second);
    await storage.insertWebhook(other);
    await storage.insertWebhook(first);
    assert.equal((await storage.listWebhooks('acct_a')).map((w) => w.id), [first.id, second.id]);
    assert.equal((await storage.listWebhooks('acct_b')).map((w) => w.id), [other.id]);
    assert.equal(await storage.listWebhooks('acct_none'), []);
  }));

  test('webhooks: delete removes only within the account, once', withStorage(factory, async (storage, { db }) => {
    const record = webhookRecord();
    await storage.insertWebhook(record);
    assert.is(await storage.deleteWebhook('acct_b', record.id), false);
    assert.ok(await storage.getWebhook('acct_a', record.id));
    assert.equal(await db.webhook(record.id), record, 'still stored after another account\'s delete');
    assert.is(await storage.deleteWebhook('acct_a', record.id), true);
    assert.is(await storage.getWebhook('acct_a', record.id), null);
    assert.is(await db.webhook(record.id), null, 'gone from the store');
    assert.is(await storage.deleteWebhook('acct_a', record.id), false);
  }));

  reopenable(test, factory)('webhooks: records and deletions survive a reopen', withStorage(factory, async (storage, { swap, db }) => {
    const kept = webhookRecord();
    const removed = webhookRecord();
    await storage.insertWebhook(kept);
    await storage.insertWebhook(removed);
    await storage.deleteWebhook('acct_a', removed.id);
    const reopened = await swap();
    assert.equal(await reopened.getWebhook('acct_a', kept.id), kept);
    assert.is(await reopened.getWebhook('acct_a', removed.id), null);
    assert.equal(await db.webhook(kept.id), kept);
    assert.is(await db.webhook(removed.id), null);
  }));
  // Ids in descending order, so that an order by id (or by chance) shows up.
  const sameSecond = () => ['F', 'E', 'D', 'C', 'B', 'A'].map((letter) => webhookRecord({ id: `wbh_${letter}${newId('wbh').slice(4)}` }));

  test('webhooks: six made in the same second list in creation order', withStorage(factory, async (storage) => {
    const made = sameSecond();
    for (const webhook of made) await storage.insertWebhook(webhook);
    assert.equal((await storage.listWebhooks('acct_a')).map((webhook) => webhook.id), made.map((webhook) => webhook.id));
  }));

  reopenable(test, factory)('webhooks: the creation order within one second survives a reopen', withStorage(factory, async (storage, { swap }) => {
    const made = sameSecond();
    for (const webhook of made) await storage.insertWebhook(webhook);
    const reopened = await swap();
    assert.equal((await reopened.listWebhooks('acct_a')).map((webhook) => webhook.id), made.map((webhook) => webhook.id));
  }));
}
