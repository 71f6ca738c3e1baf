import type {
  AttachmentRecord,
  DeliveryAttempt,
  DeliveryRecord,
  DeliveryStatus,
  EventFilter,
  EventRecord,
  FileEntryRecord,
  FileEntryType,
  WebhookRecord,
} from '../../src/records.js';
import type { Row } from './client.js';
import { atomOf, type Names } from './schema.js';
import { KEPT_SLOT, noteMade, publishedSlot } from './outbox/ring.js';

/**
 * Column lists and row readers, one pair per record. Every date-time is selected as ATOM text and
 * every JSON column as text, so the records do not depend on the driver's type parsers (pg and
 * PGlite differ: `int8` is a string in one and a number in the other, `bytea` a Buffer or a
 * Uint8Array). `alias` qualifies the columns, `as` prefixes their output names (for joins).
 */
const columns = (list: [string, string][], alias: string, as: string) =>
  list
    .map(([expression, name]) => `${expression.replaceAll('@', alias === '' ? '' : alias + '.')} AS ${as}${name}`)
    .join(', ');

const text = (row: Row, key: string) => row[key] as string;
const textOrNull = (row: Row, key: string) => (row[key] ?? null) as string | null;
/** `bigint` columns come back as strings from pg; sizes stay far below 2^53. */
const integer = (row: Row, key: string) => Number(row[key]);

const WEBHOOK: [string, string][] = [
  ['@id', 'id'],
  ['@account_id', 'account_id'],
  ['@type', 'type'],
  ['@url', 'url'],
  ['@secret', 'secret'],
  [atomOf('@created_at'), 'created_at'],
  ['@previous_secret', 'previous_secret'],
  [atomOf('@previous_secret_until'), 'previous_secret_until'],
  ['@filter::text', 'filter'],
  ['@rate_limit', 'rate_limit'],
];
export const webhookColumns = (alias = '', as = '') => columns(WEBHOOK, alias, as);
export function toWebhook(row: Row, as = ''): WebhookRecord {
  return {
    id: text(row, as + 'id'),
    accountId: text(row, as + 'account_id'),
    type: text(row, as + 'type'),
    url: text(row, as + 'url'),
    secret: text(row, as + 'secret'),
    createdAt: text(row, as + 'created_at'),
    ...previousSecretOf(row, as),
    ...filterOf(row, as),
    ...rateLimitOf(row, as),
  };
}

/** The rate limit, present only when the webhook has one. */
function rateLimitOf(row: Row, as: string): Pick<WebhookRecord, 'rateLimit'> {
  const rateLimit = row[as + 'rate_limit'];
  return rateLimit === null || rateLimit === undefined ? {} : { rateLimit: Number(rateLimit) };
}

/** The filter, present only when the webhook has one. */
function filterOf(row: Row, as: string): Pick<WebhookRecord, 'filter'> {
  const filter = textOrNull(row, as + 'filter');
  return filter === null ? {} : { filter: JSON.parse(filter) as EventFilter };
}

/** The rotation fields, present only while a rotation's previous secret is kept. */
function previousSecretOf(row: Row, as: string): Pick<WebhookRecord, 'previousSecret' | 'previousSecretUntil'> {
  const previousSecret = textOrNull(row, as + 'previous_secret');
  const previousSecretUntil = textOrNull(row, as + 'previous_secret_until');
  return previousSecret === null || previousSecretUntil === null ? {} : { previousSecret, previousSecretUntil };
}

const FILE_ENTRY: [string, string][] = [
  ['@id', 'id'],
  ['@account_id', 'account_id'],
  ['@directory_id', 'directory_id'],
  ['@type', 'type'],
  ['@name', 'name'],
  // As text, which pg and PGlite hand over as it is: pg's int8 parser tests each value with a
  // regular expression before the row reader converts it anyway (hot path of a listing).
  ['@size::text', 'size'],
  ['@mime', 'mime'],
  ['@file_share_id', 'file_share_id'],
  [atomOf('@created_at'), 'created_at'],
];
export const fileEntryColumns = () => columns(FILE_ENTRY, '', '');
export function toFileEntry(row: Row): FileEntryRecord {
  return toListedEntry(row, text(row, 'account_id'), textOrNull(row, 'directory_id'));
}

/**
 * A listing's columns: the entry less its account and directory, which the statement's parameters
 * fix, so that 2 of 9 columns of every row are neither sent nor parsed. Hot path: with the listing
 * order below (sql-storage.ts), `listFileEntries` of 1,000 entries on a pg.Pool went from 14.7 to
 * 11.8 million instructions (callgrind, compilation and major GCs left out).
 */
