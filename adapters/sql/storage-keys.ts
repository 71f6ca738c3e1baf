import { inKeyOrder, keyOf } from '../../src/domain/deliveries.js';
import type { DeliveryRecord } from '../../src/records.js';
import type { Queryable } from './client.js';
import type { Names } from './schema.js';

/** First key of the ordering keys' advisory locks: 'cpok' in ASCII. */
const KEY_LOCK_CLASS = 0x63706f6b;

/**
 * Ordering keys on PostgreSQL (`domain/deliveries.ts`, "Ordering keys"). Whether a key is taken and
 * what is done about it are decided under a transaction-scoped advisory lock of the key, by a
 * statement that starts after the lock is held: in READ COMMITTED it then sees every delivery that
 * the lock's previous holder committed. A statement that took the lock itself could not: its
 * snapshot is taken before it waits. Each transaction locks its keys in one order (by their hash),
 * so two never wait for each other.
 */
export function orderingKeys({ table, schema }: Names) {
  // The keys as (webhook, key) pairs, $1 and $2. The schema is part of the hash, so that two
  // portals sharing a database do not wait for each other's keys; neither it nor a webhook id
  // holds a colon.
  const lock = `SELECT count(pg_advisory_xact_lock(${KEY_LOCK_CLASS}, keys.h)) AS locked FROM (
      SELECT DISTINCT hashtext(${quoted(schema)} || ':' || p.webhook_id || ':' || p.ordering_key) AS h
      FROM unnest($1::text[], $2::text[]) AS p(webhook_id, ordering_key)
      ORDER BY h) AS keys`;
  const taken = `SELECT DISTINCT webhook_id, ordering_key FROM ${table('deliveries')}
    WHERE status = 'pending' AND ordering_key IS NOT NULL
      AND (webhook_id, ordering_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`;
  // The earliest held delivery of the key ($1, $2) is due at $3, unless one has the key's turn
  // already. SKIP LOCKED: a row locked meanwhile is being cancelled (its webhook deleted or
  // disabled), which cancels the rest of the key too.
  const releaseNext = `UPDATE ${table('deliveries')} SET next_attempt_at = $3::timestamptz
    WHERE id = (
      SELECT id FROM ${table('deliveries')}
      WHERE webhook_id = $1::text AND ordering_key = $2::text AND status = 'pending' AND next_attempt_at IS NULL
      ORDER BY seq
      LIMIT 1
      FOR UPDATE SKIP LOCKED)
    AND NOT EXISTS (
      SELECT 1 FROM ${table('deliveries')}
      WHERE webhook_id = $1::text AND ordering_key = $2::text AND status = 'pending' AND next_attempt_at IS NOT NULL)
    RETURNING id`;

  const lockAll = (tx: Queryable, pairs: [string, string][]) =>
    tx.query(lock, [pairs.map(([webhookId]) => webhookId), pairs.map(([, orderingKey]) => orderingKey)]);

  return {
    /** Locks the key of the webhook `webhookId` until the transaction ends. */
    lock: (tx: Queryable, webhookId: string, orderingKey: string) => lockAll(tx, [[webhookId, orderingKey]]),

    /**
     * `made` in key order (`inKeyOrder`), inside the transaction that stores them: their keys are
     * locked, and a key that holds a pending delivery already makes its new ones wait.
     */
    async inOrder(tx: Queryable, made: DeliveryRecord[]): Promise<DeliveryRecord[]> {
      const pairs = new Map<string, [string, string]>();
      for (const delivery of made) {
        if (delivery.orderingKey !== null) pairs.set(keyOf(delivery.webhookId, delivery.orderingKey), [delivery.webhookId, delivery.orderingKey]);
      }
      if (pairs.size === 0) return made;
      const keys = [...pairs.values()];
      await lockAll(tx, keys);
      const rows = await tx.query(taken, [keys.map(([webhookId]) => webhookId), keys.map(([, orderingKey]) => orderingKey)]);
      const busy = new Set(rows.map((row) => keyOf(row.webhook_id as string, row.ordering_key as string)));
      return inKeyOrder(made, (webhookId, orderingKey) => busy.has(keyOf(webhookId, orderingKey)));
    },

    /** After a delivery of the key ended its turn, in the same transaction: locks the key and releases its next one, due at `at`. */
    async endTurn(tx: Queryable, webhookId: string, orderingKey: string, at: string): Promise<void> {
      await lockAll(tx, [[webhookId, orderingKey]]);
      await tx.query(releaseNext, [webhookId, orderingKey, at]);
    },
  };
}

export type OrderingKeys = ReturnType<typeof orderingKeys>;

/** A string as an SQL literal. */
const quoted = (text: string) => `'${text.replaceAll("'", "''")}'`;
