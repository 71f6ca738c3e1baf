/**
 * The SQL adapters on a pool whose database goes away: statements that certainly did not take
 * effect wait and run again, those that may have are answered 503 at once, and a database that
 * stays away is answered 503 after `waitForDatabaseMs`. The pool is scripted: each statement text
 * meets the failures queued for it, in order, before it reaches PGlite.
 */
import { EventEmitter } from 'node:events';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { PGlite } from '@electric-sql/pglite';
import { sqlBlobs, sqlStorage } from '../../adapters/sql/index.js';
import { type PortalError, isPortalError } from '../../src/errors.js';
import type { Logger } from '../../src/shared/logger.js';
import { eventRecord, webhookRecord } from '../conformance/fixtures.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { openPglite } from '../helpers/sql.js';
import { json, withPortal } from '../helpers/server.js';
import { everyDelivery } from '../helpers/every-delivery.js';

const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
const starting = () => Object.assign(new Error('the database system is starting up'), { code: '57P03' });
const terminated = () =>
  Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
const lost = () => new Error('Connection terminated unexpectedly');
const duplicate = () => Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' });

/** A stand-in for `pg.Pool` in front of PGlite, failing on cue. */
class ScriptedPool {
  readonly totalCount = 1;
  /** Statement texts in the order they reached the pool, failed or not. */
  readonly seen: string[] = [];
  /** A COMMIT whose answer is lost is rolled back instead: it never reached the server. */
  rollbackInstead = false;
  /** When set, every statement and checkout fails with it. */
  down: (() => Error) | null = null;
  private readonly queued: { match: RegExp; error: () => Error; land: boolean }[] = [];

  constructor(private readonly db: PGlite) {}

  /** The next statement matching `match` fails with `error()` instead of running. */
  failNext(match: RegExp, error: () => Error, times = 1): void {
    for (let n = 0; n < times; n++) this.queued.push({ match, error, land: false });
  }

  /** The next statement matching `match` runs, and then fails with `error()` as if its answer was lost. */
  answerLost(match: RegExp, error: () => Error): void {
    this.queued.push({ match, error, land: true });
  }

  async query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }> {
    this.seen.push(text);
    if (this.down) throw this.down();
    const at = this.queued.findIndex((entry) => entry.match.test(text));
    if (at >= 0) {
      const { error, land } = this.queued.splice(at, 1)[0]!;
      // The statement reaches the server, and its answer is lost on the way back.
      if (land) await this.db.query(this.rollbackInstead && /^COMMIT/.test(text) ? 'ROLLBACK' : text, params);
      throw error();
    }
    // pg sends a text with several statements in one round trip and answers one result each.
    if (text.includes(';')) return (await this.db.exec(text)) as unknown as { rows: unknown[] };
    return this.db.query(text, params);
  }

  /** After the next statement matching `match` on a checked-out connection, the server ends that session. */
  endSessionAfter: RegExp | null = null;
  /** 'error' events with no listener: each would have crashed a real process. */
  unheardErrors = 0;
  /** Connections given back, and whether each was given back as broken. */
  readonly released: boolean[] = [];

  async connect() {
    if (this.down) throw this.down();
    // As pg's Client: an EventEmitter whose 'error' event, unheard, throws.
    const connection = Object.assign(new EventEmitter(), {
      ended: false,
      query: async (text: string, params?: unknown[]) => {
        if (connection.ended) throw new Error('Client has encountered a connection error and is not queryable');
        const result = await this.query(text, params);
        if (this.endSessionAfter?.test(text)) {
          this.endSessionAfter = null;
          connection.ended = true;
          // The server rolls back what the session had open.
          await this.db.query('ROLLBACK');
          // pg emits it from the socket's data handler: unheard, it would be an uncaught exception.
          if (connection.listenerCount('error') === 0) this.unheardErrors++;
          else connection.emit('error', terminated());
        }
        return result;
      },
      release: (error?: Error | boolean) => void this.released.push(Boolean(error)),
    });
    return connection;
  }

  count(match: RegExp): number {
    return this.seen.filter((text) => match.test(text)).length;
  }
}

const db = await openPglite();
let schemas = 0;

async function open(options: { waitForDatabaseMs?: number } = {}) {
  const pool = new ScriptedPool(db);
  const schema = `reconnect_${process.pid}_${++schemas}`;
  const storage = sqlStorage({ client: pool, schema, preparedStatements: false, ...options });
  const blobs = sqlBlobs({ client: pool, schema, preparedStatements: false, ...options });
  await storage.open!();
  await blobs.open!();
  pool.seen.length = 0;
  pool.released.length = 0;
  return { pool, storage, blobs };
}

const test = suite('sql adapter: the database going away');

test('a read waits for a database that refuses connections, then is answered', async () => {
  const { pool, storage } = await open();
  await storage.insertWebhook(webhookRecord({ id: 'wh_reconnect_read' }));
  pool.failNext(/^SELECT/, refused, 2);
  pool.failNext(/^SELECT/, starting);
  const started = Date.now();
  const found = await storage.getWebhook('acct_a', 'wh_reconnect_read');
  assert.is(found?.id, 'wh_reconnect_read');
  assert.is(pool.count(/^SELECT/), 4);
  // 50 + 100 + 200 ms of backoff between the four tries.
  assert.ok(Date.now() - started >= 300, `answered after ${Date.now() - started} ms`);
});