export const listedEntryColumns = () =>
  columns(
    FILE_ENTRY.filter(([, name]) => name !== 'account_id' && name !== 'directory_id'),
    '',
    '',
  );
export function toListedEntry(row: Row, accountId: string, directoryId: string | null): FileEntryRecord {
  // Each column read by its name here, not through `text(row, key)`: that one load, shared by every
  // column of every record, is megamorphic in V8. With the size as text, a listing of 1,000 entries
  // on pg went from 20.5 to 18.0 million instructions outside GC and compilation, and its GC from
  // 5.0 to 4.2 (callgrind over 300 listings of the bench's portal-sql server).
  const { id, type, name, size, mime, file_share_id: fileShareId, created_at: createdAt } = row as unknown as ListedRow;
  return {
    id,
    accountId,
    directoryId,
    type,
    name,
    size: Number(size),
    mime,
    fileShareId: fileShareId ?? null,
    createdAt,
  };
}

/** A row of `listedEntryColumns`, as a driver returns it. */
interface ListedRow {
  id: string;
  type: FileEntryType;
  name: string;
  size: number | string;
  mime: string;
  file_share_id: string | null;
  created_at: string;
}

const ATTACHMENT: [string, string][] = [
  ['@id', 'id'],
  ['@account_id', 'account_id'],
  ['@ticket_id', 'ticket_id'],
  ['@message_id', 'message_id'],
  ['@name', 'name'],
  ['@mime', 'mime'],
  ['@size', 'size'],
  [atomOf('@created_at'), 'created_at'],
];
export const attachmentColumns = () => columns(ATTACHMENT, '', '');
export function toAttachment(row: Row): AttachmentRecord {
  return {
    id: text(row, 'id'),
    accountId: text(row, 'account_id'),
    ticketId: text(row, 'ticket_id'),
    messageId: text(row, 'message_id'),
    name: text(row, 'name'),
    mime: text(row, 'mime'),
    size: integer(row, 'size'),
    createdAt: text(row, 'created_at'),
  };
}

const EVENT: [string, string][] = [
  ['@id', 'id'],
  ['@account_id', 'account_id'],
  ['@type', 'type'],
  [atomOf('@created_at'), 'created_at'],
  ['@data::text', 'data'],
  ['@ordering_key', 'ordering_key'],
];
export const eventColumns = (alias = '', as = '') => columns(EVENT, alias, as);
export function toEvent(row: Row, as = ''): EventRecord {
  const data = textOrNull(row, as + 'data');
  const orderingKey = textOrNull(row, as + 'ordering_key');
  const event: EventRecord = {
    id: text(row, as + 'id'),
    accountId: text(row, as + 'account_id'),
    type: text(row, as + 'type'),
    createdAt: text(row, as + 'created_at'),
    data: data === null ? null : JSON.parse(data),
  };
  if (orderingKey !== null) event.orderingKey = orderingKey;
  return event;
}

const DELIVERY: [string, string][] = [
  ['@id', 'id'],
  ['@account_id', 'account_id'],
  ['@webhook_id', 'webhook_id'],
  ['@event_id', 'event_id'],
  ['@event_type', 'event_type'],
  ['@status', 'status'],
  ['@attempts::text', 'attempts'],
  ['@attempt_count', 'attempt_count'],
  [atomOf('@next_attempt_at'), 'next_attempt_at'],
  [atomOf('@created_at'), 'created_at'],
  ['@lease_owner', 'lease_owner'],
  [atomOf('@lease_until'), 'lease_until'],
  ['@redeliver_queued', 'redeliver_queued'],
  ['@ordering_key', 'ordering_key'],
];
export const deliveryColumns = (alias = '', as = '') => columns(DELIVERY, alias, as);
export function toDelivery(row: Row, as = ''): DeliveryRecord {
  return {
    id: text(row, as + 'id'),
    accountId: text(row, as + 'account_id'),
    webhookId: text(row, as + 'webhook_id'),
    eventId: text(row, as + 'event_id'),
    eventType: text(row, as + 'event_type'),
    status: text(row, as + 'status') as DeliveryStatus,
    attempts: (JSON.parse(text(row, as + 'attempts')) as DeliveryAttempt[]).map(attemptShape),
    attemptCount: integer(row, as + 'attempt_count'),
    nextAttemptAt: textOrNull(row, as + 'next_attempt_at'),
    createdAt: text(row, as + 'created_at'),
    leaseOwner: textOrNull(row, as + 'lease_owner'),
    leaseUntil: textOrNull(row, as + 'lease_until'),
    orderingKey: textOrNull(row, as + 'ordering_key'),
    redeliverQueued: row[as + 'redeliver_queued'] === true,
  };
}

