import * as deliveryRules from '../../src/rules/deliveries.js';
import * as healthRules from '../../src/rules/webhook-health.js';
import { PortalError } from '../../src/errors.js';
import type { DeliveryTarget, Storage } from '../../src/ports.js';
import {
  TRAIL_APPEND_ONLY,
  agreementSummary,
  extendsTrail,
  redactsTrail,
  type AgreementRecord,
  type AttachmentRecord,
  type DeliveryRecord,
  type EventRecord,
  type FileEntryRecord,
  type IdempotencyCompletion,
  type IdempotencyRecord,
  type PortalSessionRecord,
  type WebhookHealthRecord,
  type WebhookRecord,
  withRotation,
  withSigningDefaults,
} from '../../src/records.js';
import { oldestFirst } from '../../src/shared/order.js';
import { AgreementDue } from './agreement-due.js';
import { Pacing } from './pacing.js';
import { createRecordState, type StateRow, type StoredRecord, type TableName } from './record-state.js';

/** One change of a transaction: a whole record stored, or one removed. */
type Change = { table: TableName; record: StoredRecord } | { table: TableName; id: string };

/** A change as a journal writes it: the record's JSON and the row now holding it, or the id removed; `previous` is the row it replaced. */
type JournalEntry<L> =
  | { table: TableName; json: string; row: StateRow<L>; previous: StateRow<L> | undefined }
  | { table: TableName; id: string; previous: StateRow<L> | undefined };

/**
 * Where an in-process store keeps its records beyond memory: the fs adapter's record log, or
 * nowhere (the memory adapter). The store applies each transaction to memory at once and hands it
 * to the journal, which resolves once it is kept.
 */
export interface Journal<L> {
  /** Which tables hold their records in memory; the others are read back through `read`. */
  readonly kept: Record<TableName, boolean>;
  /** Whether the store may be used now; while not, its methods wait for `open`. */
  readonly opened: boolean;
  /** Resolves once the store may be used (its journal replayed); rejects when it never will (closed). */
  open(): Promise<void>;
  /**
   * Keeps one transaction. When it cannot, calls `revert` (which puts memory back as it was)
   * before rejecting with the reason; a rejection also says that later writes would fail alike.
   * With `forget`, the transaction replaces data that must not stay anywhere: once it resolves,
   * no earlier copy of the records it replaces is left in what the journal keeps.
   */
  append(entries: JournalEntry<L>[], revert: () => void, forget?: boolean): Promise<void>;
  /** The JSON of a record not kept in memory, at the place the journal gave it. */
  read(loc: L): Promise<string>;
}

/**
 * The store's methods, each waiting for the journal to open (a reopen replaying its log) before it
 * runs. Once open, a call goes straight to the method, which runs up to its first await at once.
 */
function guarded<T extends object>(journal: Pick<Journal<unknown>, 'opened' | 'open'>, methods: T): T {
  const wrapped = {} as Record<string, unknown>;
  for (const [name, method] of Object.entries(methods) as [string, (...args: unknown[]) => Promise<unknown>][]) {
    wrapped[name] = (...args: unknown[]) =>
      journal.opened ? method(...args) : journal.open().then(() => method(...args));
  }
  return wrapped as T;
}

/** Deliveries one page of a delivery log reads at most: past it, the page ends early with a cursor. */
const MAX_SCANNED_PER_PAGE = 5000;

/** The one id of an account's idempotency key, as the store keeps it. */
export const idempotencyId = (accountId: string, key: string): string => `${accountId}\u0000${key}`;

const putDelivery = (record: DeliveryRecord): Change => ({ table: 'delivery', record });
const putHealth = (record: WebhookHealthRecord): Change => ({ table: 'health', record });

/** A copy of a webhook row: its filter is the one field that holds more than text. */
function copyWebhook(row: WebhookRecord): WebhookRecord {
  return row.filter === undefined ? { ...row } : { ...row, filter: structuredClone(row.filter) };
}

/** A copy of a file entry row. */
const copyEntry = (row: FileEntryRecord): FileEntryRecord => ({ ...row });

/** A copy of a delivery row (one written before a field existed got its default at replay: `upgraded`). */
const copyDelivery = (delivery: DeliveryRecord): DeliveryRecord => ({
  ...delivery,
  attempts: delivery.attempts.map((attempt) => ({ ...attempt })),
});

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
 * A record as this version reads it: a delivery written before `attemptCount` existed counts the
 * attempts it holds; one written before `eventType` takes its event's (`typeOf`, from the event
 * replayed before it).
 */