test('a write refused or cut by a server shutdown runs again and is stored once', async () => {
  const { pool, storage } = await open();
  pool.failNext(/^INSERT/, refused);
  pool.failNext(/^INSERT/, terminated);
  await storage.insertWebhook(webhookRecord({ id: 'wh_reconnect_write' }));
  assert.is(pool.count(/^INSERT/), 3);
  assert.is((await storage.listWebhooks('acct_a')).filter((w) => w.id === 'wh_reconnect_write').length, 1);
});

test('a write whose connection broke with no word from the server is answered 503 at once, not run again', async () => {
  const { pool, storage } = await open();
  pool.failNext(/^INSERT/, lost);
  const error = await storage.insertWebhook(webhookRecord({ id: 'wh_reconnect_lost' })).then(
    () => null,
    (caught: unknown) => caught,
  );
  assert.ok(isPortalError(error, 'STORAGE_UNAVAILABLE'));
  const unavailable = error as PortalError;
  assert.is(unavailable.status, 503);
  assert.is(unavailable.headers['retry-after'], '1');
  assert.match(unavailable.message, 'may or may not have been applied');
  assert.match(String((unavailable.cause as Error).message), 'Connection terminated');
  assert.is(pool.count(/^INSERT/), 1);
});

test("a publish whose answer was lost is found stored by its events' ids: answered with its deliveries, stored once", async () => {
  const { pool, storage } = await open();
  const webhook = webhookRecord({ id: 'wbh_reconnectpublish', type: 'customer-created' });
  await storage.insertWebhook(webhook);
  const event = eventRecord({ id: 'evt_reconnectlanded', type: 'customer-created' });
  pool.answerLost(/^WITH generation AS/, lost);
  const deliveries = await storage.publishEvents([event]);
  assert.equal(
    deliveries.map((delivery) => [delivery.eventId, delivery.webhookId]),
    [[event.id, webhook.id]],
  );
  assert.is(pool.count(/^WITH generation AS/), 1, 'not run again');
  assert.is((await everyDelivery(storage, 'acct_a', webhook.id)).length, 1);
});

test('a publish lost before it reached the server is found absent and run again, once', async () => {
  const { pool, storage } = await open();
  const webhook = webhookRecord({ id: 'wbh_reconnectabsent', type: 'customer-created' });
  await storage.insertWebhook(webhook);
  pool.failNext(/^WITH generation AS/, lost);
  const deliveries = await storage.publishEvents([
    eventRecord({ id: 'evt_reconnectabsent', type: 'customer-created' }),
  ]);
  assert.is(deliveries.length, 1);
  assert.is(pool.count(/^WITH generation AS/), 2);
  assert.is((await everyDelivery(storage, 'acct_a', webhook.id)).length, 1);
});

test('a read whose connection broke is simply run again', async () => {
  const { pool, storage } = await open();
  pool.failNext(/^SELECT/, lost);
  assert.equal(await storage.listWebhooks('acct_a'), []);
  assert.is(pool.count(/^SELECT/), 2);
});

