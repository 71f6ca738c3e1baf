import { Readable } from 'node:stream';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../adapters/sql/connect.js';
import { wrapClient } from '../../../adapters/sql/client.js';
import { sqlAdapters, sqlBlobs, sqlStorage } from '../../../adapters/sql/index.js';
import { migrate } from '../../../adapters/sql/migrations.js';
import { resolveNames } from '../../../adapters/sql/schema.js';
import { STORAGE_MIGRATIONS } from '../../../adapters/sql/storage-migrations.js';
import { webhookRecord } from '../../conformance/fixtures.js';
import { rejects } from '../../helpers/server.js';
import { dropSchema, freshSchema } from '../../helpers/sql.js';
import { rowsOf, type SqlBackend } from './context.js';

/** Opening: migrations, the schema option, what the adapters do with the client they are handed. */
export function setupTests(test: Test, backend: SqlBackend): void {
  const { client } = backend;

  test('migrations: instances opening at once on a new schema all succeed and migrate once', async () => {
    const schema = freshSchema();
    try {
      const stores = [0, 1, 2].flatMap(() => [sqlStorage({ client, schema }), sqlBlobs({ client, schema })]);
      await Promise.all(stores.map((store) => store.open!()));
      const applied = await rowsOf(client, schema, 'migrations');
      const storageVersions = STORAGE_MIGRATIONS.map((migration) => `storage:${migration.version}`);
      assert.equal(
        applied.map((row) => `${row.component}:${row.version}`).sort(),
        ['blobs:1', ...storageVersions].sort(),
      );
      // Every instance works on the tables the first one made.
      const webhook = webhookRecord();
      await (stores[0] as ReturnType<typeof sqlStorage>).insertWebhook(webhook);
      assert.equal(await (stores[4] as ReturnType<typeof sqlStorage>).getWebhook('acct_a', webhook.id), webhook);
      // A later start finds nothing to do.
      const later = sqlStorage({ client, schema });
      await later.open!();
      assert.is((await rowsOf(client, schema, 'migrations')).length, 1 + STORAGE_MIGRATIONS.length);
    } finally {
      await dropSchema(client, schema);
    }
  });

  test('migrations: tables newer than this version are refused with a message saying so', async () => {
    const schema = freshSchema();
    try {
      await sqlStorage({ client, schema }).open!();
      await client.query(
        `INSERT INTO "${schema}".portal_migrations (component, version, name) VALUES ('storage', 99, 'future')`,
      );
      const latest = STORAGE_MIGRATIONS.at(-1)!.version;
      await rejects(
        () => sqlStorage({ client, schema }).open!(),
        new RegExp(`version 99, newer than this customer-portal knows \\(${latest}\\)`),
      );
    } finally {
      await dropSchema(client, schema);
    }
  });

  test('migrations: a version missing below the newest applied (one that landed after it) still runs, once', async () => {
    const schema = freshSchema();
    try {
      const db = wrapClient(client, 'test');
      const names = resolveNames({ schema }, 'test');
      // One no later version builds on (21: the agreements' closed reasons), as a version released
      // out of order would be.
      const skipped = STORAGE_MIGRATIONS.find((migration) => migration.version === 21)!;
      await migrate(
        db,
        names,
        'storage',
        STORAGE_MIGRATIONS.filter((migration) => migration !== skipped),
      );
      const storage = sqlStorage({ client, schema });
      await storage.open!();
      const versions = (await rowsOf(client, schema, 'migrations'))
        .filter((row) => row.component === 'storage')
        .map((row) => Number(row.version));
      assert.equal(
        versions.sort((a, b) => a - b),
        STORAGE_MIGRATIONS.map((migration) => migration.version),
      );
      // The late version's columns are there: a webhook's row is read with them.
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      assert.equal(await storage.getWebhook('acct_a', webhook.id), webhook);
    } finally {
      await dropSchema(client, schema);
    }
  });

  test('migrations: version 2 keeps the rows of version 1, and new rows follow them in creation order', async () => {
    const schema = freshSchema();
    try {
      await migrate(
        wrapClient(client, 'test'),
        resolveNames({ schema }, 'test'),
        'storage',
        STORAGE_MIGRATIONS.slice(0, 1),
      );
      // Ids that differ in their first character: the later ones sort before and after the first by id.
      const old = webhookRecord({ id: `wbh_M${webhookRecord().id.slice(5)}` });
      await client.query(
        `INSERT INTO "${schema}".portal_webhooks (id, account_id, type, url, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
        [old.id, old.accountId, old.type, old.url, old.secret, old.createdAt],
      );
      const storage = sqlStorage({ client, schema });
      await storage.open!();
      const made = [webhookRecord({ id: 'wbh_Z' + old.id.slice(5) }), webhookRecord({ id: 'wbh_0' + old.id.slice(5) })];
      for (const webhook of made) await storage.insertWebhook(webhook);
      assert.equal(
        (await storage.listWebhooks('acct_a')).map((webhook) => webhook.id),
        [old.id, ...made.map((webhook) => webhook.id)],
      );
      await storage.close!();
    } finally {
      await dropSchema(client, schema);
    }
  });

  test('schema option: two schemas on one database are separate portals', async () => {
    const [one, two] = [freshSchema(), freshSchema()];
    try {
      const a = sqlAdapters({ client, schema: one });
      const b = sqlAdapters({ client, schema: two });
      for (const store of [a.storage, a.blobs, b.storage, b.blobs]) await store.open!();
      const webhook = webhookRecord();
      await a.storage.insertWebhook(webhook);
      await a.blobs.put('fsf_shared', Readable.from([Buffer.from('only in one')]));
      assert.equal(await a.storage.getWebhook('acct_a', webhook.id), webhook);
      assert.is(await b.storage.getWebhook('acct_a', webhook.id), null);
      assert.is(await b.blobs.stat('fsf_shared'), null);
      // The same id in the other schema is no clash.
      await b.storage.insertWebhook(webhook);
      await dropSchema(client, one);
      assert.equal(await b.storage.getWebhook('acct_a', webhook.id), webhook);
    } finally {
      await dropSchema(client, one);
      await dropSchema(client, two);
    }
  });

  test('schema option: names that are not plain lower-case identifiers are refused before any query', () => {
    for (const schema of ['', 'Public', 'has-dash', '1st', 'a'.repeat(64), 'x"; DROP SCHEMA public; --', 'ä']) {
      assert.throws(
        () => sqlStorage({ client, schema }),
        /schema .* must be 1–63 lower-case letters/,
        JSON.stringify(schema),
      );
      assert.throws(() => sqlBlobs({ client, schema }), /schema .* must be/, JSON.stringify(schema));
    }
    assert.not.throws(() => sqlStorage({ client, schema: '_a'.repeat(31) + 'b' }));
  });

  test('client: something without query() is refused at construction', () => {
    for (const bad of [undefined, null, {}, { query: 'SELECT 1' }]) {
      assert.throws(() => sqlStorage({ client: bad as never }), /`client` must have a query\(text, params\) method/);
      assert.throws(() => sqlBlobs({ client: bad as never }), /`client` must have a query/);
    }
  });

  test('open/close: methods reject before open() and after close(); close leaves the client open', async () => {
    const schema = freshSchema();
    try {
      const storage = sqlStorage({ client, schema });
      const blobs = sqlBlobs({ client, schema });
      await rejects(() => storage.getWebhook('acct_a', 'wbh_x'), /sqlStorage: call open\(\) first/);
      await rejects(async () => {
        for await (const _ of blobs.listBefore('2100-01-01T00:00:00+00:00')) break;
      }, /sqlBlobs: call open\(\) first/);
      await Promise.all([storage.open!(), storage.open!(), blobs.open!()]);
      assert.is(await storage.getWebhook('acct_a', 'wbh_x'), null);
      await storage.close!();
      await blobs.close!();
      await rejects(() => storage.listWebhooks('acct_a'), /used after close\(\)/);
      await rejects(() => blobs.stat('fsf_x'), /used after close\(\)/);
      await rejects(() => storage.open!(), /after close/);
      assert.equal((await client.query('SELECT 1 AS one')).rows, [{ one: 1 }]);
    } finally {
      await dropSchema(client, schema);
    }
  });

  test('blobs: open() removes uploads abandoned over a day ago, and keeps recent ones', async () => {
    const schema = freshSchema();
    try {
      await sqlBlobs({ client, schema }).open!();
      const table = `"${schema}".portal_blobs`;
      await client.query(
        `INSERT INTO ${table} (id, chunk_size, started_at) VALUES ('dead', 262144, now() - interval '2 days'), ('live', 262144, now())`,
      );
      await client.query(
        `INSERT INTO "${schema}".portal_blob_chunks (blob_id, seq, data) VALUES ('dead', 0, '\\x00'), ('live', 0, '\\x01')`,
      );
      await sqlBlobs({ client, schema }).open!();
      assert.equal(
        (await rowsOf(client, schema, 'blobs')).map((row) => row.id),
        ['live'],
      );
      assert.equal(
        (await rowsOf(client, schema, 'blob_chunks')).map((row) => row.blob_id),
        ['live'],
      );
    } finally {
      await dropSchema(client, schema);
    }
  });

  test('connectDatabase: refuses a URL it cannot serve, without showing the password', async () => {
    const error = await rejects(
      () => connectDatabase('mysql://user:hunter2@db.example/portal'),
      /must start with postgres:\/\//,
    );
    assert.not.match(error.message, 'hunter2');
    assert.match(error.message, 'user:***@');
  });
}

/** connectDatabase on the embedded database: what `DATABASE_URL=pglite:memory` gives. */
export function connectTests(test: Test): void {
  test('connectDatabase: pglite:memory is a working client the caller closes', async () => {
    const database = await connectDatabase('pglite:memory');
    try {
      const { storage } = sqlAdapters({ client: database.client, schema: 'portal' });
      await storage.open!();
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      assert.equal(await storage.getWebhook('acct_a', webhook.id), webhook);
      await storage.close!();
    } finally {
      await database.close();
    }
  });
}
