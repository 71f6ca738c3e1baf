import * as deliveryRules from '../../src/domain/deliveries.js';
import * as healthRules from '../../src/domain/webhook-health.js';
import { PortalError } from '../../src/errors.js';
import type { DeliveryTarget, Storage } from '../../src/ports.js';
import { inListingOrder, newestFirst, oldestFirst } from '../../src/shared/order.js';
import { AccountTimeline } from '../shared/account-timeline.js';
import { AgreementDue } from '../shared/agreement-due.js';
import {
  agreementSummary,
  type AgreementRecord,
  type AttachmentRecord,
  type ClaimedDelivery,
  type DeliveryRecord,
  type EventRecord,
  type FileEntryRecord,
  type IdempotencyCompletion,
  type IdempotencyRecord,
  type WebhookHealthRecord,
  type WebhookRecord,
  directoryKey,
  withRotation,
} from '../../src/records.js';

/** A record kind kept in one map by id; reads outside the record's account see nothing. */
class Table<T extends { id: string; accountId: string }> {
  readonly rows = new Map<string, T>();

  insert(record: T): void {
    if (this.rows.has(record.id)) throw new PortalError('RECORD_EXISTS', record.id);
    this.rows.set(record.id, record);
  }

  get(accountId: string, id: string): T | null {
    const row = this.rows.get(id);
    return row !== undefined && row.accountId === accountId ? row : null;
  }
}


interface QueueEntry {
  /** The delivery as stored now: a change that keeps its due time replaces it here, in place. */
  row: DeliveryRecord;
  /** The row's `nextAttemptAt` when queued: the order is kept on this. */
  due: string;
  /** Set when the row left the queue; the entry is skipped, and swept out in bulk later. */
  removed: boolean;
}

/** Claim order. A queued row's `nextAttemptAt` is its entry's `due`, removed entries included. */
const compareEntries = (a: QueueEntry, b: QueueEntry) => deliveryRules.compareDue(a.row, b.row);

/**
 * The pending deliveries in due order, so a claim reads from the front and stops at the first not
 * yet due, instead of walking every delivery ever made. Removal only marks the entry (a splice per
 * recorded attempt would move the whole array); marked entries are swept when they are many.
 */
class DueQueue {
  private entries: QueueEntry[] = [];
  /** Entries before this index are all removed. */
  private head = 0;
  private readonly entryOf = new Map<string, QueueEntry>();
  private removedCount = 0;

  /**
   * Keeps the queue in step with `row`, the delivery's new state: a pending delivery with a next
   * attempt is queued at that time; any other leaves the queue. A lease keeps the place it had.
   */
  update(row: DeliveryRecord): void {
    const entry = this.entryOf.get(row.id);
    const due = row.status === 'pending' ? row.nextAttemptAt : null;
    if (entry !== undefined && entry.due === due) {
      entry.row = row;
      return;
    }
    if (entry !== undefined) this.remove(entry);
    if (due !== null) this.insert(row, due);
  }

  private insert(row: DeliveryRecord, due: string): void {
    const entry = { row, due, removed: false };
    let low = this.head;
    let high = this.entries.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (compareEntries(this.entries[middle]!, entry) < 0) low = middle + 1;
      else high = middle;
    }
    this.entries.splice(low, 0, entry);
    this.entryOf.set(row.id, entry);
  }

  private remove(entry: QueueEntry): void {
    entry.removed = true;
    this.entryOf.delete(entry.row.id);
    while (this.head < this.entries.length && this.entries[this.head]!.removed) this.head++;
    if (++this.removedCount > 1024 && this.removedCount > this.entryOf.size) {
      this.entries = this.entries.filter((kept) => !kept.removed);
      this.head = 0;
      this.removedCount = 0;
    }
  }

  /** The queued rows due at `now`, earliest first: the walk ends at the first one not yet due. */
  *dueBy(now: string): Generator<DeliveryRecord> {
    for (let i = this.head; i < this.entries.length; i++) {
      const entry = this.entries[i]!;
      if (entry.removed) continue;
      if (entry.due > now) return;
      yield entry.row;
    }
  }
}


/**
 * Some tables of a memory store, by id, as the store holds them: read them, never change them (a
 * test of tamper detection edits an agreement's trail here on purpose).
 */
