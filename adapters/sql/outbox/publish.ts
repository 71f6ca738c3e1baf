/**
 * Publishing: an event's deliveries made by `newDelivery` for each webhook it is for (`isRecipient`),
 * the later ones of an ordering key held behind the first (`inKeyOrder`), stored with their events,
 * and the workers told by NOTIFY when the transaction commits.
 */
import { inKeyOrder, isRecipient, newDelivery } from '../../../src/rules/deliveries.js';
import type { DeliveryTarget, Storage } from '../../../src/ports.js';
import type { DeliveryRecord, EventFilter, EventRecord } from '../../../src/records.js';
import { createBatcher } from '../batch.js';
import type { Db, Queryable, Row } from '../client.js';
import type { Names } from '../schema.js';
import type { orderingKeys } from '../storage-keys.js';
import { deliveryColumnsOf, insertDeliveriesStatement } from '../storage-rows.js';
import { currentGeneration } from './partitions.js';
import { currentSlot, noteMade, publishedSlot } from './ring.js';

/** Transactions storing publishes at once: more calls wait, and are stored together (see batch.ts). */
const MAX_STORING = 2;
/** Events of waiting calls stored in one transaction at most; a larger publish goes alone. */
const MAX_GROUP_EVENTS = 512;

/** The columns of `insertEvents`, as arrays. */
function eventColumnsOf(batch: EventRecord[]): unknown[] {
  return [
    batch.map((event) => event.id),
    batch.map((event) => event.accountId),
    batch.map((event) => event.type),
    batch.map((event) => event.createdAt),
    batch.map((event) => (event.data === undefined ? null : JSON.stringify(event.data))),
    batch.map((event) => event.orderingKey ?? null),
  ];
}

/** The deliveries of the events to the webhooks (rows of id, account_id, type, filter) each is for. */
function deliveriesOf(batch: EventRecord[], rows: Row[], target?: DeliveryTarget): DeliveryRecord[] {
  const made: DeliveryRecord[] = [];
  if (rows.length === 0) return made;
  const webhooks = rows.map((row) => ({
    id: row.id as string,
    accountId: row.account_id as string,
    type: row.type as string,
    ...(row.filter === null || row.filter === undefined
      ? {}
      : { filter: JSON.parse(row.filter as string) as EventFilter }),
  }));
  for (const event of batch) {
    for (const webhook of webhooks) {
      if (webhook.accountId !== event.accountId || !isRecipient(webhook, event, target)) continue;
      made.push(newDelivery(event, webhook.id));
    }
  }
  return made;
}

export interface Publishing extends Pick<Storage, 'publishEvents'> {
  /** Stores events and their deliveries inside the caller's transaction; resolves the deliveries. */
  storeEvents(tx: Queryable, batch: EventRecord[]): Promise<DeliveryRecord[]>;
}

/**
 * The statement that wakes the workers listening on a channel. Inside the publishing transaction:
 * PostgreSQL delivers the notification when it commits, and never when it rolls back, so a listener
 * never hears of deliveries that do not exist.
 */
export const NOTIFY_WORK = `SELECT pg_notify($1::text, '')`;