function upgraded(
  table: TableName,
  record: StoredRecord,
  typeOf: (eventId: string) => string | undefined,
): StoredRecord {
  if (table !== 'delivery') return record;
  const delivery = record as DeliveryRecord;
  delivery.attemptCount ??= delivery.attempts.length;
  delivery.eventType ??= typeOf(delivery.eventId) ?? '';
  delivery.orderingKey ??= null;
  delivery.redeliverQueued ??= false;
  return delivery;
}

/** What an in-process store offers beside the port: the replay of a journal, and a look at its rows. */
export interface InProcessStore<L> {
  storage: Storage;
  /** Applies one change read back from the journal at open: a record put (its JSON, and where it lies), or removed. */
  replay(table: TableName, change: { json: string; loc: L } | { id: string }): void;
  /** Every live row, in the order each was first written: what a journal's compaction copies. */
  snapshot(): StateRow<L>[];
  /** Bytes of JSON the live records take. */
  liveBytes(): number;
  /** The stored record itself (not a copy) when its table is kept in memory: for tests that read past the port. */
  peek(table: TableName, id: string): unknown;
}

/**
 * Every record of the port, its indexes and its rules, in this process: the whole of the memory
 * adapter, and the fs adapter with a record log as its journal. Each write is applied to memory
 * at once (so the next call sees it, and calls decide in the order they came) and resolves once
 * the journal kept it; one the journal cannot keep is undone before it rejects. Records are copied
 * in and out through JSON, so a caller that mutates a result changes nothing stored, and every
 * adapter hands back the same shapes.
 */