test('a transaction broken before COMMIT runs again from BEGIN and commits once', async () => {
  const { pool, storage } = await open();
  await storage.insertWebhook(webhookRecord({ id: 'wh_reconnect_tx' }));
  pool.failNext(/^DELETE/, lost);
  assert.ok(await storage.deleteWebhook('acct_a', 'wh_reconnect_tx'));
  assert.is(pool.count(/^BEGIN/), 2);
  // The webhook's delete, twice; its health's, once, in the try that committed.
  assert.is(pool.count(/^DELETE FROM "[^"]+"\."portal_webhooks"/), 2);
  assert.is(pool.count(/^DELETE/), 3);
  assert.is(pool.count(/^COMMIT/), 1);
  assert.is(await storage.getWebhook('acct_a', 'wh_reconnect_tx'), null);
});

test('a transaction whose COMMIT was cut by a shutdown runs again and commits once', async () => {
  const { pool, storage } = await open();
  await storage.insertWebhook(webhookRecord({ id: 'wh_reconnect_c1' }));
  pool.failNext(/^COMMIT/, terminated);
  assert.ok(await storage.deleteWebhook('acct_a', 'wh_reconnect_c1'));
  assert.is(pool.count(/^BEGIN/), 2);
  assert.is(pool.count(/^COMMIT/), 2);
  assert.is(await storage.getWebhook('acct_a', 'wh_reconnect_c1'), null);
});

test('a COMMIT that landed but went unanswered is found committed by its transaction id, and not run again', async () => {
  const { pool, storage } = await open();
  await storage.insertWebhook(webhookRecord({ id: 'wh_reconnect_c2' }));
  pool.answerLost(/^COMMIT/, lost);
  // Answered true (it was deleted) from the first try's result, though a second try would find nothing.
  assert.ok(await storage.deleteWebhook('acct_a', 'wh_reconnect_c2'));
  assert.is(pool.count(/^BEGIN/), 1);
  assert.is(pool.count(/txid_status/), 1);
  assert.is(await storage.getWebhook('acct_a', 'wh_reconnect_c2'), null);
});

test('a COMMIT that never arrived is found aborted by its transaction id, and the transaction runs again', async () => {
  const { pool, storage } = await open();
  await storage.insertWebhook(webhookRecord({ id: 'wh_reconnect_c3' }));
  // The server got no COMMIT and ended the session: it rolled the transaction back.
  pool.answerLost(/^COMMIT/, lost);
  pool.rollbackInstead = true;
  assert.ok(await storage.deleteWebhook('acct_a', 'wh_reconnect_c3'));
  assert.is(pool.count(/^BEGIN/), 2);
  assert.is(pool.count(/txid_status/), 1);
  assert.is(await storage.getWebhook('acct_a', 'wh_reconnect_c3'), null);
});

test('a session the server ends between two statements of a transaction is given back broken, and the transaction runs again', async () => {
  const { pool, storage } = await open();
  await storage.insertWebhook(webhookRecord({ id: 'wh_reconnect_ended' }));
  pool.endSessionAfter = /^DELETE/;
  assert.ok(await storage.deleteWebhook('acct_a', 'wh_reconnect_ended'));
  assert.is(pool.unheardErrors, 0);
  assert.is(pool.count(/^BEGIN/), 2);
  assert.equal(pool.released, [true, false]);
  assert.is(await storage.getWebhook('acct_a', 'wh_reconnect_ended'), null);
});

test('a database that stays away is answered 503 after waitForDatabaseMs, having changed nothing', async () => {
  const { pool, storage } = await open({ waitForDatabaseMs: 400 });
  pool.down = refused;
  const started = Date.now();
  const error = await storage
    .insertWebhook(webhookRecord({ id: 'wh_reconnect_down' }))
    .catch((caught: unknown) => caught);
  const waited = Date.now() - started;
  assert.ok(isPortalError(error, 'STORAGE_UNAVAILABLE'));
  assert.match((error as Error).message, 'nothing was changed');
  assert.ok(waited >= 300 && waited < 2000, `gave up after ${waited} ms`);
  pool.down = null;
  assert.is(await storage.getWebhook('acct_a', 'wh_reconnect_down'), null);
});

test("an error of the statement itself is not retried: a unique violation is RECORD_EXISTS, the driver's error its cause", async () => {
  const { pool, storage } = await open();
  pool.failNext(/^INSERT/, duplicate);
  const error = await storage
    .insertWebhook(webhookRecord({ id: 'wh_reconnect_dup' }))
    .catch((caught: unknown) => caught);
  assert.not.ok(isPortalError(error, 'STORAGE_UNAVAILABLE'));
  assert.ok(isPortalError(error, 'RECORD_EXISTS'));
  assert.is(((error as Error).cause as { code?: string }).code, '23505');
  assert.is(pool.count(/^INSERT/), 1);
});

test('blob chunks refused, or written with their answer lost, are written again, and the blob reads back whole', async () => {
  const { pool, blobs } = await open();
  pool.failNext(/blob_chunks/, refused);
  pool.answerLost(/blob_chunks/, lost);
  const bytes = Buffer.alloc(300_000, 7);
  await blobs.put(
    'blob_reconnect',
    (async function* () {
      yield bytes.subarray(0, 100_000);
      yield bytes.subarray(100_000);
    })(),
  );
  const chunks: Buffer[] = [];
  for await (const chunk of (await blobs.get('blob_reconnect'))!) chunks.push(Buffer.from(chunk));
  assert.ok(Buffer.concat(chunks).equals(bytes));
  // Two chunks of 256 KiB: the first tried three times.
  assert.is(pool.count(/INSERT INTO .*blob_chunks/), 4);
});

test('over HTTP: 503 with Retry-After and a message while the database is away, a warning logged, 200 once it is back', async () => {
  const { pool, storage, blobs } = await open({ waitForDatabaseMs: 200 });
  const warnings: { object: object; message?: string }[] = [];
  const ignore = () => {};
  const logger: Logger = {
    debug: ignore,
    info: ignore,
    error: ignore,
    warn: (object, message) => warnings.push({ object, message }),
  };
  await withPortal(
    { storage, blobs, logger, signingKeys: [SIGNING_KEY_1], webhooks: { tick: '0 0 1 1 *' } },
    async (app) => {
      pool.down = refused;
      const res = await app.api('/webhooks');
      assert.is(res.status, 503);
      assert.is(res.headers.get('retry-after'), '1');
      assert.match((await json(res)).message, 'The database is unavailable');
      const logged = warnings.filter((entry) => 'requestId' in entry.object);
      assert.is(logged.length, 1);
      assert.is(logged[0]!.message, 'The database is unavailable; nothing was changed, try again shortly');
      assert.match(JSON.stringify(logged[0]!.object), 'ECONNREFUSED');
      pool.down = null;
      const back = await app.api('/webhooks');
      assert.is(back.status, 200);
    },
  );
});

test.run();