/** What a delivery holds, in the queue and in the log alike: the columns a move copies. */
const STORED =
  'id, account_id, webhook_id, event_id, status, attempts, attempt_count, next_attempt_at, created_at, event_type, ordering_key, lease_owner, lease_until, redeliver_queued, seq, event_gen';

/**
 * Moves deliveries a statement took out of the queue (the CTE or table `source`, its rows as the
 * queue's) into the log, finished with `status` (an SQL expression over `s`, the source's row):
 * no next attempt, no lease, keeping attempts, seq and the rest. Never again pending there.
 */
export const finishedFrom = ({ table }: Names, source: string, status: string) =>
  `INSERT INTO ${table('deliveries')} (${STORED})
    SELECT s.id, s.account_id, s.webhook_id, s.event_id, ${status}, s.attempts, s.attempt_count, NULL, s.created_at,
      s.event_type, s.ordering_key, NULL, NULL, false, s.seq, s.event_gen
    FROM ${source} AS s`;

/**
 * Moves deliveries a statement took out of the log (the CTE `source`) back into the queue, pending
 * and due at `nextAttemptAt` (an SQL expression over `s`); answers them as `deliveryColumns` does.
 * Into the kept partition, which is logged: they are not a publish's untried deliveries (ring.ts).
 */
export const queuedFrom = (names: Names, source: string, nextAttemptAt: string) =>
  `INSERT INTO ${names.table('queue')} (${STORED}, slot)
    SELECT s.id, s.account_id, s.webhook_id, s.event_id, 'pending', s.attempts, s.attempt_count, ${nextAttemptAt},
      s.created_at, s.event_type, s.ordering_key, NULL, NULL, false, s.seq, s.event_gen, ${KEPT_SLOT}
    FROM ${source} AS s
    RETURNING ${columns(DELIVERY, '', '')}`;

/** jsonb orders object keys by length; the API shows an attempt's keys in their documented order. */
function attemptShape(attempt: DeliveryAttempt): DeliveryAttempt {
  return {
    at: attempt.at,
    statusCode: attempt.statusCode,
    error: attempt.error,
    durationMs: attempt.durationMs,
    ...(attempt.local ? { local: true as const } : {}),
    ...(attempt.held ? { held: true as const } : {}),
  };
}

/**
 * Queues new deliveries, given `deliveryColumnsOf` and, tenth, their events' generations; attempts
 * and the lease start empty (the columns' defaults). A publish's (`published`) go to the ring's
 * current slot, unlogged, and are noted there, but those of an ordering key; the others (a
 * recovery's) to the kept partition (ring.ts).
 */
export function insertDeliveriesStatement(names: Names, published: boolean): string {
  const insert = `INSERT INTO ${names.table('queue')} (id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, ordering_key, event_gen, slot)
    SELECT made.*, ${published ? publishedSlot(names, 'made.ordering_key') : KEPT_SLOT}
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::text[], $9::text[], $10::int[])
      AS made(id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, ordering_key, event_gen)`;
  // What goes to a slot is noted there (ring.ts).
  return published
    ? `WITH stored AS (${insert} RETURNING event_id, webhook_id, event_gen, slot) ${noteMade(names, 'stored')}`
    : insert;
}

/**
 * The columns a new delivery is stored with, as arrays (for `INSERT … SELECT * FROM unnest(…)`):
 * id, account_id, webhook_id, event_id, status, next_attempt_at, created_at, event_type, ordering_key.
 */
export function deliveryColumnsOf(made: DeliveryRecord[]): unknown[] {
  return [
    made.map((delivery) => delivery.id),
    made.map((delivery) => delivery.accountId),
    made.map((delivery) => delivery.webhookId),
    made.map((delivery) => delivery.eventId),
    made.map((delivery) => delivery.status),
    made.map((delivery) => delivery.nextAttemptAt),
    made.map((delivery) => delivery.createdAt),
    made.map((delivery) => delivery.eventType),
    made.map((delivery) => delivery.orderingKey),
  ];
}
