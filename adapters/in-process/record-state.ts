import {
  type AgreementRecord,
  type DeliveryRecord,
  type FileEntryRecord,
  type PortalSessionRecord,
  directoryKey,
} from '../../src/records.js';
import { inListingOrder } from '../../src/shared/order.js';
import type { CallStatsHour } from '../../src/rules/call-stats.js';
import { CallStats } from './call-stats.js';
import { DueByAccount } from './due-queue.js';
import { KeyQueues } from './key-queues.js';
import { Timeline, type TimelinePosition } from './timeline.js';

/** The key of an account's events of one type. */
const kindKey = (accountId: string, type: string) => `${accountId}\u0000${type}`;

export const TABLES = [
  'webhook',
  'file',
  'agreement',
  'attachment',
  'event',
  'delivery',
  'idempotency',
  'health',
  'session',
] as const;
export type TableName = (typeof TABLES)[number];

/**
 * Which tables a store with a journal keeps in memory. Agreements and events can be large
 * (signature images, a host's event data), and so can an idempotency key's kept answer (an
 * agreement); they are read by id only, so memory keeps just where they lie in the journal.
 */
export const KEPT_BESIDE_A_JOURNAL: Record<TableName, boolean> = {
  webhook: true,
  file: true,
  agreement: false,
  attachment: true,
  event: false,
  delivery: true,
  idempotency: false,
  health: true,
  session: true,
};

/** Every table kept in memory: a store with nowhere else to read from. */
export const KEPT_ALL: Record<TableName, boolean> = Object.fromEntries(
  Object.keys(KEPT_BESIDE_A_JOURNAL).map((table) => [table, true]),
) as Record<TableName, boolean>;

export interface StateRow<L = unknown> {
  readonly table: TableName;
  /** The record; always set for kept tables, dropped once written for the others. */
  value: unknown;
  /** Where the journal holds the record: set for records not kept in memory, once written. */
  loc: L | undefined;
  readonly keep: boolean;
  readonly id: string;
  readonly accountId: string;
  /** Length of the record's JSON: what a journal's compaction weighs it against. */
  readonly size: number;
  /** An agreement's document ids, which are blob keys. */
  readonly documentIds: readonly string[];
  /** An agreement's completed copies: each one's SHA-256 and its document's id. */
  readonly signedCopies: readonly (readonly [hash: string, documentId: string])[];
  /** When an idempotency key's record expires; kept on the row, whose record may be on disk only. */
  readonly expiresAt?: string;
  /** An event's type and time, kept on the row, whose record may be in the journal only (an agreement's time too). */
  readonly eventType?: string;
  readonly createdAt?: string;
}

export interface StoredRecord {
  id: string;
  accountId: string;
}

function addTo<K, V>(index: Map<K, Set<V>>, key: K, value: V) {
  let members = index.get(key);
  if (members === undefined) index.set(key, (members = new Set()));
  members.add(value);
}

function removeFrom<K, V>(index: Map<K, Set<V>>, key: K, value: V) {
  const members = index.get(key);
  if (members === undefined) return;
  members.delete(value);
  if (members.size === 0) index.delete(key);
}

/** A directory's entries, and their listing order once asked for (dropped when the directory changes). */
interface Directory {
  members: Set<string>;
  ordered: FileEntryRecord[] | null;
}

/**
 * Every live record (or where it lies) by table and id, with the indexes the queries need:
 * webhooks by account, entries by directory, deliveries by webhook, the pending deliveries in due
 * order, and which agreement names a document. A journal's store builds it at open by replaying
 * the journal; each write keeps it current. `kept` says which tables hold their records here.
 */