export function inProcessStore<L>(journal: Journal<L>): InProcessStore<L> {
  const state = createRecordState<L>(journal.kept);
  const agreementTurns = keyedQueue();
  /** The open agreements with a time to act at: built at replay, kept by each write. */
  const agreementsDue = new AgreementDue();
  /**
   * Idempotency keys claimed by requests still running, by `idempotencyId`. Only in memory: one
   * process uses the store, and a claim of a process that ended can complete nothing, so after a
   * restart its key is free at once. A completed key is stored with its record.
   */
  const claims = new Map<string, IdempotencyRecord>();
  /** The rate-limited webhooks' pacing: only in memory (see `Pacing`). */
  const pacing = new Pacing();

  /** The webhook's deliveries of one event, newest first, from just past `from`, made before `until`. */
  function eventDeliveries(
    webhookId: string,
    eventId: string,
    from: { id: string; createdAt: string } | undefined,
    until: string | undefined,
  ): string[] {
    const delivery = (id: string) => kept<DeliveryRecord>(state.get('delivery', id)!);
    const ids = state
      .deliveriesOf(eventId)
      .filter((id) => delivery(id).webhookId === webhookId)
      .reverse();
    const createdAt = (id: string) => delivery(id).createdAt;
    const past = from === undefined ? -1 : ids.indexOf(from.id);
    return ids.filter(
      (id, at) =>
        (from === undefined || (past >= 0 ? at > past : createdAt(id) < from.createdAt)) &&
        (until === undefined || createdAt(id) < until),
    );
  }

  /**
   * Applies the changes to memory and resolves once the journal kept them; one it cannot keep is
   * undone first. Everything is serialised before anything is applied: a record JSON cannot hold
   * (a BigInt in event data, say) rejects the whole transaction and changes nothing.
   */
  function commit(changes: Change[], forget = false): Promise<void> {
    if (changes.length === 0) return Promise.resolve();
    const serialised = changes.map((change) =>
      'id' in change ? change : { ...change, json: JSON.stringify(change.record) },
    );
    const undo: { table: TableName; id: string; previous: StateRow<L> | undefined }[] = [];
    const entries: JournalEntry<L>[] = serialised.map((change) => {
      const id = 'id' in change ? change.id : change.record.id;
      const previous = state.get(change.table, id);
      undo.push({ table: change.table, id, previous });
      if ('id' in change) {
        state.remove(change.table, change.id);
        return { table: change.table, id, previous };
      }
      const { table, json } = change;
      return { table, json, row: state.put(table, JSON.parse(json) as StoredRecord, json), previous };
    });
    const revert = () => {
      for (let i = undo.length - 1; i >= 0; i--) state.revert(undo[i]!.table, undo[i]!.id, undo[i]!.previous);
    };
    return journal.append(entries, revert, forget);
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

  /** A copy of the record, from memory or from the journal. */
  async function readRecord<T>(row: StateRow<L>): Promise<T> {
    if (row.value !== undefined) return structuredClone(row.value) as T;
    return JSON.parse(await journal.read(row.loc!)) as T;
  }

  /** An agreement as this version reads it (one written before signing gets its defaults). */
  const readAgreement = async (row: StateRow<L>) => withSigningDefaults(await readRecord<AgreementRecord>(row));

  const kept = <T>(row: StateRow<L>) => row.value as T;

  /** The webhook's health: its record, or a fresh one when none was written yet. */
  const healthOf = (webhook: WebhookRecord): WebhookHealthRecord => {
    const row = state.get('health', webhook.id);
    return row === undefined ? healthRules.freshHealth(webhook) : kept<WebhookHealthRecord>(row);
  };
  /** Whether a due delivery may be sent: its webhook exists and is not disabled. */
  const deliverable = (delivery: DeliveryRecord): boolean => {
    if (!state.has('webhook', delivery.webhookId)) return false;
    // Its event gone with a damaged stretch a repair dropped: there is nothing to send, ever.
    if (!state.has('event', delivery.eventId)) return false;
    const row = state.get('health', delivery.webhookId);
    return row === undefined || kept<WebhookHealthRecord>(row).disabledAt === null;
  };
  /** Writes the health `change` makes of the webhook's current one; `null` (no change) writes nothing. */
  async function changeHealth(
    accountId: string,
    webhookId: string,
    change: (current: WebhookHealthRecord) => WebhookHealthRecord | null,
  ): Promise<boolean | null> {
    const row = state.owned('webhook', accountId, webhookId);
    if (row === undefined) return null;
    const changed = change(healthOf(kept<WebhookRecord>(row)));
    if (changed === null) return false;
    await commit([putHealth(changed)]);
    return true;
  }

  /** The events and one pending delivery per webhook of each event's account and type; checks every id first. */
  function eventChanges(
    events: EventRecord[],
    target?: DeliveryTarget,
  ): { changes: Change[]; deliveries: DeliveryRecord[] } {
    const seen = new Set<string>();
    for (const event of events) {
      if (seen.has(event.id)) throw new PortalError('RECORD_EXISTS', event.id);
      assertNew('event', event.id);
      seen.add(event.id);
    }
    const made: DeliveryRecord[] = [];
    for (const event of events) {
      for (const webhookId of state.webhookIds(event.accountId)) {
        if (!deliveryRules.isRecipient(kept<WebhookRecord>(state.get('webhook', webhookId)!), event, target)) continue;
        made.push(deliveryRules.newDelivery(event, webhookId));
      }
    }
    // Decided and applied with no await between: commit applies to memory at once.
    const deliveries = deliveryRules.inKeyOrder(made, state.keyTaken);
    const changes: Change[] = [
      ...events.map((record) => ({ table: 'event' as const, record })),
      ...deliveries.map(putDelivery),
    ];
    return { changes, deliveries };
  }

  /** The account's sessions live at `now` (unrevoked, expiring after it), counted up to `max`. */
  function liveSessions(accountId: string, now: string, max: number): number {
    let live = 0;
    for (const id of state.unrevokedSessionIds(accountId)) {
      if (kept<PortalSessionRecord>(state.get('session', id)!).expiresAt > now && ++live === max) break;
    }
    return live;
  }

  const deliveriesOf = (webhookId: string) =>
    Array.from(state.deliveryIds(webhookId), (id) => kept<DeliveryRecord>(state.get('delivery', id)!));

  const storage: Storage = guarded(journal, {
    async insertWebhook(webhook, limits, idempotency) {
      assertNew('webhook', webhook.id);
      const completed = completing(webhook.accountId, idempotency);
      // Counted and committed with no await between: commit applies to memory at once, so two
      // creates cannot both pass the count.
      const max = limits?.maxPerAccount;
      if (max !== undefined && state.webhookIds(webhook.accountId).size >= max)
        throw new PortalError('WEBHOOKS_LIMIT', max);
      settleClaims(completed);
      await commit([{ table: 'webhook', record: webhook }, ...completed]);
    },
    async getWebhook(accountId, id) {
      const row = state.owned('webhook', accountId, id);
      return row === undefined ? null : copyWebhook(kept<WebhookRecord>(row));
    },
    async listWebhooks(accountId) {
      // The index keeps the order records were written in, which a replay and a compaction keep too.
      return oldestFirst(
        Array.from(state.webhookIds(accountId), (id) => copyWebhook(kept<WebhookRecord>(state.get('webhook', id)!))),
      );
    },
    async deleteWebhook(accountId, id) {
      if (state.owned('webhook', accountId, id) === undefined) return false;
      const changes: Change[] = [{ table: 'webhook', id }];
      if (state.has('health', id)) changes.push({ table: 'health', id });
      // Every delivery of the webhook, not only the queued ones: a pending one with no next attempt is not queued.
      for (const delivery of deliveriesOf(id)) {
        const cancelled = deliveryRules.cancel(delivery);
        if (cancelled !== null) changes.push(putDelivery(cancelled));
      }
      await commit(changes);
      return true;
    },
    async rotateWebhookSecret(accountId, id, rotation) {
      const row = state.owned('webhook', accountId, id);
      if (row === undefined) return null;
      // Read and committed with no await between: commit applies to memory at once, so a rotation
      // that comes next reads this one's secret.
      const rotated = withRotation(kept<WebhookRecord>(row), rotation);
      await commit([{ table: 'webhook', record: rotated }]);
      return copyWebhook(rotated);
    },

    async updateWebhook(accountId, id, { filter, rateLimit }, now) {
      const row = state.owned('webhook', accountId, id);
      if (row === undefined) return null;
      const { filter: oldFilter, rateLimit: oldLimit, ...rest } = kept<WebhookRecord>(row);
      const keptFilter = filter === undefined ? oldFilter : (filter ?? undefined);
      const keptLimit = rateLimit === undefined ? oldLimit : (rateLimit ?? undefined);
      const changed: WebhookRecord = {
        ...rest,
        ...(keptFilter === undefined ? {} : { filter: keptFilter }),
        ...(keptLimit === undefined ? {} : { rateLimit: keptLimit }),
      };
      const changes = [{ table: 'webhook', record: changed } as Change];
      // A new limit paces again what waited for a slot of the old one: due now, the next claim paces it.
      if (keptLimit !== oldLimit && oldLimit !== undefined) {
        for (const waited of pacing.restart(id, now, oldLimit)) {
          const delivery = state.get('delivery', waited);
          if (delivery === undefined) continue;
          const current = kept<DeliveryRecord>(delivery);
          if (current.status !== 'pending' || current.nextAttemptAt === null || current.nextAttemptAt <= now) continue;
          changes.push(putDelivery({ ...current, nextAttemptAt: now }));
        }
      }
      await commit(changes);
      return copyWebhook(changed);
    },

    async insertFileEntry(entry) {
      assertNew('file', entry.id);
      await commit([{ table: 'file', record: entry }]);
    },
    async getFileEntry(accountId, id) {
      const row = state.owned('file', accountId, id);
      return row === undefined ? null : copyEntry(kept<FileEntryRecord>(row));
    },
    async listFileEntries(accountId, directoryId) {
      return state.entriesInOrder(accountId, directoryId).map(copyEntry);
    },
    async deleteFileEntry(accountId, id) {
      if (state.owned('file', accountId, id) === undefined) return false;
      await commit([{ table: 'file', id }]);
      return true;
    },

    async insertAgreement(agreement, events, idempotency) {
      assertNew('agreement', agreement.id);
      const completed = completing(agreement.accountId, idempotency);
      const { changes } = eventChanges(events);
      settleClaims(completed);
      await commit([{ table: 'agreement', record: agreement }, ...changes, ...completed]);
      agreementsDue.update(agreement);
    },
    async agreementsDue(now, limit, perAccount, unscheduled = false) {
      return agreementsDue.dueBy(now, limit, perAccount, unscheduled);
    },
    async getAgreement(accountId, id) {
      const row = state.owned('agreement', accountId, id);
      return row === undefined ? null : readAgreement(row);
    },
    async listAgreements(accountId, page) {
      const ids = state.agreementIds(accountId, page.limit, page.after);
      if (ids === null) return null;
      // One at a time: a record holds its signature images (up to 6 of about 1.4 MB), which are
      // dropped before the next is read, so a page of 100 never holds them all at once. Each row is
      // looked up as it is read, not before: an update meanwhile replaces it, and a compaction then
      // retires the file the replaced row points into.
      const summaries = [];
      for (const id of ids) {
        // Removed while the page was read: it is left out.
        const row = state.get('agreement', id);
        if (row !== undefined) summaries.push(agreementSummary(await readAgreement(row)));
      }
      return summaries;
    },
    async updateAgreement(accountId, id, change) {
      // One update of an agreement at a time, from reading it to applying the change in memory;
      // waiting for the journal happens outside, so updates of one agreement still share a write.
      const outcome = await agreementTurns(id, async () => {
        const row = state.owned('agreement', accountId, id);
        if (row === undefined) return null;
        const current = await readAgreement(row);
        const { agreement, events } = change(current);
        if (agreement.id !== id || agreement.accountId !== accountId) {
          throw new Error('updateAgreement: change must keep the id and account');
        }
        if (!extendsTrail(current.audit, agreement.audit)) throw new Error(TRAIL_APPEND_ONLY);
        const { changes } = eventChanges(events);
        const written = commit([{ table: 'agreement', record: agreement }, ...changes]);
        agreementsDue.update(agreement);
        return { written, stored: JSON.parse(JSON.stringify(agreement)) as AgreementRecord };
      });
      if (outcome === null) return null;
      await outcome.written;
      return outcome.stored;
    },

    async eraseAgreement(accountId, id, erase, eraseData) {
      const outcome = await agreementTurns(id, async () => {
        const row = state.owned('agreement', accountId, id);
        if (row === undefined) return null;
        const current = await readAgreement(row);
        const agreement = erase(current);
        if (agreement.id !== id || agreement.accountId !== accountId) {
          throw new Error('eraseAgreement: erase must keep the id and account');
        }
        if (!redactsTrail(current.audit, agreement.audit)) throw new Error(TRAIL_APPEND_ONLY);
        // Read first, then (with no await between) kept only where the row read is still the one
        // stored: retention may remove an event or a key meanwhile, which must not come back.
        const rewritten: { row: StateRow<L>; change: Change }[] = [];
        for (const eventId of state.eventIdsOfKinds(accountId, 'agreement-')) {
          const eventRow = state.get('event', eventId);
          // Only the events made since the agreement are read (from disk, on fs): not the account's whole history.
          if (eventRow === undefined || eventRow.createdAt! < current.createdAt) continue;
          const event = await readRecord<EventRecord>(eventRow);
          if (event.orderingKey !== id) continue;
          const record: EventRecord = { ...event, data: eraseData(event.data) };
          rewritten.push({ row: eventRow, change: { table: 'event', record } });
        }
        const prefix = idempotencyId(accountId, '');
        for (const [keyId] of state.idempotencyExpiries()) {
          const keyRow = keyId.startsWith(prefix) ? state.get('idempotency', keyId) : undefined;
          if (keyRow === undefined) continue;
          const kept = await readRecord<IdempotencyRecord & { id: string }>(keyRow);
          if (kept.answer === null || !kept.answer.location?.endsWith(`/agreements/${id}`)) continue;
          const body = JSON.stringify(eraseData(JSON.parse(kept.answer.body)));
          const record = { ...kept, answer: { ...kept.answer, body } };
          rewritten.push({ row: keyRow, change: { table: 'idempotency', record } });
        }
        const still = rewritten.filter(({ row, change }) => state.get(change.table, row.id) === row);
        const changes: Change[] = [{ table: 'agreement', record: agreement }, ...still.map(({ change }) => change)];
        // What was erased must leave the journal too, unless nothing new was (erased before).
        const written = commit(changes, JSON.stringify(current) !== JSON.stringify(agreement));
        agreementsDue.update(agreement);
        return { written, stored: JSON.parse(JSON.stringify(agreement)) as AgreementRecord };
      });
      if (outcome === null) return null;
      await outcome.written;
      return outcome.stored;
    },

    async insertAttachment(attachment) {
      assertNew('attachment', attachment.id);
      await commit([{ table: 'attachment', record: attachment }]);
    },
    async getAttachment(accountId, id) {
      const row = state.owned('attachment', accountId, id);
      return row === undefined ? null : { ...kept<AttachmentRecord>(row) };
    },
    async deleteAttachment(accountId, id) {
      if (state.owned('attachment', accountId, id) === undefined) return false;
      await commit([{ table: 'attachment', id }]);
      return true;
    },

    async publishEvents(events, target) {
      const { changes, deliveries } = eventChanges(events, target);
      await commit(changes);
      return deliveries.map(copyDelivery);
    },
    async recentEvents(accountId, type, limit) {
      // Looked up as each is read: retention may remove one meanwhile.
      const events: EventRecord[] = [];
      for (const id of state.recentEventIds(accountId, type, limit)) {
        const row = state.get('event', id);
        if (row !== undefined) events.push(await readRecord<EventRecord>(row));
      }
      return events;
    },
    async getDelivery(accountId, id) {
      const row = state.owned('delivery', accountId, id);
      return row === undefined ? null : copyDelivery(kept<DeliveryRecord>(row));
    },
    async listDeliveries(accountId, webhookId, query) {
      const { limit, after, status, eventType, since, until, eventId } = query;
      const from = after === undefined ? undefined : { id: after.key, createdAt: after.createdAt };
      const found: DeliveryRecord[] = [];
      let scanned = 0;
      let last: DeliveryRecord | undefined;
      // One event's deliveries are found by the event, not by walking the log: a few ids, newest first.
      const ids =
        eventId === undefined
          ? state.deliveryIds(webhookId, from, until)
          : eventDeliveries(webhookId, eventId, from, until);
      for (const id of ids) {
        const delivery = kept<DeliveryRecord>(state.get('delivery', id)!);
        if (since !== undefined && delivery.createdAt < since) break;
        // A filter few deliveries match ends the page early, at a cursor where the next goes on:
        // one request never walks the whole log on the event loop (bench row "a filter matching
        // none of them" of growth.bench.ts).
        if (++scanned > MAX_SCANNED_PER_PAGE)
          return { deliveries: found.map(copyDelivery), next: { createdAt: last!.createdAt, key: last!.id } };
        last = delivery;
        if (delivery.accountId !== accountId) continue;
        if (
          (status !== undefined && delivery.status !== status) ||
          (eventType !== undefined && delivery.eventType !== eventType)
        )
          continue;
        if (found.length === limit) {
          const last = found.at(-1)!;
          return { deliveries: found.map(copyDelivery), next: { createdAt: last.createdAt, key: last.id } };
        }
        found.push(delivery);
      }
      return { deliveries: found.map(copyDelivery), next: null };
    },
    async claimDeliveries(claim) {
      // Each account's due deliveries in a queue of its own: an account at its share is left after one look.
      const due = state.dueBy(claim.now);
      const heldUntil = (delivery: DeliveryRecord) => {
        const health = state.get('health', delivery.webhookId);
        const until = health === undefined ? null : healthRules.heldAt(kept<WebhookHealthRecord>(health), claim.now);
        if (until !== null) pacing.held(delivery.webhookId, delivery.id);
        return until;
      };
      const slotOf = (delivery: DeliveryRecord) => {
        const { rateLimit } = kept<WebhookRecord>(state.get('webhook', delivery.webhookId)!);
        return rateLimit === undefined ? null : pacing.slotOf(delivery, rateLimit, claim.now);
      };
      const { leased, cancelled, deferred } = deliveryRules.planClaim(due.rows, claim, {
        deliverable,
        accountFull: due.skip,
        heldUntil,
        slotOf,
      });
      // A key whose turn is cancelled (its webhook disabled) has its held deliveries cancelled too:
      // they would each be cancelled when their turn came.
      for (const turn of [...cancelled]) {
        if (turn.orderingKey === null) continue;
        for (const id of state.heldOf(turn.webhookId, turn.orderingKey))
          cancelled.push(deliveryRules.cancel(kept<DeliveryRecord>(state.get('delivery', id)!))!);
      }
      // Read before waiting for the journal: a webhook deleted meanwhile is gone from the state by then.
      const claimed = leased.map((delivery) => ({
        delivery,
        webhook: copyWebhook(kept<WebhookRecord>(state.get('webhook', delivery.webhookId)!)),
        eventRow: state.get('event', delivery.eventId)!,
      }));
      await commit([...cancelled, ...deferred, ...leased].map(putDelivery));
      // After the commit: a delivery deferred by this claim holds its slot only once stored with it.
      pacing.sweep((id, slot) => {
        const row = state.get('delivery', id);
        return row !== undefined && kept<DeliveryRecord>(row).nextAttemptAt === slot;
      });
      return Promise.all(
        claimed.map(async ({ delivery, webhook, eventRow }) => ({
          delivery: copyDelivery(delivery),
          event: await readRecord<EventRecord>(eventRow),
          webhook,
        })),
      );
    },
    async callStats(accountId, webhookId, since) {
      return state.owned('webhook', accountId, webhookId) === undefined ? [] : state.callStats(webhookId, since);
    },
    async deliveryQueue(now, limit) {
      let waiting = 0;
      let oldestDueAt: string | null = null;
      // Earliest due first; the leased ones met on the way are at most the calls in flight.
      for (const row of state.dueBy(now).rows) {
        if (waiting >= limit) break;
        if (!deliveryRules.isClaimable(row, now)) continue;
        oldestDueAt ??= row.nextAttemptAt;
        waiting++;
      }
      return { waiting, oldestDueAt };
    },
    async recordAttempt({ id, owner, attempt, outcome, health: rule, hold }) {
      const row = state.get('delivery', id);
      const recorded =
        row === undefined ? null : deliveryRules.recordAttempt(kept<DeliveryRecord>(row), owner, attempt, outcome);
      if (recorded === null) return deliveryRules.NOT_RECORDED;
      const webhook = state.get('webhook', recorded.webhookId);
      // Decided and applied with no await between, so two attempts of one webhook never both see it enabled.
      const change =
        rule === undefined || webhook === undefined
          ? null
          : healthRules.healthAfterAttempt(healthOf(kept<WebhookRecord>(webhook)), attempt, rule);
      const changes = [putDelivery(recorded)];
      // The receiver asked to hold the webhook's calls: the later of that and the hold it has.
      const held =
        hold === undefined || webhook === undefined
          ? null
          : healthRules.holdHealth(change?.health ?? healthOf(kept<WebhookRecord>(webhook)), hold);
      if (held !== null) changes.push(putHealth(held));
      else if (change?.changed) changes.push(putHealth(change.health));
      // Its key's turn ended: the earliest held delivery of the key goes next.
      if (deliveryRules.endsTurn(recorded)) {
        const [next] = state.heldOf(recorded.webhookId, recorded.orderingKey!);
        if (next !== undefined)
          changes.push(
            putDelivery(
              deliveryRules.release(
                kept<DeliveryRecord>(state.get('delivery', next)!),
                deliveryRules.dueAfter(attempt),
              ),
            ),
          );
      }
      await commit(changes);
      return {
        recorded: true,
        disabled: change?.disabled ?? null,
        dueAgain: deliveryRules.isDueAfter(recorded, attempt),
      };
    },
    async giveBackDeliveries(owner, ids) {
      const changes: Change[] = [];
      for (const id of ids) {
        const row = state.get('delivery', id);
        const back = row === undefined ? null : deliveryRules.giveBack(kept<DeliveryRecord>(row), owner);
        if (back !== null) changes.push(putDelivery(back));
      }
      if (changes.length > 0) await commit(changes);
    },
    async redeliver(accountId, id, nextAttemptAt) {
      const row = state.owned('delivery', accountId, id);
      if (row === undefined) return null;
      const current = kept<DeliveryRecord>(row);
      const keyTaken =
        current.orderingKey !== null && state.keyTurnOf(current.webhookId, current.orderingKey, current.id);
      const again = deliveryRules.redeliver(current, nextAttemptAt, keyTaken);
      // Due now by hand, it is paced again if its webhook has a limit.
      pacing.forget(id);
      await commit([putDelivery(again)]);
      return copyDelivery(again);
    },

    async getWebhookHealth(accountId, webhookId) {
      const row = state.owned('webhook', accountId, webhookId);
      return row === undefined ? null : { ...healthOf(kept<WebhookRecord>(row)) };
    },
    async setInFlightLimit(webhookId, limit) {
      const row = state.get('webhook', webhookId);
      if (row === undefined) return;
      const webhook = kept<WebhookRecord>(row);
      await changeHealth(webhook.accountId, webhookId, (current) =>
        (current.inFlightLimit ?? null) === limit ? null : { ...current, inFlightLimit: limit },
      );
    },
    disableWebhook: (accountId, webhookId, at) =>
      changeHealth(accountId, webhookId, (current) => healthRules.disableHealth(current, at)),
    enableWebhook: (accountId, webhookId) => changeHealth(accountId, webhookId, healthRules.enableHealth),
    async recoverDeliveries(accountId, webhookId, since, now) {
      const row = state.owned('webhook', accountId, webhookId);
      if (row === undefined) return null;
      if (healthOf(kept<WebhookRecord>(row)).disabledAt !== null) throw new PortalError('WEBHOOK_DISABLED', webhookId);
      const candidates = [...deliveryRules.undeliveredEvents(deliveriesOf(webhookId))].filter(
        ([, latest]) => latest >= since,
      );
      // Events may live in the journal, not in memory: read only those a delivery dates at or after `since`.
      const events = await Promise.all(
        candidates.map(([eventId]) => readRecord<EventRecord>(state.get('event', eventId)!)),
      );
      const { type } = kept<WebhookRecord>(row);
      const missed = oldestFirst(events.filter((event) => event.createdAt >= since && event.type === type));
      // Checked again after reading: a delete, a disable or another recovery may have run meanwhile.
      const current = state.owned('webhook', accountId, webhookId);
      if (current === undefined) return null;
      if (healthOf(kept<WebhookRecord>(current)).disabledAt !== null)
        throw new PortalError('WEBHOOK_DISABLED', webhookId);
      const stillMissed = deliveryRules.undeliveredEvents(deliveriesOf(webhookId));
      const made = deliveryRules.inKeyOrder(
        missed
          .filter((event) => stillMissed.has(event.id))
          .map((event) => deliveryRules.recoveredDelivery(event, webhookId, now)),
        state.keyTaken,
      );
      await commit(made.map(putDelivery));
      return made.map(copyDelivery);
    },

    async removeExpired(before, limit) {
      const changes: Change[] = [];
      // Deliveries first: their events may then go in the same pass.
      if (before.deliveries !== null) {
        for (const id of state.finishedBefore(before.deliveries)) {
          if (changes.length === limit) break;
          changes.push({ table: 'delivery', id });
        }
      }
      const deliveries = changes.length;
      await commit(changes);
      const events: Change[] = [];
      if (before.events !== null) {
        for (const id of state.unneededEventsBefore(before.events)) {
          if (events.length === limit) break;
          events.push({ table: 'event', id });
        }
      }
      await commit(events);
      return { deliveries, events: events.length };
    },

    async deleteAgreement(accountId, id) {
      // In the agreement's turn: an update reading it meanwhile cannot put it back afterwards.
      const outcome = await agreementTurns(id, async () => {
        if (state.owned('agreement', accountId, id) === undefined) return null;
        const written = commit([{ table: 'agreement', id }]);
        agreementsDue.remove(id);
        return { written };
      });
      if (outcome === null) return false;
      await outcome.written;
      return true;
    },

    async findSignedCopy(accountId, signedFileHash) {
      return state.signedCopy(accountId, signedFileHash);
    },

    async isBlobReferenced(key) {
      // A certificate is kept under `agc_` and its agreement id's own part (domain/certificates.ts).
      if (key.startsWith('agc_')) return state.has('agreement', `agr_${key.slice(4)}`);
      return state.has('file', key) || state.has('attachment', key) || state.isDocument(key);
    },

    async claimIdempotencyKey(claim) {
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
      claims.set(id, {
        accountId,
        key,
        status: 'pending',
        token,
        fingerprint,
        answer: null,
        createdAt: now,
        expiresAt: leaseUntil,
      });
      return null;
    },
    async releaseIdempotencyKey(accountId, key, token) {
      const id = idempotencyId(accountId, key);
      if (claims.get(id)?.token !== token) return false;
      claims.delete(id);
      return true;
    },
    async insertPortalSession(session, limits) {
      assertNew('session', session.id);
      // Counted and committed with no await between, as a webhook's insert: two creates cannot both pass the count.
      const max = limits?.maxLive;
      if (max !== undefined && liveSessions(session.accountId, session.createdAt, max) >= max) return false;
      await commit([{ table: 'session', record: session }]);
      return true;
    },
    async getPortalSession(id) {
      const row = state.get('session', id);
      return row === undefined ? null : { ...kept<PortalSessionRecord>(row) };
    },
    async revokePortalSession(accountId, id, at) {
      const row = state.owned('session', accountId, id);
      if (row === undefined) return null;
      const session = kept<PortalSessionRecord>(row);
      if (session.revokedAt !== null) return false;
      const revoked: PortalSessionRecord = { ...session, revokedAt: at };
      await commit([{ table: 'session', record: revoked }]);
      return true;
    },
    async sweepPortalSessions(now, limit) {
      const changes: Change[] = [];
      // Collected first, committed after: the rows are not changed while walked.
      for (const row of state.rows('session')) {
        if (changes.length >= limit) break;
        if (kept<PortalSessionRecord>(row).expiresAt <= now) changes.push({ table: 'session', id: row.id });
      }
      await commit(changes);
      return changes.length;
    },
    async sweepIdempotencyKeys(now, limit) {
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
  });

  return {
    storage,
    replay(table, change) {
      if ('id' in change) {
        if (table === 'agreement') agreementsDue.remove(change.id);
        return state.remove(table, change.id);
      }
      const record = upgraded(
        table,
        JSON.parse(change.json) as StoredRecord,
        (eventId) => state.get('event', eventId)?.eventType,
      );
      state.put(table, record, change.json, change.loc);
      if (table === 'agreement') agreementsDue.update(withSigningDefaults(record as AgreementRecord));
    },
    snapshot: () => state.snapshot(),
    liveBytes: () => state.liveBytes(),
    peek: (table, id) => state.get(table, id)?.value,
  };
}