export interface MemoryTables {
  readonly agreements: ReadonlyMap<string, AgreementRecord>;
  readonly webhooks: ReadonlyMap<string, WebhookRecord>;
  readonly events: ReadonlyMap<string, EventRecord>;
  readonly deliveries: ReadonlyMap<string, DeliveryRecord>;
  /** Idempotency keys by `idempotencyId(accountId, key)`. */
  readonly idempotencyKeys: ReadonlyMap<string, IdempotencyRecord>;
  readonly health: ReadonlyMap<string, WebhookHealthRecord>;
}

/** The one id of an account's idempotency key. */
export const idempotencyId = (accountId: string, key: string): string => `${accountId}\u0000${key}`;

/**
 * Each store's tables, for the conformance suite's back-channel: a memory store keeps no other copy
 * of its data to read past its methods. Internal: `adapters/memory/index.ts` does not re-export
 * `memoryTablesOf`, so the package's users cannot reach a store's rows.
 */
const tablesOf = new WeakMap<Storage, MemoryTables>();

/** The tables of `storage`, a store `memoryStorage` made; `undefined` for any other. */
export function memoryTablesOf(storage: Storage): MemoryTables | undefined {
  return tablesOf.get(storage);
}

/**
 * A copy of a webhook row, field by field. Not `{ ...row }`: V8 spreads an object whose properties
 * do not all sit inside it (one made by spreading a record and adding a field, as a host's import
 * or a rotation makes it) on its slow path, property by property: 1,600 instructions for such a
 * row against 60 for this copy; `GET /v1/webhooks/{id}` went from 91.8 to 90.4 thousand instructions
 * (`npm run bench:instructions`; the bench's rows are made so). Hot path.
 */
function copyWebhook(row: WebhookRecord): WebhookRecord {
  const { id, accountId, type, url, secret, createdAt, previousSecret, previousSecretUntil } = row;
  // Both or neither (`withRotation`): a record never rotated has no such keys, not `undefined` ones.
  return previousSecret === undefined
    ? { id, accountId, type, url, secret, createdAt }
    : { id, accountId, type, url, secret, createdAt, previousSecret, previousSecretUntil: previousSecretUntil! };
}

/** The row an insert or a rotation stores: `copyWebhook`'s copy, written out again, for the reason `entryRow` gives. */
function webhookRow(webhook: WebhookRecord): WebhookRecord {
  const { id, accountId, type, url, secret, createdAt, previousSecret, previousSecretUntil } = webhook;
  return previousSecret === undefined
    ? { id, accountId, type, url, secret, createdAt }
    : { id, accountId, type, url, secret, createdAt, previousSecret, previousSecretUntil: previousSecretUntil! };
}

/** A copy of a file entry row, field by field, for the reason `copyWebhook` gives (a listing copies every entry). */
function copyEntry(row: FileEntryRecord): FileEntryRecord {
  const { id, accountId, directoryId, type, name, size, mime, fileShareId, createdAt } = row;
  return { id, accountId, directoryId, type, name, size, mime, fileShareId, createdAt };
}

/**
 * The row an insert stores: `copyEntry`'s copy, written out again. V8 keeps what shapes each
 * function has seen: the many a host's entries come in would make every load of `copyEntry`, which
 * then sees only stored rows, a megamorphic lookup (9 a row, 0.4 million instructions a listing of
 * 1,000 in the bench, whose entries are made by spreading).
 */
function entryRow(entry: FileEntryRecord): FileEntryRecord {
  const { id, accountId, directoryId, type, name, size, mime, fileShareId, createdAt } = entry;
  return { id, accountId, directoryId, type, name, size, mime, fileShareId, createdAt };
}

/**
 * Keeps every record in process memory: the default, for tests and demos. Nothing survives a
 * restart. Records are copied in and out, so a caller that mutates a result changes nothing stored.
 */
