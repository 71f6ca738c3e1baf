import { type AgreementRecord, type DeliveryRecord, type FileEntryRecord, directoryKey } from '../../src/records.js';
import { AccountTimeline } from '../shared/account-timeline.js';
import type { Loc, Locatable } from './record-log.js';

export const TABLES = ['webhook', 'file', 'agreement', 'attachment', 'event', 'delivery', 'idempotency', 'health'] as const;
export type TableName = (typeof TABLES)[number];

/**
 * Which tables stay in memory. Agreements and events can be large (signature images, a host's
 * event data), and so can an idempotency key's kept answer (an agreement); they are read by id
 * only, so memory keeps just where they lie in the log.
 */
const KEPT: Record<TableName, boolean> = {
  webhook: true,
  file: true,
  agreement: false,
  attachment: true,
  event: false,
  delivery: true,
  idempotency: false,
  health: true,
};

export interface Row extends Locatable {
  readonly table: TableName;
  readonly id: string;
  readonly accountId: string;
  /** Length of the record's JSON: what compaction weighs the log against. */
  readonly size: number;
  /** An agreement's document ids, which are blob keys. */
  readonly documentIds: readonly string[];
  /** When an idempotency key's record expires; kept on the row, whose record may be on disk only. */
  readonly expiresAt?: string;
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

/**
 * Every live record (or where it lies) by table and id, with the indexes the queries need:
 * webhooks by account, entries by directory, deliveries by webhook, the pending deliveries, and
 * which agreement names a document. Built at open by replaying the log; kept current by each write.
 */
export function createRecordState() {
  const tables = new Map<TableName, Map<string, Row>>(TABLES.map((table) => [table, new Map()]));
  const webhooksByAccount = new Map<string, Set<string>>();
  const entriesByDirectory = new Map<string, Set<string>>();
  const deliveriesByWebhook = new Map<string, Set<string>>();
  const pendingDeliveries = new Set<string>();
  const documentOwners = new Map<string, string>();
  /** Each account's agreements in creation order: their records lie in the log, so the order is kept here. */
  const agreementOrder = new AccountTimeline();
  /** When each completed idempotency key expires: claims and the sweep decide on it without reading the log. */
  const idempotencyExpiry = new Map<string, string>();
  let liveBytes = 0;

  const rowsOf = (table: TableName) => tables.get(table)!;

  function index(row: Row) {
    const value = row.value;
    switch (row.table) {
      case 'webhook':
        addTo(webhooksByAccount, row.accountId, row.id);
        break;
      case 'file':
        addTo(entriesByDirectory, directoryKey(row.accountId, (value as FileEntryRecord).directoryId), row.id);
        break;
      case 'agreement':
        for (const id of row.documentIds) documentOwners.set(id, row.id);
        // Without its value, a revert puts back a row in the log that an update replaced, which kept
        // the agreement's place (no change removes an agreement).
        if (value !== undefined) agreementOrder.add(row.accountId, row.id, (value as AgreementRecord).createdAt);
        break;
      case 'delivery': {
        const delivery = value as DeliveryRecord;
        addTo(deliveriesByWebhook, delivery.webhookId, row.id);
        if (delivery.status === 'pending') pendingDeliveries.add(row.id);
        break;
      }
      case 'idempotency':
        idempotencyExpiry.set(row.id, row.expiresAt!);
        break;
    }
  }

  /** `replaced`: a new version of the row takes its place, and keeps its place in the account's webhooks. */
  function unindex(row: Row, replaced = false) {
    switch (row.table) {
      case 'webhook':
        // A Set keeps insertion order, which is the listing order within one second: a webhook
        // rewritten (its secret rotated) must not move to the end.
        if (!replaced) removeFrom(webhooksByAccount, row.accountId, row.id);
        break;
      case 'file':
        removeFrom(entriesByDirectory, directoryKey(row.accountId, (row.value as FileEntryRecord).directoryId), row.id);
        break;
      case 'agreement':
        for (const id of row.documentIds) if (documentOwners.get(id) === row.id) documentOwners.delete(id);
        // An update keeps the agreement's place in its account's list.
        if (!replaced) agreementOrder.remove(row.id);
        break;
      case 'delivery':
        // Deliveries stay listed under their webhook; only a removal (which the port never asks) drops that.
        pendingDeliveries.delete(row.id);
        break;
      case 'idempotency':
        idempotencyExpiry.delete(row.id);
        break;
    }
  }

  return {
    /** The row, of any account. */
    get(table: TableName, id: string): Row | undefined {
      return rowsOf(table).get(id);
    },
    /** The row when it belongs to `accountId`. */
    owned(table: TableName, accountId: string, id: string): Row | undefined {
      const row = rowsOf(table).get(id);
      return row !== undefined && row.accountId === accountId ? row : undefined;
    },
    has(table: TableName, id: string): boolean {
      return rowsOf(table).has(id);
    },
    /**
     * Stores `record` (already parsed from `json`, so the state holds its own copy). `loc` is known
     * at replay; a new write gets it once its frame is on disk, and holds the record until then.
     */
    put(table: TableName, record: StoredRecord, json: string, loc?: Loc): Row {
      const rows = rowsOf(table);
      const previous = rows.get(record.id);
      if (previous !== undefined) {
        unindex(previous, true);
        liveBytes -= previous.size;
      }
      const keep = KEPT[table];
      const row: Row = {
        table,
        id: record.id,
        accountId: record.accountId,
        size: json.length,
        keep,
        value: keep || loc === undefined ? record : undefined,
        // Rows held in memory never read the log, so they do not keep a place in it.
        loc: keep ? undefined : loc,
        documentIds: table === 'agreement' ? (record as AgreementRecord).documents.map((document) => document.id) : [],
        expiresAt: table === 'idempotency' ? (record as StoredRecord & { expiresAt: string }).expiresAt : undefined,
      };
      if (row.value === undefined) {
        // Indexing reads the record; a row kept on disk is indexed from the parsed copy it came with.
        index({ ...row, value: record });
      } else {
        index(row);
      }
      rows.set(row.id, row);
      liveBytes += row.size;
      return row;
    },
    /**
     * Undoes a change that did not reach the disk: the row under `id` becomes `previous` again (the
     * very row the change replaced, with its place in the log), or goes when the change made it.
     */
    revert(table: TableName, id: string, previous: Row | undefined): void {
      const rows = rowsOf(table);
      const current = rows.get(id);
      if (current !== undefined) {
        unindex(current, previous !== undefined);
        // A delivery stays listed under its webhook when it changes; one the change made goes from the list.
        if (table === 'delivery' && previous === undefined) removeFrom(deliveriesByWebhook, (current.value as DeliveryRecord).webhookId, id);
        liveBytes -= current.size;
        // Replaced rather than deleted when the change replaced a row: the table keeps its order.
        if (previous === undefined) rows.delete(id);
      }
      if (previous !== undefined) {
        index(previous);
        rows.set(id, previous);
        liveBytes += previous.size;
      }
    },
    remove(table: TableName, id: string): void {
      const rows = rowsOf(table);
      const row = rows.get(id);
      if (row === undefined) return;
      unindex(row);
      liveBytes -= row.size;
      rows.delete(id);
    },
    webhookIds(accountId: string): Iterable<string> {
      return webhooksByAccount.get(accountId) ?? [];
    },
    entryIds(accountId: string, directoryId: string | null): Iterable<string> {
      return entriesByDirectory.get(directoryKey(accountId, directoryId)) ?? [];
    },
    /** Up to `limit` of the account's agreement ids, newest first, after `after`; `null` when `after` is not the account's. */
    agreementIds(accountId: string, limit: number, after?: string): string[] | null {
      return agreementOrder.newestFirst(accountId, limit, after);
    },
    deliveryIds(webhookId: string): Iterable<string> {
      return deliveriesByWebhook.get(webhookId) ?? [];
    },
    pendingDeliveryIds(): Iterable<string> {
      return pendingDeliveries;
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
    liveBytes: () => liveBytes,
    /** Every live row, for compaction, in the order each was first written: listings keep creation order through it. */
    snapshot(): Row[] {
      return TABLES.flatMap((table) => [...rowsOf(table).values()]);
    },
  };
}

export type RecordState = ReturnType<typeof createRecordState>;