export function createRecordState<L = unknown>(kept: Record<TableName, boolean>) {
  const tables = new Map<TableName, Map<string, StateRow<L>>>(TABLES.map((table) => [table, new Map()]));
  const webhooksByAccount = new Map<string, Set<string>>();
  /** Each account's unrevoked sessions, expired ones included until swept: what its limit counts. */
  const unrevokedSessions = new Map<string, Set<string>>();
  /**
   * The entries of each directory, and their listing order once asked for: kept until the directory
   * changes, so that a listing hands the service entries already in order, which its sort passes
   * through as one run.
   */
  const directories = new Map<string, Directory>();
  /** Each webhook's deliveries in creation order: the delivery log reads its pages from here. */
  const deliveryOrder = new Timeline();
  const pending = new DueByAccount();
  /** Each ordering key's pending deliveries: whether it is taken, and which held one is next. */
  const keys = new KeyQueues();
  /** The finished deliveries (not pending), oldest first: what retention removes. */
  const finished = new Timeline();
  /**
   * The deliveries that name each event: an event none names may go once past retention, and the
   * delivery log finds an event's deliveries here. One id as a string (almost every event has one
   * delivery a webhook), several as an array.
   */
  const deliveriesOfEvent = new Map<string, string | string[]>();
  /** Every event, oldest first. */
  const eventOrder = new Timeline();
  /** Each webhook's calls by the hour, from its deliveries' attempts. */
  const callStats = new CallStats();
  /**
   * Each account's events of each type, in the order written: a filter's dry run reads the latest.
   * Ids alone, 8 bytes an event (a Timeline's place costs about 130): a removed event's id stays
   * until the list is swept, when half of it is gone.
   */
  const eventsOfKind = new Map<string, { ids: string[]; live: number }>();
  const documentOwners = new Map<string, string>();
  /** Each account's agreements in creation order: their records lie in the log, so the order is kept here. */
  const agreementOrder = new Timeline();
  /** Each completed copy by account and SHA-256: what `/verify` looks up. */
  const signedCopies = new Map<string, { agreementId: string; documentId: string }>();
  /** When each completed idempotency key expires: claims and the sweep decide on it without reading the log. */
  const idempotencyExpiry = new Map<string, string>();
  let liveBytes = 0;

  const rowsOf = (table: TableName) => tables.get(table)!;

  function index(row: StateRow<L>) {
    const value = row.value;
    switch (row.table) {
      case 'webhook':
        addTo(webhooksByAccount, row.accountId, row.id);
        break;
      case 'file': {
        const key = directoryKey(row.accountId, (value as FileEntryRecord).directoryId);
        let directory = directories.get(key);
        if (directory === undefined) directories.set(key, (directory = { members: new Set(), ordered: null }));
        directory.members.add(row.id);
        directory.ordered = null;
        break;
      }
      case 'agreement':
        for (const id of row.documentIds) documentOwners.set(id, row.id);
        for (const [hash, documentId] of row.signedCopies)
          signedCopies.set(`${row.accountId} ${hash}`, { agreementId: row.id, documentId });
        // A revert puts back a row an update replaced, which kept the agreement's place, or one a
        // removal took out, which lost it: the row's own time puts it back in its place.
        if (!agreementOrder.holds(row.accountId, row.id))
          agreementOrder.add(row.accountId, row.id, row.createdAt ?? (value as AgreementRecord).createdAt);
        break;
      case 'delivery': {
        const delivery = value as DeliveryRecord;
        if (!deliveryOrder.holds(delivery.webhookId, row.id)) {
          deliveryOrder.add(delivery.webhookId, row.id, delivery.createdAt);
          const named = deliveriesOfEvent.get(delivery.eventId);
          deliveriesOfEvent.set(
            delivery.eventId,
            named === undefined ? row.id : typeof named === 'string' ? [named, row.id] : [...named, row.id],
          );
        }
        if (delivery.status === 'pending') finished.remove(row.id);
        else finished.add('', row.id, delivery.createdAt);
        pending.update(delivery);
        keys.update(delivery);
        break;
      }
      case 'event':
        if (eventOrder.holds('', row.id)) break;
        eventOrder.add('', row.id, row.createdAt!);
        {
          const key = kindKey(row.accountId, row.eventType!);
          const kind = eventsOfKind.get(key);
          if (kind === undefined) eventsOfKind.set(key, { ids: [row.id], live: 1 });
          else {
            kind.ids.push(row.id);
            kind.live++;
          }
        }
        break;
      case 'idempotency':
        idempotencyExpiry.set(row.id, row.expiresAt!);
        break;
      case 'session':
        if ((value as PortalSessionRecord).revokedAt === null) addTo(unrevokedSessions, row.accountId, row.id);
        break;
    }
  }

  /** `replaced`: a new version of the row takes its place, and keeps its place in the account's webhooks. */
  function unindex(row: StateRow<L>, replaced = false) {
    switch (row.table) {
      case 'webhook':
        // A Set keeps insertion order, which is the listing order within one second: a webhook
        // rewritten (its secret rotated) must not move to the end.
        if (!replaced) {
          removeFrom(webhooksByAccount, row.accountId, row.id);
          callStats.forget(row.id);
        }
        break;
      case 'file': {
        const key = directoryKey(row.accountId, (row.value as FileEntryRecord).directoryId);
        const directory = directories.get(key);
        if (directory === undefined) break;
        directory.members.delete(row.id);
        directory.ordered = null;
        if (directory.members.size === 0) directories.delete(key);
        break;
      }
      case 'agreement':
        for (const id of row.documentIds) if (documentOwners.get(id) === row.id) documentOwners.delete(id);
        for (const [hash] of row.signedCopies) {
          const key = `${row.accountId} ${hash}`;
          if (signedCopies.get(key)?.agreementId === row.id) signedCopies.delete(key);
        }
        // An update keeps the agreement's place in its account's list.
        if (!replaced) agreementOrder.remove(row.id);
        break;
      case 'delivery': {
        const delivery = row.value as DeliveryRecord;
        // A replacing row is listed and queued again by its own `index`, which keeps its places.
        if (replaced) break;
        pending.delete(row.accountId, row.id);
        keys.delete(row.id);
        deliveryOrder.remove(row.id);
        finished.remove(row.id);
        const named = deliveriesOfEvent.get(delivery.eventId);
        const left = typeof named === 'string' || named === undefined ? [] : named.filter((id) => id !== row.id);
        if (left.length === 0) deliveriesOfEvent.delete(delivery.eventId);
        else deliveriesOfEvent.set(delivery.eventId, left.length === 1 ? left[0]! : left);
        break;
      }
      case 'event':
        if (!replaced) {
          eventOrder.remove(row.id);
          const key = kindKey(row.accountId, row.eventType!);
          const kind = eventsOfKind.get(key);
          if (kind !== undefined && --kind.live === 0) eventsOfKind.delete(key);
          else if (kind !== undefined && kind.ids.length > 2 * kind.live + 64)
            kind.ids = kind.ids.filter((id) => rowsOf('event').has(id) && id !== row.id);
        }
        break;
      case 'idempotency':
        idempotencyExpiry.delete(row.id);
        break;
      case 'session':
        // Order does not matter here: a replacing row (its revocation) is indexed again, or not, by its own `index`.
        removeFrom(unrevokedSessions, row.accountId, row.id);
        break;
    }
  }

  return {
    /** The row, of any account. */
    get(table: TableName, id: string): StateRow<L> | undefined {
      return rowsOf(table).get(id);
    },
    /** The row when it belongs to `accountId`. */
    owned(table: TableName, accountId: string, id: string): StateRow<L> | undefined {
      const row = rowsOf(table).get(id);
      return row !== undefined && row.accountId === accountId ? row : undefined;
    },
    has(table: TableName, id: string): boolean {
      return rowsOf(table).has(id);
    },
    /** Every row of `table`, of every account, in the order each was first written. */
    rows(table: TableName): IterableIterator<StateRow<L>> {
      return rowsOf(table).values();
    },
    /**
     * Stores `record` (already parsed from `json`, so the state holds its own copy). `loc` is known
     * at replay; a new write gets it once its frame is on disk, and holds the record until then.
     */
    put(table: TableName, record: StoredRecord, json: string, loc?: L): StateRow<L> {
      const rows = rowsOf(table);
      const previous = rows.get(record.id);
      if (previous !== undefined) {
        unindex(previous, true);
        liveBytes -= previous.size;
      }
      const keep = kept[table];
      const row: StateRow<L> = {
        table,
        id: record.id,
        accountId: record.accountId,
        size: json.length,
        keep,
        value: keep || loc === undefined ? record : undefined,
        // Rows held in memory never read the log, so they do not keep a place in it.
        loc: keep ? undefined : loc,
        // A document's bytes, and its completed copy's once made, are blobs the agreement names.
        documentIds:
          table === 'agreement'
            ? (record as AgreementRecord).documents.flatMap((document) =>
                document.signedFileKey == null ? [document.id] : [document.id, document.signedFileKey],
              )
            : [],
        signedCopies:
          table === 'agreement'
            ? (record as AgreementRecord).documents.flatMap((document) =>
                document.signedFileHash == null ? [] : [[document.signedFileHash, document.id] as const],
              )
            : [],
        expiresAt: table === 'idempotency' ? (record as StoredRecord & { expiresAt: string }).expiresAt : undefined,
        eventType: table === 'event' ? (record as StoredRecord & { type: string }).type : undefined,
        createdAt:
          table === 'event' || table === 'agreement'
            ? (record as StoredRecord & { createdAt: string }).createdAt
            : undefined,
      };
      if (row.value === undefined) {
        // Indexing reads the record; a row kept on disk is indexed from the parsed copy it came with.
        index({ ...row, value: record });
      } else {
        index(row);
      }
      if (table === 'delivery')
        callStats.change(previous?.value as DeliveryRecord | undefined, record as DeliveryRecord);
      rows.set(row.id, row);
      liveBytes += row.size;
      return row;
    },
    /**
     * Undoes a change that did not reach the disk: the row under `id` becomes `previous` again (the
     * very row the change replaced, with its place in the log), or goes when the change made it.
     */
    revert(table: TableName, id: string, previous: StateRow<L> | undefined): void {
      const rows = rowsOf(table);
      const current = rows.get(id);
      if (current !== undefined) {
        unindex(current, previous !== undefined);
        liveBytes -= current.size;
        // Replaced rather than deleted when the change replaced a row: the table keeps its order.
        if (previous === undefined) rows.delete(id);
      }
      if (previous !== undefined) {
        index(previous);
        rows.set(id, previous);
        liveBytes += previous.size;
      }
      if (table === 'delivery')
        callStats.change(current?.value as DeliveryRecord | undefined, previous?.value as DeliveryRecord | undefined);
    },
    remove(table: TableName, id: string): void {
      const rows = rowsOf(table);
      const row = rows.get(id);
      if (row === undefined) return;
      unindex(row);
      liveBytes -= row.size;
      rows.delete(id);
    },
    /** The account's webhook ids, in the order written. */
    webhookIds(accountId: string): ReadonlySet<string> {
      return webhooksByAccount.get(accountId) ?? new Set();
    },
    /** The account's sessions not revoked, expired ones included until they are swept. */
    unrevokedSessionIds(accountId: string): ReadonlySet<string> {
      return unrevokedSessions.get(accountId) ?? new Set();
    },
    /** The directory's entries in listing order: the rows themselves, to copy before handing out. */
    entriesInOrder(accountId: string, directoryId: string | null): readonly FileEntryRecord[] {
      const directory = directories.get(directoryKey(accountId, directoryId));
      if (directory === undefined) return [];
      directory.ordered ??= inListingOrder(
        [...directory.members].map((id) => rowsOf('file').get(id)!.value as FileEntryRecord),
      );
      return directory.ordered;
    },
    /** Up to `limit` of the account's agreement ids, newest first, after `after`; `null` when `after` is not the account's. */
    agreementIds(accountId: string, limit: number, after?: string): string[] | null {
      if (after !== undefined && !agreementOrder.holds(accountId, after)) return null;
      const ids: string[] = [];
      for (const id of agreementOrder.newestFirst(accountId, after === undefined ? undefined : { id: after })) {
        if (ids.length === limit) break;
        ids.push(id);
      }
      return ids;
    },
    /** The webhook's delivery ids, newest first, from just past `from`, made before `until` when given. */
    deliveryIds(webhookId: string, from?: TimelinePosition, until?: string): Iterable<string> {
      return deliveryOrder.newestFirst(webhookId, from, until);
    },
    /** The pending deliveries due at `now`, earliest first; `skip` drops an account's from the rest of the walk. */
    dueBy(now: string): { rows: Iterable<DeliveryRecord>; skip(accountId: string): void } {
      return pending.dueBy(now);
    },
    /** The webhook's calls by the hour from `since` on, earliest first. */
    callStats(webhookId: string, since: string): CallStatsHour[] {
      return callStats.since(webhookId, since);
    },
    /** The ids of the deliveries that name the event, in the order they were made. */
    deliveriesOf(eventId: string): readonly string[] {
      const named = deliveriesOfEvent.get(eventId);
      return named === undefined ? [] : typeof named === 'string' ? [named] : named;
    },
    /** Up to `limit` ids of the account's events of `type`, newest first. */
    recentEventIds(accountId: string, type: string, limit: number): string[] {
      const found: string[] = [];
      const ids = eventsOfKind.get(kindKey(accountId, type))?.ids ?? [];
      for (let i = ids.length - 1; i >= 0 && found.length < limit; i--)
        if (rowsOf('event').has(ids[i]!)) found.push(ids[i]!);
      return found;
    },
    /** The ids of the account's events whose type starts with `prefix`, each type's newest first. */
    eventIdsOfKinds(accountId: string, prefix: string): string[] {
      const found: string[] = [];
      const start = kindKey(accountId, prefix);
      for (const [key, kind] of eventsOfKind) {
        if (!key.startsWith(start)) continue;
        for (let i = kind.ids.length - 1; i >= 0; i--) if (rowsOf('event').has(kind.ids[i]!)) found.push(kind.ids[i]!);
      }
      return found;
    },
    /** Whether the webhook's ordering key holds a pending delivery. */
    keyTaken(webhookId: string, orderingKey: string): boolean {
      return keys.taken(webhookId, orderingKey);
    },
    /** Whether a pending delivery other than `id` has the key's turn. */
    keyTurnOf(webhookId: string, orderingKey: string, id: string): boolean {
      return keys.turnOf(webhookId, orderingKey, id);
    },
    /** The key's held deliveries, earliest first. */
    heldOf(webhookId: string, orderingKey: string): readonly string[] {
      return keys.held(webhookId, orderingKey);
    },
    /** Finished deliveries made before `before`, oldest first. */
    finishedBefore(before: string): Iterable<string> {
      return finished.oldestFirst('', before);
    },
    /** Events made before `before` that no delivery names, oldest first. */
    *unneededEventsBefore(before: string): Iterable<string> {
      for (const id of eventOrder.oldestFirst('', before)) if (!deliveriesOfEvent.has(id)) yield id;
    },
    /** When the completed idempotency key `id` expires; `undefined` when none is stored. */
    idempotencyExpiry(id: string): string | undefined {
      return idempotencyExpiry.get(id);
    },
    /** Every completed idempotency key and when it expires. */
    idempotencyExpiries(): Iterable<[string, string]> {
      return idempotencyExpiry;
    },
    isDocument(id: string): boolean {
      return documentOwners.has(id);
    },
    signedCopy(accountId: string, hash: string): { agreementId: string; documentId: string } | null {
      return signedCopies.get(`${accountId} ${hash}`) ?? null;
    },
    liveBytes: () => liveBytes,
    /** Every live row, for compaction, in the order each was first written: listings keep creation order through it. */
    snapshot(): StateRow<L>[] {
      return TABLES.flatMap((table) => [...rowsOf(table).values()]);
    },
  };
}
