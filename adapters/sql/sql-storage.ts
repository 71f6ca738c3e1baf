import { PortalError } from '../../src/errors.js';
import type { Storage } from '../../src/ports.js';
import type { FileEntryRecord } from '../../src/records.js';
import { isPool, lockWithin, wrapClient, type SqlClient } from './client.js';
import { listenForWork, workChannel, type ListeningPool } from './listen.js';
import { guardUntilOpen } from './guard.js';
import { migrate } from './migrations.js';
import { resolveNames, type SqlOptions } from './schema.js';
import { createAgreements } from './storage-agreements.js';
import { createIdempotencyKeys } from './storage-idempotency.js';
import { createPortalSessions } from './storage-sessions.js';
import { STORAGE_MIGRATIONS } from './storage-migrations.js';
import { createOutbox } from './outbox/index.js';
import { createPartitions } from './outbox/partitions.js';
import { createRetention } from './outbox/retention.js';
import { createHealth } from './storage-health.js';
import { createCallStats } from './storage-call-stats.js';
import {
  finishedFrom,
  attachmentColumns,
  fileEntryColumns,
  listedEntryColumns,
  toAttachment,
  toListedEntry,
  toFileEntry,
  toWebhook,
  webhookColumns,
} from './storage-rows.js';

/** First key of the advisory lock that counts an account's webhooks: 'cpwh' in ASCII. */
const WEBHOOK_LOCK_CLASS = 0x63707768;

export interface SqlStorageOptions extends SqlOptions {
  /** A `pg.Pool`, a PGlite instance, or anything with `query(text, params) → Promise<{ rows }>`. Never closed here. */
  client: SqlClient;
}

/**
 * Records in PostgreSQL (through `pg`) or PGlite: one table per record kind, migrated by `open()`.
 * Many instances may share one database: the outbox claim hands a delivery to one of them at a time.
 */
