import path from 'node:path';
import * as deliveryRules from '../../src/domain/deliveries.js';
import * as healthRules from '../../src/domain/webhook-health.js';
import { PortalError, storageFull } from '../../src/errors.js';
import type { DeliveryTarget, Storage } from '../../src/ports.js';
import { newestFirst, oldestFirst } from '../../src/shared/order.js';
import {
  agreementSummary,
  type AgreementRecord,
  type AttachmentRecord,
  type DeliveryRecord,
  type EventRecord,
  type FileEntryRecord,
  type IdempotencyCompletion,
  type IdempotencyRecord,
  type WebhookHealthRecord,
  type WebhookRecord,
  withRotation,
  withSigningDefaults,
} from '../../src/records.js';
import { AgreementDue } from '../shared/agreement-due.js';
import { ensureDirectory, isDiskFull } from './durable.js';
import { acquireLock, type DirectoryLock } from './lock.js';
import { openRecordLog, type LogChange, type RecordLog, type ReplayedChange } from './record-log.js';
import { createRecordState, TABLES, type Row, type StoredRecord, type TableName } from './record-state.js';

export interface FsStorageOptions {
  /** The directory of the record log and its lock file; created when missing. One process at a time. */
  dir: string;
  /**
   * The log is rewritten with only the live records once it is at least this large and more than
   * twice their size. Default 64 MiB.
   */
  compactAfterBytes?: number;
}

/** One change of a transaction: a whole record stored, or one removed. */
type Change = { table: TableName; record: StoredRecord } | { table: TableName; id: string };

const putDelivery = (record: DeliveryRecord): Change => ({ table: 'delivery', record });
const putHealth = (record: WebhookHealthRecord): Change => ({ table: 'health', record });

/** The one id of an account's idempotency key, as the log stores it. */
const idempotencyId = (accountId: string, key: string): string => `${accountId}\u0000${key}`;

const LOG_FILE = 'records.log';
const LOCK_FILE = 'storage.lock';


const copyDelivery = (delivery: DeliveryRecord): DeliveryRecord => ({
  ...delivery,
  attempts: delivery.attempts.map((attempt) => ({ ...attempt })),
});

/** A record as this version reads it: a delivery logged before `attemptCount` existed counts the attempts it holds. */
function upgraded(table: TableName, record: StoredRecord): StoredRecord {
  if (table !== 'delivery') return record;
  const delivery = record as DeliveryRecord;
  delivery.attemptCount ??= delivery.attempts.length;
  return delivery;
}

/** Runs `fn` for one key at a time, in call order; other keys run freely. */
function keyedQueue() {
  const tails = new Map<string, Promise<unknown>>();
  return async <T>(key: string, fn: () => Promise<T>): Promise<T> => {
    const result = (tails.get(key) ?? Promise.resolve()).then(fn);
    const tail = result.catch(() => {});
    tails.set(key, tail);
    try {
      return await result;
    } finally {
      if (tails.get(key) === tail) tails.delete(key);
    }
  };
}

/**
 * Keeps records in one directory: an append-only log of checksummed transactions, fsynced before
 * a write resolves, replayed into an index in memory at open and compacted as it grows. A write
 * that resolved survives `kill -9` and power loss; a crash at any moment leaves a store that opens.
 * One process per directory (a lock file); `open()` takes it, `close()` gives it back. Methods
 * called before `open()` open the store first.
 */
