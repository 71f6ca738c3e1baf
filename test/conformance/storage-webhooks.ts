import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { isPortalError } from '../../src/errors.js';
import { newId } from '../../src/shared/ids.js';
import type { StorageFactory } from './types.js';
import { T0, eventRecord, webhookRecord } from './fixtures.js';
import { reopenable } from './reopen.js';
import { withStorage } from './with-storage.js';

/** Times after the fixtures' T0, for rotation graces. */
const T1 = T0.replace('T00:00:00', 'T00:01:00');
const T2 = T0.replace('T00:00:00', 'T00:02:00');

export function webhookStorageTests(test: Test, factory: StorageFactory): void {
  test(
    'webhooks: insert then get returns an equal record',
    withStorage(factory, async (storage, { db }) => {
      const record = webhookRecord();
      await storage.insertWebhook(record);
      assert.equal(await storage.getWebhook('acct_a', record.id), record);
      assert.equal(await db.webhook(record.id), record, 'stored as given');
    }),
  );

  test(
    'webhooks: a record of another account, or an unknown id, is null',
    withStorage(factory, async (storage) => {
      const record = webhookRecord();
      await storage.insertWebhook(record);
      assert.is(await storage.getWebhook('acct_b', record.id), null);
      assert.is(await storage.getWebhook('acct_a', 'wbh_unknown'), null);
    }),
  );

  test(
    'webhooks: a returned record is a copy; changing it changes nothing stored',
    withStorage(factory, async (storage) => {
      const record = webhookRecord();
      await storage.insertWebhook(record);
      const read = (await storage.getWebhook('acct_a', record.id))!;
      read.url = 'https://changed.example/';
      record.url = 'https://changed-too.example/';
      assert.is((await storage.getWebhook('acct_a', record.id))!.url, 'https://receiver.example/hook');
    }),
  );

  test(
    'webhooks: with maxPerAccount, an insert past the limit rejects with WEBHOOKS_LIMIT and stores nothing',
    withStorage(factory, async (storage, { db }) => {
      for (let i = 0; i < 3; i++) await storage.insertWebhook(webhookRecord(), { maxPerAccount: 3 });
      const refused = webhookRecord();
      let code: unknown;
      await storage
        .insertWebhook(refused, { maxPerAccount: 3 })
        .catch((error) => (code = isPortalError(error, 'WEBHOOKS_LIMIT') && error.status));
      assert.is(code, 409);
      assert.is(await db.webhook(refused.id), null);
      assert.is((await storage.listWebhooks('acct_a')).length, 3);
      await storage.insertWebhook(webhookRecord({ accountId: 'acct_b' }), { maxPerAccount: 3 });
      await storage.insertWebhook(webhookRecord(), { maxPerAccount: 4 });
      await storage.insertWebhook(webhookRecord(), {});
      assert.is((await storage.listWebhooks('acct_a')).length, 5, 'without a limit nothing is counted');
    }),
  );

  test(
    'webhooks: concurrent inserts never pass maxPerAccount together',
    withStorage(factory, async (storage) => {
      const results = await Promise.allSettled(
        Array.from({ length: 12 }, () => storage.insertWebhook(webhookRecord(), { maxPerAccount: 5 })),
      );
      assert.is(results.filter((result) => result.status === 'fulfilled').length, 5);
      for (const result of results) {
        if (result.status === 'rejected')
          assert.ok(isPortalError(result.reason, 'WEBHOOKS_LIMIT'), String(result.reason));
      }
      assert.is((await storage.listWebhooks('acct_a')).length, 5);
    }),
  );

  test(
    'webhooks: inserting an id twice rejects and keeps the first',
    withStorage(factory, async (storage, { db }) => {
      const record = webhookRecord();
      await storage.insertWebhook(record);
      let rejected = false;
      await storage
        .insertWebhook({ ...record, url: 'https://second.example/' })
        .catch((error) => (rejected = isPortalError(error, 'RECORD_EXISTS')));
      assert.ok(rejected);
      assert.is((await storage.getWebhook('acct_a', record.id))!.url, record.url);
      assert.equal(await db.webhook(record.id), record);
    }),
  );

  test(
    "webhooks: list is the account's own, oldest first",
    withStorage(factory, async (storage) => {
      const first = webhookRecord({ createdAt: '2026-01-01T00:00:00+00:00' });
      const second = webhookRecord({ createdAt: '2026-01-02T00:00:00+00:00' });
      const other = webhookRecord({ accountId: 'acct_b' });
      await storage.insertWebhook(second);
      await storage.insertWebhook(other);
      await storage.insertWebhook(first);
      assert.equal(
        (await storage.listWebhooks('acct_a')).map((w) => w.id),
        [first.id, second.id],
      );
      assert.equal(
        (await storage.listWebhooks('acct_b')).map((w) => w.id),
        [other.id],
      );
      assert.equal(await storage.listWebhooks('acct_none'), []);
    }),
  );

  test(
    'webhooks: delete removes only within the account, once',
    withStorage(factory, async (storage, { db }) => {
      const record = webhookRecord();
      await storage.insertWebhook(record);
      assert.is(await storage.deleteWebhook('acct_b', record.id), false);
      assert.ok(await storage.getWebhook('acct_a', record.id));
      assert.equal(await db.webhook(record.id), record, "still stored after another account's delete");
      assert.is(await storage.deleteWebhook('acct_a', record.id), true);
      assert.is(await storage.getWebhook('acct_a', record.id), null);
      assert.is(await db.webhook(record.id), null, 'gone from the store');
      assert.is(await storage.deleteWebhook('acct_a', record.id), false);
    }),
  );

  reopenable(test, factory)(
    'webhooks: records and deletions survive a reopen',
    withStorage(factory, async (storage, { swap, db }) => {
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
    }),
  );

  test(
    'webhooks: six made in the same second list in creation order',
    withStorage(factory, async (storage) => {
      const made = sameSecond();
      for (const webhook of made) await storage.insertWebhook(webhook);
      assert.equal(
        (await storage.listWebhooks('acct_a')).map((webhook) => webhook.id),
        made.map((webhook) => webhook.id),
      );
    }),
  );

  // Ids in descending order, so that an order by id (or by chance) shows up.
  const sameSecond = () =>
    ['F', 'E', 'D', 'C', 'B', 'A'].map((letter) => webhookRecord({ id: `wbh_${letter}${newId('wbh').slice(4)}` }));
  const secret = (fill: number) => 'whsec_' + Buffer.alloc(32, fill).toString('base64');

  test(
    'webhooks: a rotation stores the new secret and keeps the replaced one until the given time',
    withStorage(factory, async (storage, { db }) => {
      const record = webhookRecord();
      await storage.insertWebhook(record);
      const rotated = await storage.rotateWebhookSecret('acct_a', record.id, {
        secret: secret(1),
        previousSecretUntil: T1,
      });
      const expected = { ...record, secret: secret(1), previousSecret: record.secret, previousSecretUntil: T1 };
      assert.equal(rotated, expected);
      assert.equal(await storage.getWebhook('acct_a', record.id), expected);
      assert.equal(await db.webhook(record.id), expected, 'stored so');
      // A second rotation keeps the secret it replaces, the first one's new secret; the oldest goes.
      const again = await storage.rotateWebhookSecret('acct_a', record.id, {
        secret: secret(2),
        previousSecretUntil: T2,
      });
      assert.equal(again, { ...record, secret: secret(2), previousSecret: secret(1), previousSecretUntil: T2 });
      // No grace: no previous secret at all.
      const atOnce = await storage.rotateWebhookSecret('acct_a', record.id, {
        secret: secret(3),
        previousSecretUntil: null,
      });
      assert.equal(atOnce, { ...record, secret: secret(3) });
      assert.equal(await db.webhook(record.id), { ...record, secret: secret(3) });
    }),
  );

  test(
    'webhooks: a rotation in another account, or of an unknown id, is null and changes nothing',
    withStorage(factory, async (storage, { db }) => {
      const record = webhookRecord();
      await storage.insertWebhook(record);
      assert.is(
        await storage.rotateWebhookSecret('acct_b', record.id, { secret: secret(1), previousSecretUntil: T1 }),
        null,
      );
      assert.is(
        await storage.rotateWebhookSecret('acct_a', 'wbh_unknown', { secret: secret(1), previousSecretUntil: T1 }),
        null,
      );
      assert.equal(await db.webhook(record.id), record);
    }),
  );

  test(
    'webhooks: two rotations at once: each secret is kept, one as the secret and one as the previous',
    withStorage(factory, async (storage) => {
      const record = webhookRecord();
      await storage.insertWebhook(record);
      await Promise.all(
        [1, 2].map((fill) =>
          storage.rotateWebhookSecret('acct_a', record.id, { secret: secret(fill), previousSecretUntil: T1 }),
        ),
      );
      const stored = (await storage.getWebhook('acct_a', record.id))!;
      assert.equal([stored.secret, stored.previousSecret].sort(), [secret(1), secret(2)].sort(), 'no rotation lost');
    }),
  );

  test(
    'webhooks: a rotated webhook keeps its place in the list, and a claim hands the worker both secrets',
    withStorage(factory, async (storage) => {
      const made = sameSecond();
      for (const webhook of made) await storage.insertWebhook(webhook);
      await storage.rotateWebhookSecret('acct_a', made[0]!.id, { secret: secret(1), previousSecretUntil: T1 });
      assert.equal(
        (await storage.listWebhooks('acct_a')).map((webhook) => webhook.id),
        made.map((webhook) => webhook.id),
      );
      await storage.publishEvents([eventRecord({ type: made[0]!.type })]);
      const claimed = await storage.claimDeliveries({ now: T1, leaseUntil: T2, limit: 10, owner: 'worker-1' });
      const mine = claimed.find((item) => item.webhook.id === made[0]!.id)!;
      assert.equal(mine.webhook, {
        ...made[0]!,
        secret: secret(1),
        previousSecret: made[0]!.secret,
        previousSecretUntil: T1,
      });
      const other = claimed.find((item) => item.webhook.id === made[1]!.id)!;
      assert.equal(other.webhook, made[1], 'a webhook never rotated has no rotation fields');
    }),
  );

  reopenable(test, factory)(
    'webhooks: a rotation and the listing order survive a reopen',
    withStorage(factory, async (storage, { swap, db }) => {
      const made = sameSecond();
      for (const webhook of made) await storage.insertWebhook(webhook);
      await storage.rotateWebhookSecret('acct_a', made[2]!.id, { secret: secret(1), previousSecretUntil: T1 });
      const reopened = await swap();
      const expected = { ...made[2]!, secret: secret(1), previousSecret: made[2]!.secret, previousSecretUntil: T1 };
      assert.equal(await reopened.getWebhook('acct_a', made[2]!.id), expected);
      assert.equal(await db.webhook(made[2]!.id), expected);
      assert.equal(
        (await reopened.listWebhooks('acct_a')).map((webhook) => webhook.id),
        made.map((webhook) => webhook.id),
      );
    }),
  );

  reopenable(test, factory)(
    'webhooks: the creation order within one second survives a reopen',
    withStorage(factory, async (storage, { swap }) => {
      const made = sameSecond();
      for (const webhook of made) await storage.insertWebhook(webhook);
      const reopened = await swap();
      assert.equal(
        (await reopened.listWebhooks('acct_a')).map((webhook) => webhook.id),
        made.map((webhook) => webhook.id),
      );
    }),
  );
}