export function createPublish(
  db: Db,
  names: Names,
  keys: ReturnType<typeof orderingKeys>,
  announce: { channel: string } | undefined,
): Publishing {
  const { table } = names;
  // In the current generation, answered so that the deliveries name it.
  const insertEvents = `INSERT INTO ${table('events')} (id, account_id, type, created_at, data, ordering_key, gen)
    SELECT made.*, ${currentGeneration(names)}
    FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::json[], $6::text[]) AS made
    RETURNING gen`;
  // FOR KEY SHARE: a webhook being deleted meanwhile waits for this transaction, and then cancels
  // the deliveries made here, instead of leaving them pending for a webhook that is gone.
  const matchingWebhooks = `SELECT id, account_id, type, filter::text FROM ${table('webhooks')}
    WHERE (account_id, type) IN (SELECT * FROM unnest($1::text[], $2::text[]))
    ORDER BY created_at, id
    FOR KEY SHARE`;
  const targetWebhook = `SELECT id, account_id, type, filter::text FROM ${table('webhooks')} WHERE id = $1::text FOR KEY SHARE`;
  // Stores what newDelivery made; attempts and the lease start empty (the columns' defaults).
  const insertDeliveries = insertDeliveriesStatement(names, true);
  const findWebhooks = `SELECT id, account_id, type, filter::text FROM ${table('webhooks')}
    WHERE (account_id, type) IN (SELECT * FROM unnest($1::text[], $2::text[]))
    ORDER BY created_at, id`;
  // storeAtOnce's statement: $1–$6 the events, $7 the webhooks, $8–$16 the deliveries, $17 the
  // channel to notify (NULL: none). The events and their deliveries name the generation current when
  // the statement starts. The notification goes out when the statement commits. An unkeyed delivery
  // goes to the ring's current slot (unlogged), and is noted there in the logged portal_queue_made;
  // a keyed one to the kept partition (ring.ts).
  const eventsStored = `SELECT id FROM ${table('events')} WHERE id = ANY ($1::text[]) LIMIT 1`;
  // Stored, and maybe finished since (in the log).
  const deliveriesStored = `SELECT id FROM ${table('queue')} WHERE id = ANY ($1::text[])
    UNION ALL SELECT id FROM ${table('deliveries')} WHERE id = ANY ($1::text[])`;
  const storeAll = (keyed: boolean) => `WITH generation AS (
      SELECT ${currentGeneration(names)} AS gen
    ), events AS (
      INSERT INTO ${table('events')} (id, account_id, type, created_at, data, ordering_key, gen)
      SELECT made.*, generation.gen
      FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::json[], $6::text[]) AS made, generation
    ), webhooks AS (
      SELECT id FROM ${table('webhooks')} WHERE id = ANY ($7::text[]) FOR KEY SHARE
    ), stored AS (
      INSERT INTO ${table('queue')} (id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, ordering_key, event_gen, slot)
      SELECT made.id, made.account_id, made.webhook_id, made.event_id, made.status,
        -- Held when its key holds a pending delivery already (keyed publishes run this under their
        -- keys' locks, taken by a statement before this one). A later one of its key in this
        -- publish comes held already.
        ${
          // Without a key, no probe: its plan would lock every partition of the queue and its index.
          keyed
            ? `CASE WHEN made.ordering_key IS NULL OR made.next_attempt_at IS NULL THEN made.next_attempt_at
                WHEN EXISTS (SELECT 1 FROM ${table('queue')} AS p
                  WHERE p.webhook_id = made.webhook_id AND p.ordering_key = made.ordering_key) THEN NULL
                ELSE made.next_attempt_at END`
            : 'made.next_attempt_at'
        },
        made.created_at, made.event_type, made.ordering_key, generation.gen,
        ${keyed ? publishedSlot(names, 'made.ordering_key') : currentSlot(names)}
      FROM unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::timestamptz[], $14::timestamptz[], $15::text[], $16::text[])
        AS made(id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, ordering_key), generation
      WHERE made.webhook_id IN (SELECT id FROM webhooks)
      RETURNING id, next_attempt_at, event_id, webhook_id, event_gen, slot
    ), noted AS (${noteMade(names, 'stored')}
    ), announced AS (
      SELECT pg_notify($17::text, '') WHERE $17::text IS NOT NULL AND EXISTS (SELECT 1 FROM stored)
    )
    SELECT ARRAY(SELECT id FROM stored) AS stored, ARRAY(SELECT id FROM stored WHERE next_attempt_at IS NULL) AS held,
      (SELECT count(*) FROM announced) AS announced`;

  const storeUnkeyed = storeAll(false);
  const storeKeyed = storeAll(true);

  async function storeEvents(tx: Queryable, batch: EventRecord[], target?: DeliveryTarget): Promise<DeliveryRecord[]> {
    if (batch.length === 0) return [];
    const [stored] = await tx.query(insertEvents, eventColumnsOf(batch));
    const webhooks = target
      ? await tx.query(targetWebhook, [target.webhookId])
      : await tx.query(matchingWebhooks, [batch.map((event) => event.accountId), batch.map((event) => event.type)]);
    const created = await keys.inOrder(tx, deliveriesOf(batch, webhooks, target));
    if (created.length > 0) {
      await tx.query(insertDeliveries, [...deliveryColumnsOf(created), created.map(() => stored!.gen)]);
      if (announce !== undefined) await tx.query(NOTIFY_WORK, [announce.channel]);
    }
    return created;
  }

  const storeAlone = (batch: EventRecord[], target?: DeliveryTarget) =>
    db.transaction((tx) => storeEvents(tx, batch, target));

  /**
   * storeEvents for a publish of its own, in two round trips instead of a transaction's six: the
   * matching webhooks are read first, and the events with their deliveries are stored by one
   * statement, which locks those webhooks FOR KEY SHARE and stores the deliveries of the ones still
   * there. A webhook deleted in between gets no delivery (one being deleted is waited for); one
   * created in between gets none either, as if it came after the publish.
   */
  async function storeAtOnce(batch: EventRecord[]): Promise<DeliveryRecord[]> {
    const webhooks = await db.query(findWebhooks, [
      batch.map((event) => event.accountId),
      batch.map((event) => event.type),
    ]);
    // The later ones of a key in this publish wait for its first; the statement holds the first
    // when the key is taken already.
    const made = inKeyOrder(deliveriesOf(batch, webhooks), () => false);
    const params = [
      ...eventColumnsOf(batch),
      [...new Set(made.map((delivery) => delivery.webhookId))],
      ...deliveryColumnsOf(made),
      announce?.channel ?? null,
    ];
    const keyed = made.filter((delivery) => delivery.orderingKey !== null);
    let row: Row | undefined;
    if (keyed.length === 0) {
      // One statement stores them all or none: when its answer is lost (the server restarting), the
      // events' ids say which, and the deliveries it stored are read back by theirs.
      const settle = async () => {
        const found = await db.query(eventsStored, [batch.map((event) => event.id)]);
        if (found.length === 0) return null;
        const stored = await db.query(deliveriesStored, [made.map((delivery) => delivery.id)]);
        return [{ stored: stored.map((row) => row.id as string), held: [] }];
      };
      [row] = await db.query(storeUnkeyed, params, { settle });
    } else {
      // Keyed: under the keys' locks, taken by a statement of their own before it.
      [row] = await db.transaction(async (tx) => {
        await keys.lock(
          tx,
          keyed.map((delivery) => [delivery.webhookId, delivery.orderingKey!]),
        );
        return tx.query(storeKeyed, params);
      });
    }
    if (made.length === 0) return [];
    const stored = new Set(row!.stored as string[]);
    const held = new Set(row!.held as string[]);
    return made
      .filter((delivery) => stored.has(delivery.id))
      .map((delivery) =>
        held.has(delivery.id) && delivery.nextAttemptAt !== null ? { ...delivery, nextAttemptAt: null } : delivery,
      );
  }

  /** Publishes at once share a transaction (see batch.ts); each call gets its own events' deliveries. */
  const publishTogether = createBatcher<EventRecord[], DeliveryRecord[]>({
    maxRunning: MAX_STORING,
    maxSize: MAX_GROUP_EVENTS,
    size: (batch) => batch.length,
    async run(batches) {
      const byEvent = new Map<string, DeliveryRecord[]>();
      const all = batches.flat();
      for (const delivery of await storeAtOnce(all)) {
        const list = byEvent.get(delivery.eventId);
        if (list === undefined) byEvent.set(delivery.eventId, [delivery]);
        else list.push(delivery);
      }
      return batches.map((batch) => batch.flatMap((event) => byEvent.get(event.id) ?? []));
    },
  });

  return {
    storeEvents,
    async publishEvents(batch, target) {
      if (batch.length === 0) return [];
      // A publish to one webhook (a test event, a redeliver) is rare: it goes on its own.
      if (target !== undefined) return storeAlone(batch, target);
      return publishTogether(batch);
    },
  };
}