export function fsStorage(options: FsStorageOptions): Storage {
  if (typeof options?.dir !== 'string' || options.dir === '') throw new TypeError('fsStorage: `dir` must be a directory path');
  const compactAfterBytes = options.compactAfterBytes ?? 64 * 1024 * 1024;
  if (!(compactAfterBytes >= 0)) throw new TypeError('fsStorage: `compactAfterBytes` must be a number of bytes');
  const dir = path.resolve(options.dir);
  const state = createRecordState();
  const agreementTurns = keyedQueue();
  /** The open agreements with a time to act at: built at replay, kept by each write. */
  const agreementsDue = new AgreementDue();
  /**
   * Idempotency keys claimed by requests still running, by `idempotencyId`. Only in memory: one
   * process uses the directory, and a claim of a process that ended can complete nothing, so after
   * a restart its key is free at once. A completed key is in the log, written with its record.
   */
  const claims = new Map<string, IdempotencyRecord>();
  let log: RecordLog | undefined;
  let lock: DirectoryLock | undefined;
  let opening: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  function replay(change: ReplayedChange) {
    if (!(TABLES as readonly string[]).includes(change.table)) {
      throw new Error(`${path.join(dir, LOG_FILE)} names a table "${change.table}" this version does not know`);
    }
    const table = change.table as TableName;
    if (change.json === undefined) return state.remove(table, change.id);
    const record = upgraded(table, JSON.parse(change.json) as StoredRecord);
    state.put(table, record, change.json, change.loc);
    if (table === 'agreement') agreementsDue.update(withSigningDefaults(record as AgreementRecord));
  }

  function open(): Promise<void> {
    opening ??= (async () => {
      await ensureDirectory(dir);
      const taken = await acquireLock(dir, LOCK_FILE, 'record store', (error) => log?.fail(error));
      try {
        log = await openRecordLog(
          path.join(dir, LOG_FILE),
          {
            compactAfterBytes,
            liveBytes: state.liveBytes,
            snapshot: state.snapshot,
          },
          replay,
        );
      } catch (error) {
        await taken.release();
        throw error;
      }
      lock = taken;
    })();
    return opening;
  }

  async function ready(): Promise<RecordLog> {
    if (closing === undefined) await open();
    if (closing !== undefined) throw new Error(`fsStorage: the store in ${dir} is closed`);
    return log!;
  }

  /**
   * Applies the changes to memory at once (so the next call sees them, and calls decide in the
   * order they came) and resolves once their frame is on disk. A transaction that cannot be written
   * is undone in memory before it rejects, and so is every one applied after it (the log reverts them
   * newest first): a failed write leaves nothing visible. A full disk rejects with `STORAGE_FULL`
   * (507) and the log takes writes again once there is space; after any other failure it refuses
   * every later write.
   */
  function commit(changes: Change[]): Promise<void> {
    if (changes.length === 0) return Promise.resolve();
    if (log!.failure !== undefined) return Promise.reject(log!.failure);
    // Everything is serialised before anything is applied: a record JSON cannot hold (a BigInt in
    // event data, say) rejects the whole transaction and changes nothing.
    const serialised = changes.map((change) => ('id' in change ? change : { ...change, json: JSON.stringify(change.record) }));
    const undo: { table: TableName; id: string; previous: Row | undefined }[] = [];
    const entries: LogChange[] = serialised.map((change) => {
      const id = 'id' in change ? change.id : change.record.id;
      const previous = state.get(change.table, id);
      undo.push({ table: change.table, id, previous });
      if ('id' in change) {
        state.remove(change.table, change.id);
        return { ...change, previous };
      }
      const { table, json } = change;
      return { table, json, row: state.put(table, JSON.parse(json) as StoredRecord, json), previous };
    });
    const revert = () => {
      for (let i = undo.length - 1; i >= 0; i--) state.revert(undo[i]!.table, undo[i]!.id, undo[i]!.previous);
    };
    return log!.append(entries, revert).catch((error: unknown) => {
      throw isDiskFull(error) ? storageFull(error) : error;
    });
  }

  /**
   * The change that completes the claim `completion` names, to commit with the record it created;
   * the claim leaves memory now, so nothing else reads it between this and the commit.
   */
  function completing(accountId: string, completion: IdempotencyCompletion | undefined): Change[] {
    if (completion === undefined) return [];
    const id = idempotencyId(accountId, completion.key);
    const held = claims.get(id);
    if (held === undefined || held.token !== completion.token) throw new PortalError('IDEMPOTENCY_KEY_IN_PROGRESS');
    const { fingerprint, answer, expiresAt } = completion;
    const record = { id, ...held, status: 'completed' as const, fingerprint, answer, expiresAt };
    return [{ table: 'idempotency', record }];
  }

  /** Takes the claims `changes` complete out of memory: called just before they are committed. */
  function settleClaims(changes: Change[]): void {
    for (const change of changes) if ('record' in change) claims.delete(change.record.id);
  }

  function assertNew(table: TableName, id: string) {
    if (state.has(table, id)) throw new PortalError('RECORD_EXISTS', id);
  }

  /** A copy of the record, from memory or, for agreements and events, from the log. */
  async function readRecord<T>(row: Row): Promise<T> {
    if (row.value !== undefined) return structuredClone(row.value) as T;
    return JSON.parse((await log!.read(row.loc!)).toString('utf8')) as T;
  }

  /** An agreement from the log, as this version reads it (one written before signing gets its defaults). */
  const readAgreement = async (row: Row) => withSigningDefaults(await readRecord<AgreementRecord>(row));

  const kept = <T>(row: Row) => row.value as T;

  /** The webhook's health: its record, or a fresh one when none was written yet. */
  const healthOf = (webhook: WebhookRecord): WebhookHealthRecord => {
    const row = state.get('health', webhook.id);
    return row === undefined ? healthRules.freshHealth(webhook) : kept<WebhookHealthRecord>(row);
  };
  /** Whether a due delivery may be sent: its webhook exists and is not disabled. */
  const deliverable = (delivery: DeliveryRecord): boolean => {
    if (!state.has('webhook', delivery.webhookId)) return false;
    const row = state.get('health', delivery.webhookId);
    return row === undefined || kept<WebhookHealthRecord>(row).disabledAt === null;
  };
  /** Writes the health `change` makes of the webhook's current one; `null` (no change) writes nothing. */
  async function changeHealth(
    accountId: string,
    webhookId: string,
    change: (current: WebhookHealthRecord) => WebhookHealthRecord | null,
  ): Promise<boolean | null> {
    await ready();
    const row = state.owned('webhook', accountId, webhookId);
    if (row === undefined) return null;
    const changed = change(healthOf(kept<WebhookRecord>(row)));
    if (changed === null) return false;
    await commit([putHealth(changed)]);
    return true;
  }

  /** The events and one pending delivery per webhook of each event's account and type; checks every id first. */
  function eventChanges(events: EventRecord[], target?: DeliveryTarget): { changes: Change[]; deliveries: DeliveryRecord[] } {
    const seen = new Set<string>();
    for (const event of events) {
      if (seen.has(event.id)) throw new PortalError('RECORD_EXISTS', event.id);
      assertNew('event', event.id);
      seen.add(event.id);
    }
    const deliveries: DeliveryRecord[] = [];
    for (const event of events) {
      for (const webhookId of state.webhookIds(event.accountId)) {
        if (!deliveryRules.isRecipient(kept<WebhookRecord>(state.get('webhook', webhookId)!), event, target)) continue;
        deliveries.push(deliveryRules.newDelivery(event, webhookId));
      }
    }
    const changes: Change[] = [
      ...events.map((record) => ({ table: 'event' as const, record })),
      ...deliveries.map(putDelivery),
    ];
    return { changes, deliveries };
  }

  return {
    open,
    async close() {
      closing ??= (async () => {
        if (opening === undefined) return;
        try {
          await opening;
        } catch {
          return; // open failed and released what it took
        }
        await log!.close();
        await lock!.release();
      })();
      return closing;
    },

    async insertWebhook(webhook, limits, idempotency) {
      await ready();
      assertNew('webhook', webhook.id);
      const completed = completing(webhook.accountId, idempotency);
      // Counted and committed with no await between: commit applies to memory at once, so two
      // creates cannot both pass the count.
      const max = limits?.maxPerAccount;
      if (max !== undefined && [...state.webhookIds(webhook.accountId)].length >= max) throw new PortalError('WEBHOOKS_LIMIT', max);
      settleClaims(completed);
      await commit([{ table: 'webhook', record: webhook }, ...completed]);
    },
    async getWebhook(accountId, id) {
      await ready();
      const row = state.owned('webhook', accountId, id);
      return row === undefined ? null : { ...kept<WebhookRecord>(row) };
    },
    async listWebhooks(accountId) {
      await ready();
      // The index keeps the order records were written in, which a replay and a compaction keep too.
      return oldestFirst([...state.webhookIds(accountId)].map((id) => kept<WebhookRecord>(state.get('webhook', id)!))).map((webhook) => ({
        ...webhook,
      }));
    },
    async deleteWebhook(accountId, id) {
      await ready();
      if (state.owned('webhook', accountId, id) === undefined) return false;
      const changes: Change[] = [{ table: 'webhook', id }];
      if (state.has('health', id)) changes.push({ table: 'health', id });
      for (const deliveryId of state.deliveryIds(id)) {
        const cancelled = deliveryRules.cancel(kept<DeliveryRecord>(state.get('delivery', deliveryId)!));
        if (cancelled !== null) changes.push(putDelivery(cancelled));
      }
      await commit(changes);
      return true;
    },
    async rotateWebhookSecret(accountId, id, rotation) {
      await ready();
      const row = state.owned('webhook', accountId, id);
      if (row === undefined) return null;
      // Read and committed with no await between: commit applies to memory at once, so a rotation
      // that comes next reads this one's secret.
      const rotated = withRotation(kept<WebhookRecord>(row), rotation);
      await commit([{ table: 'webhook', record: rotated }]);
      return { ...rotated };
    },

    async insertFileEntry(entry) {
      await ready();
      assertNew('file', entry.id);
      await commit([{ table: 'file', record: entry }]);
    },
    async getFileEntry(accountId, id) {
      await ready();
      const row = state.owned('file', accountId, id);
      return row === undefined ? null : { ...kept<FileEntryRecord>(row) };
    },
    async listFileEntries(accountId, directoryId) {
      await ready();
      return Array.from(state.entryIds(accountId, directoryId), (id) => ({ ...kept<FileEntryRecord>(state.get('file', id)!) }));
    },
    async deleteFileEntry(accountId, id) {
      await ready();
      if (state.owned('file', accountId, id) === undefined) return false;
      await commit([{ table: 'file', id }]);
      return true;
    },

    async insertAgreement(agreement, events, idempotency) {
      await ready();
      assertNew('agreement', agreement.id);
      const completed = completing(agreement.accountId, idempotency);
      const { changes } = eventChanges(events);
      settleClaims(completed);
      await commit([{ table: 'agreement', record: agreement }, ...changes, ...completed]);
      agreementsDue.update(agreement);
    },
    async agreementsDue(now, limit) {
      await ready();
      return agreementsDue.dueBy(now, limit);
    },
    async getAgreement(accountId, id) {
      await ready();
      const row = state.owned('agreement', accountId, id);
      return row === undefined ? null : readAgreement(row);
    },
    async listAgreements(accountId, page) {
      await ready();
      const ids = state.agreementIds(accountId, page.limit, page.after);
      if (ids === null) return null;
      // One at a time: a record holds its signature images (up to 6 of about 1.4 MB), which are
      // dropped before the next is read, so a page of 100 never holds them all at once. Each row is
      // looked up as it is read, not before: an update meanwhile replaces it, and a compaction then
      // retires the file the replaced row points into (agreements are never removed).
      const summaries = [];
      for (const id of ids) summaries.push(agreementSummary(await readAgreement(state.get('agreement', id)!)));
      return summaries;
    },
    async updateAgreement(accountId, id, change) {
      await ready();
      // One update of an agreement at a time, from reading it to applying the change in memory;
      // waiting for the disk happens outside, so updates of one agreement still share an fsync.
      const outcome = await agreementTurns(id, async () => {
        const row = state.owned('agreement', accountId, id);
        if (row === undefined) return null;
        const { agreement, events } = change(await readAgreement(row));
        if (agreement.id !== id || agreement.accountId !== accountId) {
          throw new Error('updateAgreement: change must keep the id and account');
        }
        const { changes } = eventChanges(events);
        const written = commit([{ table: 'agreement', record: agreement }, ...changes]);
        agreementsDue.update(agreement);
        return { written, stored: JSON.parse(JSON.stringify(agreement)) as AgreementRecord };
      });
      if (outcome === null) return null;
      await outcome.written;
      return outcome.stored;
    },

    async insertAttachment(attachment) {
      await ready();
      assertNew('attachment', attachment.id);
      await commit([{ table: 'attachment', record: attachment }]);
    },
    async getAttachment(accountId, id) {
      await ready();
      const row = state.owned('attachment', accountId, id);
      return row === undefined ? null : { ...kept<AttachmentRecord>(row) };
    },
    async deleteAttachment(accountId, id) {
      await ready();
      if (state.owned('attachment', accountId, id) === undefined) return false;
      await commit([{ table: 'attachment', id }]);
      return true;
    },

    async publishEvents(events, target) {
      await ready();
      const { changes, deliveries } = eventChanges(events, target);
      await commit(changes);
      return deliveries.map(copyDelivery);
    },
    async getDelivery(accountId, id) {
      await ready();
      const row = state.owned('delivery', accountId, id);
      return row === undefined ? null : copyDelivery(kept<DeliveryRecord>(row));
    },
    async listDeliveries(accountId, webhookId) {
      await ready();
      const listed = Array.from(state.deliveryIds(webhookId), (id) => kept<DeliveryRecord>(state.get('delivery', id)!));
      return newestFirst(listed.filter((delivery) => delivery.accountId === accountId)).map(copyDelivery);
    },
    async claimDeliveries(claim) {
      await ready();
      const due = Array.from(state.pendingDeliveryIds(), (id) => kept<DeliveryRecord>(state.get('delivery', id)!))
        .filter((delivery) => deliveryRules.isClaimable(delivery, claim.now))
        .sort(deliveryRules.compareDue);
      const { leased, cancelled } = deliveryRules.planClaim(due, claim, deliverable);
      // Read before waiting for the disk: a webhook deleted meanwhile is gone from the state by then.
      const claimed = leased.map((delivery) => ({
        delivery,
        webhook: { ...kept<WebhookRecord>(state.get('webhook', delivery.webhookId)!) },
        eventRow: state.get('event', delivery.eventId)!,
      }));
      await commit([...cancelled, ...leased].map(putDelivery));
      return Promise.all(
        claimed.map(async ({ delivery, webhook, eventRow }) => ({
          delivery: copyDelivery(delivery),
          event: await readRecord<EventRecord>(eventRow),
          webhook,
        })),
      );
    },
    async recordAttempt(id, owner, attempt, outcome, rule) {
      await ready();
      const row = state.get('delivery', id);
      const recorded = row === undefined ? null : deliveryRules.recordAttempt(kept<DeliveryRecord>(row), owner, attempt, outcome);
      if (recorded === null) return false;
      const webhook = state.get('webhook', recorded.webhookId);
      // Decided and applied with no await between, so two attempts of one webhook never both see it enabled.
      const change = rule === undefined || webhook === undefined ? null : healthRules.healthAfterAttempt(healthOf(kept<WebhookRecord>(webhook)), attempt, rule);
      await commit(change?.changed ? [putDelivery(recorded), putHealth(change.health)] : [putDelivery(recorded)]);
      return change?.disabled ?? true;
    },
    async redeliver(accountId, id, nextAttemptAt) {
      await ready();
      const row = state.owned('delivery', accountId, id);
      if (row === undefined) return null;
      const again = deliveryRules.redeliver(kept<DeliveryRecord>(row), nextAttemptAt);
      if (again === null) throw new PortalError('DELIVERY_IN_FLIGHT', id);
      await commit([putDelivery(again)]);
      return copyDelivery(again);
    },

    async getWebhookHealth(accountId, webhookId) {
      await ready();
      const row = state.owned('webhook', accountId, webhookId);
      return row === undefined ? null : { ...healthOf(kept<WebhookRecord>(row)) };
    },
    disableWebhook: (accountId, webhookId, at) => changeHealth(accountId, webhookId, (current) => healthRules.disableHealth(current, at)),
    enableWebhook: (accountId, webhookId) => changeHealth(accountId, webhookId, healthRules.enableHealth),
    async recoverDeliveries(accountId, webhookId, since, now) {
      await ready();
      const row = state.owned('webhook', accountId, webhookId);
      if (row === undefined) return null;
      if (healthOf(kept<WebhookRecord>(row)).disabledAt !== null) throw new PortalError('WEBHOOK_DISABLED', webhookId);
      const ofWebhook = Array.from(state.deliveryIds(webhookId), (id) => kept<DeliveryRecord>(state.get('delivery', id)!));
      const candidates = [...deliveryRules.undeliveredEvents(ofWebhook)].filter(([, latest]) => latest >= since);
      // Events live in the log, not in memory: read only those a delivery dates at or after `since`.
      const events = await Promise.all(candidates.map(([eventId]) => readRecord<EventRecord>(state.get('event', eventId)!)));
      const { type } = kept<WebhookRecord>(row);
      const missed = oldestFirst(events.filter((event) => event.createdAt >= since && event.type === type));
      // Checked again after reading: a delete, a disable or another recovery may have run meanwhile.
      const current = state.owned('webhook', accountId, webhookId);
      if (current === undefined) return null;
      if (healthOf(kept<WebhookRecord>(current)).disabledAt !== null) throw new PortalError('WEBHOOK_DISABLED', webhookId);
      const stillMissed = deliveryRules.undeliveredEvents(Array.from(state.deliveryIds(webhookId), (id) => kept<DeliveryRecord>(state.get('delivery', id)!)));
      const made = missed
        .filter((event) => stillMissed.has(event.id))
        .map((event) => deliveryRules.recoveredDelivery(event, webhookId, now));
      await commit(made.map(putDelivery));
      return made.map(copyDelivery);
    },

    async isBlobReferenced(key) {
      await ready();
      return state.has('file', key) || state.has('attachment', key) || state.isDocument(key);
    },

    async claimIdempotencyKey(claim) {
      await ready();
      const id = idempotencyId(claim.accountId, claim.key);
      const held = claims.get(id);
      // A live claim and a live answer never meet: a claim is made only once the answer expired.
      if (held !== undefined && held.expiresAt > claim.now) return structuredClone(held);
      const row = state.get('idempotency', id);
      if (row !== undefined && state.idempotencyExpiry(id)! > claim.now) {
        const { id: _id, ...record } = await readRecord<IdempotencyRecord & { id: string }>(row);
        return record;
      }
      const { accountId, key, token, fingerprint, now, leaseUntil } = claim;
      claims.set(id, { accountId, key, status: 'pending', token, fingerprint, answer: null, createdAt: now, expiresAt: leaseUntil });
      return null;
    },
    async releaseIdempotencyKey(accountId, key, token) {
      await ready();
      const id = idempotencyId(accountId, key);
      if (claims.get(id)?.token !== token) return false;
      claims.delete(id);
      return true;
    },
    async sweepIdempotencyKeys(now, limit) {
      await ready();
      let removed = 0;
      for (const [id, claim] of claims) {
        if (removed >= limit) break;
        if (claim.expiresAt <= now && claims.delete(id)) removed++;
      }
      const changes: Change[] = [];
      for (const [id, expiresAt] of state.idempotencyExpiries()) {
        if (removed + changes.length >= limit) break;
        if (expiresAt <= now) changes.push({ table: 'idempotency', id });
      }
      await commit(changes);
      return removed + changes.length;
    },
  };
}
