import { inKeyOrder, keyOf } from '../../src/rules/deliveries.js';
import type { DeliveryRecord } from '../../src/records.js';
import type { Queryable } from './client.js';
import type { Names } from './schema.js';

/** First key of the ordering keys' advisory locks: 'cpok' in ASCII. */
const KEY_LOCK_CLASS = 0x63706f6b;

/**
 * Ordering keys on PostgreSQL (`rules/deliveries.ts`, "Ordering keys"). Whether a key is taken and
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
  const taken = `SELECT DISTINCT webhook_id, ordering_key FROM ${table('queue')}
    WHERE ordering_key IS NOT NULL
      AND (webhook_id, ordering_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`;
  // For each key ($1, $2), its earliest held delivery is due at $3, unless one has the key's turn
  // already. SKIP LOCKED: a row locked meanwhile is being cancelled (its webhook deleted or
  // disabled), which cancels the rest of the key too.
  const releaseNext = `WITH ended AS (
      SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS k(webhook_id, ordering_key, at)
    ), next AS (
      SELECT first.id, ended.at FROM ended
      CROSS JOIN LATERAL (
        SELECT d.id FROM ${table('queue')} AS d
        WHERE d.webhook_id = ended.webhook_id AND d.ordering_key = ended.ordering_key AND d.next_attempt_at IS NULL
        ORDER BY d.seq
        LIMIT 1
        FOR UPDATE OF d SKIP LOCKED
      ) AS first
      WHERE NOT EXISTS (
        SELECT 1 FROM ${table('queue')} AS t
        WHERE t.webhook_id = ended.webhook_id AND t.ordering_key = ended.ordering_key AND t.next_attempt_at IS NOT NULL)
    )
    UPDATE ${table('queue')} AS d SET next_attempt_at = next.at FROM next WHERE d.id = next.id
    RETURNING d.id`;

  const lockAll = (tx: Queryable, pairs: [webhookId: string, orderingKey: string][]) =>
    tx.query(lock, [pairs.map(([webhookId]) => webhookId), pairs.map(([, orderingKey]) => orderingKey)]);

  return {
    /** Locks the keys, each a webhook and an ordering key, until the transaction ends. */
    lock: (tx: Queryable, pairs: [webhookId: string, orderingKey: string][]) => lockAll(tx, pairs),

    /**
     * `made` in key order (`inKeyOrder`), inside the transaction that stores them: their keys are
     * locked, and a key that holds a pending delivery already makes its new ones wait.
     */
    async inOrder(tx: Queryable, made: DeliveryRecord[]): Promise<DeliveryRecord[]> {
      const pairs = new Map<string, [string, string]>();
      for (const delivery of made) {
        if (delivery.orderingKey !== null)
          pairs.set(keyOf(delivery.webhookId, delivery.orderingKey), [delivery.webhookId, delivery.orderingKey]);
      }
      if (pairs.size === 0) return made;
      const keys = [...pairs.values()];
      await lockAll(tx, keys);
      const rows = await tx.query(taken, [
        keys.map(([webhookId]) => webhookId),
        keys.map(([, orderingKey]) => orderingKey),
      ]);
      const busy = new Set(rows.map((row) => keyOf(row.webhook_id as string, row.ordering_key as string)));
      return inKeyOrder(made, (webhookId, orderingKey) => busy.has(keyOf(webhookId, orderingKey)));
    },

    /**
     * After deliveries ended their keys' turns (one a key), in the same transaction and under the
     * keys' locks, which the caller took before it changed the deliveries: releases each key's next,
     * due at its `at`.
     */
    async endTurns(tx: Queryable, ended: { webhookId: string; orderingKey: string; at: string }[]): Promise<void> {
      if (ended.length === 0) return;
      await tx.query(releaseNext, [
        ended.map((one) => one.webhookId),
        ended.map((one) => one.orderingKey),
        ended.map((one) => one.at),
      ]);
    },
  };
}

/** A string as an SQL literal. */
const quoted = (text: string) => `'${text.replaceAll("'", "''")}'`;