export function memoryStorage(): Storage {
  const webhooks = new Table<WebhookRecord>();
  const files = new Table<FileEntryRecord>();
  /**
   * The entries of each directory, and their listing order once asked for: kept until the directory
   * changes, so that a listing hands the service entries already in order, which its sort then only
   * confirms (about 200 µs less for 1,000 entries; `npm run bench:scenario -- files`).
   */
  const directories = new Map<string, { members: Set<string>; ordered: FileEntryRecord[] | null }>();
  const agreements = new Table<AgreementRecord>();
  const agreementOrder = new AccountTimeline();
  const agreementsDue = new AgreementDue();
  /** Every agreement document's id: the orphan sweep asks of each blob, so the answer must not walk every agreement. */
  const documentIds = new Set<string>();
  const attachments = new Table<AttachmentRecord>();
  const events = new Table<EventRecord>();
  const deliveries = new Table<DeliveryRecord>();
  const pending = new DueQueue();
  const idempotencyKeys = new Map<string, IdempotencyRecord>();

  /**
   * Checks that `completion` finds its claim still held, and returns the change that completes it,
   * to apply once the record's insert can no longer fail.
   */
  function completing(accountId: string, completion: IdempotencyCompletion | undefined): () => void {
    if (completion === undefined) return () => {};
    const id = idempotencyId(accountId, completion.key);
    const held = idempotencyKeys.get(id);
    if (held === undefined || held.status !== 'pending' || held.token !== completion.token) {
      throw new PortalError('IDEMPOTENCY_KEY_IN_PROGRESS');
    }
    const { fingerprint, answer, expiresAt } = completion;
    return () => idempotencyKeys.set(id, { ...held, status: 'completed', fingerprint, answer: { ...answer }, expiresAt });
  }
  /** Each webhook's health, by webhook id; absent until an attempt or a disable writes one. */
  const health = new Map<string, WebhookHealthRecord>();

  const healthOf = (webhook: WebhookRecord) => health.get(webhook.id) ?? healthRules.freshHealth(webhook);
  /** Whether a due delivery may be sent: its webhook exists and is not disabled. */
  const deliverable = (row: DeliveryRecord) => webhooks.rows.has(row.webhookId) && (health.get(row.webhookId)?.disabledAt ?? null) === null;

  /** Stores a delivery's new state, made by the rules from the stored one; records are replaced, never changed. */
  function putDelivery(delivery: DeliveryRecord): void {
    deliveries.rows.set(delivery.id, delivery);
    pending.update(delivery);
  }

  function fanOut(event: EventRecord, target?: DeliveryTarget): DeliveryRecord[] {
    const created: DeliveryRecord[] = [];
    for (const webhook of webhooks.rows.values()) {
      if (webhook.accountId !== event.accountId || !deliveryRules.isRecipient(webhook, event, target)) continue;
      created.push(deliveryRules.newDelivery(event, webhook.id));
    }
    return created;
  }

  /** Checks every insert first, so a batch with a duplicate id changes nothing. */
  function storeEvents(batch: EventRecord[], target?: DeliveryTarget): DeliveryRecord[] {
    const ids = new Set<string>();
    for (const event of batch) {
      if (events.rows.has(event.id) || ids.has(event.id)) throw new PortalError('RECORD_EXISTS', event.id);
      ids.add(event.id);
    }
    const created = batch.flatMap((event) => fanOut(event, target));
    for (const event of batch) events.insert(structuredClone(event));
    for (const delivery of created) {
      deliveries.insert(delivery);
      pending.update(delivery);
    }
    return created.map((delivery) => structuredClone(delivery));
  }

  const storage: Storage = {
    async insertWebhook(webhook, limits, idempotency) {
      const complete = completing(webhook.accountId, idempotency);
      const max = limits?.maxPerAccount;
      if (max !== undefined && !webhooks.rows.has(webhook.id)) {
        let held = 0;
        for (const row of webhooks.rows.values()) if (row.accountId === webhook.accountId) held++;
        if (held >= max) throw new PortalError('WEBHOOKS_LIMIT', max);
      }
      webhooks.insert(webhookRow(webhook));
      complete();
    },
    async getWebhook(accountId, id) {
      const row = webhooks.get(accountId, id);
      return row && copyWebhook(row);
    },
    async listWebhooks(accountId) {
      return oldestFirst([...webhooks.rows.values()].filter((row) => row.accountId === accountId)).map(copyWebhook);
    },
    async deleteWebhook(accountId, id) {
      if (webhooks.get(accountId, id) === null) return false;
      webhooks.rows.delete(id);
      health.delete(id);
      // Every delivery of the webhook, not only the queued ones: a pending one with no next attempt is not queued.
      for (const delivery of deliveries.rows.values()) {
        const cancelled = delivery.webhookId === id ? deliveryRules.cancel(delivery) : null;
        if (cancelled !== null) putDelivery(cancelled);
      }
      return true;
    },
    async rotateWebhookSecret(accountId, id, rotation) {
      const row = webhooks.get(accountId, id);
      if (row === null) return null;
      const rotated = webhookRow(withRotation(row, rotation));
      // Map.set on a present key keeps its place: the listing order stays.
      webhooks.rows.set(id, rotated);
      return copyWebhook(rotated);
    },

    async insertFileEntry(entry) {
      files.insert(entryRow(entry));
      const key = directoryKey(entry.accountId, entry.directoryId);
      let directory = directories.get(key);
      if (directory === undefined) directories.set(key, (directory = { members: new Set(), ordered: null }));
      directory.members.add(entry.id);
      directory.ordered = null;
    },
    async getFileEntry(accountId, id) {
      const row = files.get(accountId, id);
      return row && copyEntry(row);
    },
    async listFileEntries(accountId, directoryId) {
      const directory = directories.get(directoryKey(accountId, directoryId));
      if (directory === undefined) return [];
      // The rows themselves: an entry's row is never replaced, and a change to the directory drops the order.
      directory.ordered ??= inListingOrder([...directory.members].map((id) => files.rows.get(id)!));
      return directory.ordered.map(copyEntry);
    },
    async deleteFileEntry(accountId, id) {
      const row = files.get(accountId, id);
      if (row === null) return false;
      files.rows.delete(id);
      const directory = directories.get(directoryKey(accountId, row.directoryId));
      directory?.members.delete(id);
      if (directory !== undefined) directory.ordered = null;
      return true;
    },

    async insertAgreement(agreement, batch, idempotency) {
      if (agreements.rows.has(agreement.id)) throw new PortalError('RECORD_EXISTS', agreement.id);
      const complete = completing(agreement.accountId, idempotency);
      storeEvents(batch);
      agreements.insert(structuredClone(agreement));
      agreementOrder.add(agreement.accountId, agreement.id, agreement.createdAt);
      agreementsDue.update(agreement);
      for (const document of agreement.documents) documentIds.add(document.id);
      complete();
    },
    async getAgreement(accountId, id) {
      const row = agreements.get(accountId, id);
      return row && structuredClone(row);
    },
    async agreementsDue(now, limit) {
      return agreementsDue.dueBy(now, limit);
    },
    async listAgreements(accountId, page) {
      const ids = agreementOrder.newestFirst(accountId, page.limit, page.after);
      return ids && ids.map((id) => agreementSummary(agreements.rows.get(id)!));
    },
    async updateAgreement(accountId, id, change) {
      const row = agreements.get(accountId, id);
      if (row === null) return null;
      const { agreement, events: batch } = change(structuredClone(row));
      if (agreement.id !== id || agreement.accountId !== accountId) {
        throw new Error('updateAgreement: change must keep the id and account');
      }
      storeEvents(batch);
      agreements.rows.set(id, structuredClone(agreement));
      agreementsDue.update(agreement);
      for (const document of row.documents) documentIds.delete(document.id);
      for (const document of agreement.documents) documentIds.add(document.id);
      return structuredClone(agreement);
    },

    async insertAttachment(attachment) {
      attachments.insert({ ...attachment });
    },
    async getAttachment(accountId, id) {
      const row = attachments.get(accountId, id);
      return row && { ...row };
    },
    async deleteAttachment(accountId, id) {
      if (attachments.get(accountId, id) === null) return false;
      attachments.rows.delete(id);
      return true;
    },

    async publishEvents(batch, target) {
      return storeEvents(batch, target);
    },
    async getDelivery(accountId, id) {
      const row = deliveries.get(accountId, id);
      return row && structuredClone(row);
    },
    async listDeliveries(accountId, webhookId) {
      return newestFirst([...deliveries.rows.values()].filter((row) => row.accountId === accountId && row.webhookId === webhookId)).map(
        (row) => structuredClone(row),
      );
    },
    async claimDeliveries(claim) {
      const plan = deliveryRules.planClaim(pending.dueBy(claim.now), claim, deliverable);
      for (const row of plan.cancelled) putDelivery(row);
      return plan.leased.map((row): ClaimedDelivery => {
        putDelivery(row);
        return {
          delivery: structuredClone(row),
          event: structuredClone(events.rows.get(row.eventId)!),
          webhook: copyWebhook(webhooks.rows.get(row.webhookId)!),
        };
      });
    },
    async recordAttempt(id, owner, attempt, outcome, rule) {
      const row = deliveries.rows.get(id);
      const recorded = row === undefined ? null : deliveryRules.recordAttempt(row, owner, attempt, outcome);
      if (recorded === null) return false;
      putDelivery(recorded);
      const webhook = webhooks.rows.get(recorded.webhookId);
      if (rule === undefined || webhook === undefined) return true;
      const change = healthRules.healthAfterAttempt(healthOf(webhook), attempt, rule);
      if (change.changed) health.set(webhook.id, change.health);
      return change.disabled ?? true;
    },
    async redeliver(accountId, id, nextAttemptAt) {
      const row = deliveries.get(accountId, id);
      if (row === null) return null;
      const again = deliveryRules.redeliver(row, nextAttemptAt);
      if (again === null) throw new PortalError('DELIVERY_IN_FLIGHT', id);
      putDelivery(again);
      return structuredClone(again);
    },

    async getWebhookHealth(accountId, webhookId) {
      const webhook = webhooks.get(accountId, webhookId);
      return webhook && { ...healthOf(webhook) };
    },
    async disableWebhook(accountId, webhookId, at) {
      const webhook = webhooks.get(accountId, webhookId);
      if (webhook === null) return null;
      const disabled = healthRules.disableHealth(healthOf(webhook), at);
      if (disabled !== null) health.set(webhookId, disabled);
      return disabled !== null;
    },
    async enableWebhook(accountId, webhookId) {
      const webhook = webhooks.get(accountId, webhookId);
      if (webhook === null) return null;
      const enabled = healthRules.enableHealth(healthOf(webhook));
      if (enabled !== null) health.set(webhookId, enabled);
      return enabled !== null;
    },
    async recoverDeliveries(accountId, webhookId, since, now) {
      const webhook = webhooks.get(accountId, webhookId);
      if (webhook === null) return null;
      if (healthOf(webhook).disabledAt !== null) throw new PortalError('WEBHOOK_DISABLED', webhookId);
      const ofWebhook = [...deliveries.rows.values()].filter((row) => row.webhookId === webhookId && row.accountId === accountId);
      const missed = [...deliveryRules.undeliveredEvents(ofWebhook)]
        .filter(([, latest]) => latest >= since)
        .map(([eventId]) => events.rows.get(eventId)!)
        .filter((event) => event.createdAt >= since && event.type === webhook.type);
      const made = oldestFirst(missed).map((event) => deliveryRules.recoveredDelivery(event, webhookId, now));
      for (const delivery of made) {
        deliveries.insert(delivery);
        pending.update(delivery);
      }
      return made.map((delivery) => structuredClone(delivery));
    },

    async isBlobReferenced(key) {
      return files.rows.has(key) || attachments.rows.has(key) || documentIds.has(key);
    },

    async claimIdempotencyKey(claim) {
      const id = idempotencyId(claim.accountId, claim.key);
      const held = idempotencyKeys.get(id);
      if (held !== undefined && held.expiresAt > claim.now) return structuredClone(held);
      const { accountId, key, token, fingerprint, now, leaseUntil } = claim;
      idempotencyKeys.set(id, { accountId, key, status: 'pending', token, fingerprint, answer: null, createdAt: now, expiresAt: leaseUntil });
      return null;
    },
    async releaseIdempotencyKey(accountId, key, token) {
      const id = idempotencyId(accountId, key);
      const held = idempotencyKeys.get(id);
      if (held === undefined || held.status !== 'pending' || held.token !== token) return false;
      idempotencyKeys.delete(id);
      return true;
    },
    async sweepIdempotencyKeys(now, limit) {
      let removed = 0;
      for (const [id, record] of idempotencyKeys) {
        if (removed >= limit) break;
        if (record.expiresAt <= now && idempotencyKeys.delete(id)) removed++;
      }
      return removed;
    },
  };
  tablesOf.set(storage, { agreements: agreements.rows, webhooks: webhooks.rows, events: events.rows, deliveries: deliveries.rows, idempotencyKeys, health });
  return storage;
}