export function sqlStorage(options: SqlStorageOptions): Storage {
  const who = 'sqlStorage';
  const db = wrapClient(
    options?.client,
    who,
    options?.preparedStatements ?? true,
    options?.waitForDatabaseMs ?? 10_000,
  );
  const names = resolveNames(options, who);
  const { table } = names;
  // On a pg.Pool other instances may share the database: publishes are announced to them (NOTIFY)
  // and `subscribe` listens. PGlite and a single connection serve one process, which pokes itself.
  const pool = isPool(options.client) ? (options.client as unknown as ListeningPool) : undefined;
  const channel = workChannel(names.schema);
  const outbox = createOutbox(db, names, pool === undefined ? undefined : { channel });
  const retention = createRetention(db, names);
  const partitions = createPartitions(db, names);
  const idempotencyKeys = createIdempotencyKeys(db, names);
  const agreements = createAgreements(db, names, outbox, idempotencyKeys);
  const health = createHealth(db, names, pool === undefined ? undefined : { channel });
  const callStats = createCallStats(db, names);

  const sql = {
    insertWebhook: `INSERT INTO ${table('webhooks')} (id, account_id, type, url, secret, created_at, filter, rate_limit)
      VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::timestamptz, $7::json, $8::int)`,
    // The account's webhooks are counted under a lock of the account (released at commit), so two
    // creates at once cannot both see room for one more; the count is a statement after the lock,
    // so in READ COMMITTED it sees what a create that held the lock before committed.
    insertWebhookWithin: `INSERT INTO ${table('webhooks')} (id, account_id, type, url, secret, created_at, filter, rate_limit)
      SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::timestamptz, $7::json, $8::int
      WHERE (SELECT count(*) FROM ${table('webhooks')} WHERE account_id = $2::text) < $9::int
      RETURNING id`,
    getWebhook: `SELECT ${webhookColumns()} FROM ${table('webhooks')} WHERE id = $2::text AND account_id = $1::text`,
    listWebhooks: `SELECT ${webhookColumns()} FROM ${table('webhooks')} WHERE account_id = $1::text ORDER BY created_at, seq`,
    // The right-hand sides read the row as it was: previous_secret takes the secret being replaced.
    // Two rotations at once: the row lock makes the later one re-read the row the earlier committed.
    rotateWebhookSecret: `UPDATE ${table('webhooks')}
      SET previous_secret = CASE WHEN $4::timestamptz IS NULL THEN NULL ELSE secret END,
        previous_secret_until = $4::timestamptz,
        secret = $3::text
      WHERE id = $2::text AND account_id = $1::text
      RETURNING ${webhookColumns()}`,
    // $3: whether the filter changes, to $4; $5: whether the rate limit changes, to $6. With a new
    // limit, the deliveries given a slot of a later second than $7 (now) are due now, to be paced
    // at the new one (or sent without), and the pacing goes back to now (restartedPace of
    // src/rules/rate-limit.ts). Every SET reads the row as it was.
    updateWebhook: `WITH changed AS (
        UPDATE ${table('webhooks')} AS w
        SET filter = CASE WHEN $3::boolean THEN $4::json ELSE w.filter END,
          rate_limit = CASE WHEN $5::boolean THEN $6::int ELSE w.rate_limit END,
          pace_second = CASE WHEN $5::boolean AND w.pace_second > $7::timestamptz THEN $7::timestamptz ELSE w.pace_second END,
          pace_used = CASE WHEN $5::boolean AND w.pace_second > $7::timestamptz THEN w.rate_limit ELSE w.pace_used END
        FROM (SELECT rate_limit AS before FROM ${table('webhooks')} WHERE id = $2::text AND account_id = $1::text FOR UPDATE) AS old
        WHERE w.id = $2::text AND w.account_id = $1::text
        RETURNING ${webhookColumns('w')}, old.before IS DISTINCT FROM w.rate_limit AS repace
      ), repaced AS (
        UPDATE ${table('queue')} AS d SET paced = false, next_attempt_at = $7::timestamptz
        WHERE d.webhook_id = $2::text AND d.paced AND d.next_attempt_at > $7::timestamptz
          AND (SELECT repace FROM changed)
      )
      SELECT * FROM changed`,
    deleteWebhook: `DELETE FROM ${table('webhooks')} WHERE id = $2::text AND account_id = $1::text RETURNING id`,
    // `cancel` of src/rules/deliveries.ts, on every pending delivery of the webhook. A separate
    // statement after the delete, so that in READ COMMITTED it sees deliveries that a publish
    // holding the webhook (FOR KEY SHARE) committed while the delete waited for it.
    cancelDeliveries: `WITH cancelled AS (
        DELETE FROM ${table('queue')} WHERE webhook_id = $1::text RETURNING *
      ) ${finishedFrom(names, 'cancelled', "'cancelled'")}`,
    deleteHealth: `DELETE FROM ${table('webhook_health')} WHERE webhook_id = $1::text`,

    insertFileEntry: `INSERT INTO ${table('file_entries')}
      (id, account_id, directory_id, type, name, size, mime, file_share_id, created_at)
      VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint, $7::text, $8::text, $9::timestamptz)`,
    getFileEntry: `SELECT ${fileEntryColumns()} FROM ${table('file_entries')} WHERE id = $2::text AND account_id = $1::text`,
    // Two statements rather than IS NOT DISTINCT FROM, which no index serves. In about the listing
    // order (directories first, then by name without regard to case, then by id), so that the
    // service's sort, which settles the order, finds it sorted: on 1,000 entries a sorted input
    // costs it a pass instead of ~10,000 comparisons.
    listRoot: `SELECT ${listedEntryColumns()} FROM ${table('file_entries')} WHERE account_id = $1::text AND directory_id IS NULL
      ORDER BY type <> 'directory', lower(name) COLLATE "C", id`,
    listDirectory: `SELECT ${listedEntryColumns()} FROM ${table('file_entries')} WHERE account_id = $1::text AND directory_id = $2::text
      ORDER BY type <> 'directory', lower(name) COLLATE "C", id`,
    deleteFileEntry: `DELETE FROM ${table('file_entries')} WHERE id = $2::text AND account_id = $1::text RETURNING id`,

    insertAttachment: `INSERT INTO ${table('attachments')} (id, account_id, ticket_id, message_id, name, mime, size, created_at)
      VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint, $8::timestamptz)`,
    getAttachment: `SELECT ${attachmentColumns()} FROM ${table('attachments')} WHERE id = $2::text AND account_id = $1::text`,
    deleteAttachment: `DELETE FROM ${table('attachments')} WHERE id = $2::text AND account_id = $1::text RETURNING id`,

    isBlobReferenced: `SELECT EXISTS (SELECT 1 FROM ${table('file_entries')} WHERE id = $1::text)
      OR EXISTS (SELECT 1 FROM ${table('attachments')} WHERE id = $1::text)
      OR EXISTS (SELECT 1 FROM ${table('agreement_documents')} WHERE id = $1::text)
      -- A completed copy is kept under the key its document names (domain/completed-copies.ts).
      OR EXISTS (SELECT 1 FROM ${table('agreement_documents')} WHERE signed_file_key = $1::text)
      -- A certificate is kept under agc_ and its agreement id's own part (domain/certificates.ts).
      OR (left($1::text, 4) = 'agc_' AND EXISTS (SELECT 1 FROM ${table('agreements')} WHERE id = 'agr_' || substr($1::text, 5))) AS referenced`,
  };

  const fileEntryParams = (entry: FileEntryRecord) => [
    entry.id,
    entry.accountId,
    entry.directoryId,
    entry.type,
    entry.name,
    entry.size,
    entry.mime,
    entry.fileShareId,
    entry.createdAt,
  ];

  const storage: Storage = {
    async insertWebhook(webhook, limits, idempotency) {
      const filter = webhook.filter === undefined ? null : JSON.stringify(webhook.filter);
      const params = [
        webhook.id,
        webhook.accountId,
        webhook.type,
        webhook.url,
        webhook.secret,
        webhook.createdAt,
        filter,
        webhook.rateLimit ?? null,
      ];
      const max = limits?.maxPerAccount;
      if (max === undefined && idempotency === undefined) {
        await db.query(sql.insertWebhook, params);
        return;
      }
      await db.transaction(async (tx) => {
        if (idempotency !== undefined) await idempotencyKeys.complete(tx, webhook.accountId, idempotency);
        if (max === undefined) return void (await tx.query(sql.insertWebhook, params));
        await lockWithin(tx, WEBHOOK_LOCK_CLASS, `${names.schema}:${webhook.accountId}`);
        // Thrown inside, so that the completed key rolls back with the refused insert.
        if ((await tx.query(sql.insertWebhookWithin, [...params, max])).length === 0)
          throw new PortalError('WEBHOOKS_LIMIT', max);
      });
    },
    async getWebhook(accountId, id) {
      const [row] = await db.query(sql.getWebhook, [accountId, id]);
      return row === undefined ? null : toWebhook(row);
    },
    async listWebhooks(accountId) {
      return (await db.query(sql.listWebhooks, [accountId])).map((row) => toWebhook(row));
    },
    async updateWebhook(accountId, id, { filter, rateLimit }, now) {
      const [row] = await db.query(sql.updateWebhook, [
        accountId,
        id,
        filter !== undefined,
        filter === undefined || filter === null ? null : JSON.stringify(filter),
        rateLimit !== undefined,
        rateLimit ?? null,
        now,
      ]);
      if (row !== undefined && row.repace === true) outbox.paceSoon();
      return row === undefined ? null : toWebhook(row);
    },
    async rotateWebhookSecret(accountId, id, rotation) {
      const [row] = await db.query(sql.rotateWebhookSecret, [
        accountId,
        id,
        rotation.secret,
        rotation.previousSecretUntil,
      ]);
      return row === undefined ? null : toWebhook(row);
    },
    async deleteWebhook(accountId, id) {
      return db.transaction(async (tx) => {
        const deleted = await tx.query(sql.deleteWebhook, [accountId, id]);
        if (deleted.length === 0) return false;
        await tx.query(sql.cancelDeliveries, [id]);
        await tx.query(sql.deleteHealth, [id]);
        return true;
      });
    },

    async insertFileEntry(entry) {
      await db.query(sql.insertFileEntry, fileEntryParams(entry));
    },
    async getFileEntry(accountId, id) {
      const [row] = await db.query(sql.getFileEntry, [accountId, id]);
      return row === undefined ? null : toFileEntry(row);
    },
    async listFileEntries(accountId, directoryId) {
      const rows =
        directoryId === null
          ? await db.query(sql.listRoot, [accountId])
          : await db.query(sql.listDirectory, [accountId, directoryId]);
      return rows.map((row) => toListedEntry(row, accountId, directoryId));
    },
    async deleteFileEntry(accountId, id) {
      return (await db.query(sql.deleteFileEntry, [accountId, id])).length === 1;
    },

    ...agreements,

    async insertAttachment(attachment) {
      await db.query(sql.insertAttachment, [
        attachment.id,
        attachment.accountId,
        attachment.ticketId,
        attachment.messageId,
        attachment.name,
        attachment.mime,
        attachment.size,
        attachment.createdAt,
      ]);
    },
    async getAttachment(accountId, id) {
      const [row] = await db.query(sql.getAttachment, [accountId, id]);
      return row === undefined ? null : toAttachment(row);
    },
    async deleteAttachment(accountId, id) {
      return (await db.query(sql.deleteAttachment, [accountId, id])).length === 1;
    },

    publishEvents: outbox.publishEvents,
    recentEvents: outbox.recentEvents,
    getDelivery: outbox.getDelivery,
    listDeliveries: outbox.listDeliveries,
    claimDeliveries: outbox.claimDeliveries,
    deliveryQueue: outbox.deliveryQueue,
    callStats: callStats.callStats,
    recordAttempt: outbox.recordAttempt,
    giveBackDeliveries: outbox.giveBackDeliveries,
    redeliver: outbox.redeliver,
    ...health,

    rotateHistory: partitions.rotateHistory,

    async removeExpired(before, limit) {
      const gone = await retention.removeExpired(before, limit);
      // Hours of call counts past the span they are kept for go with the same tick.
      await callStats.sweepCallStats(limit);
      return gone;
    },

    async isBlobReferenced(key) {
      const [row] = await db.query(sql.isBlobReferenced, [key]);
      return row?.referenced === true;
    },

    claimIdempotencyKey: idempotencyKeys.claimIdempotencyKey,
    releaseIdempotencyKey: idempotencyKeys.releaseIdempotencyKey,
    sweepIdempotencyKeys: idempotencyKeys.sweepIdempotencyKeys,

    ...createPortalSessions(db, names),
  };

  const guarded = guardUntilOpen(who, storage, () => migrate(db, names, 'storage', STORAGE_MIGRATIONS));
  if (pool === undefined) return guarded;
  const listeners = new Set<() => void>();
  const close = guarded.close;
  return Object.assign(guarded, {
    subscribe(onWork: () => void, onError: (error: unknown) => void = () => {}) {
      const stop = listenForWork(pool, channel, onWork, onError);
      const unsubscribe = () => {
        listeners.delete(unsubscribe);
        stop();
      };
      listeners.add(unsubscribe);
      return unsubscribe;
    },
    async close() {
      for (const unsubscribe of [...listeners]) unsubscribe();
      await close();
    },
  });
}
