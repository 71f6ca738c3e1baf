import { deliveryIdOf, newId } from '../shared/ids.js';
import type { AttemptRecorded, Claim, DeliveryTarget } from '../ports.js';
import type { DeliveryAttempt, DeliveryRecord, EventRecord, WebhookRecord } from '../records.js';
import { compareKeys } from '../shared/order.js';
import { matchesFilter } from './event-filter.js';
import { atom } from '../shared/time.js';

/*
 * The webhook delivery state machine, written once for every storage adapter:
 *
 *   newDelivery ─▶ pending ──lease──▶ pending, leased ──recordAttempt──▶ pending (a retry) | succeeded | failed
 *                     └──────────────────┴──cancel──▶ cancelled             any status ──redeliver──▶ pending
 *                                                                            (leased: queued, pending again once recorded)
 *
 * Pure functions over `DeliveryRecord`: no I/O, and an argument is never changed. Each returns a new
 * record (nested values it does not change may be shared with its argument) or a decision. The
 * memory and fs adapters call them; the SQL adapter's statements (`adapters/sql/outbox/`)
 * implement the same rules, and the conformance suite holds all three to them.
 */

/**
 * Whether `webhook` (of the event's account) gets a delivery of `event`: the webhooks of its type
 * whose filter, if any, the event's data matches, or with `target` that one webhook alone, whatever
 * its type and filter.
 */
export function isRecipient(
  webhook: Pick<WebhookRecord, 'id' | 'type' | 'filter'>,
  event: EventRecord,
  target?: DeliveryTarget,
): boolean {
  if (target !== undefined) return webhook.id === target.webhookId;
  return webhook.type === event.type && (webhook.filter === undefined || matchesFilter(webhook.filter, event.data));
}

/**
 * The attempts a delivery keeps: the last ones, older dropped, so that a delivery redelivered again
 * and again stays one small record; `attemptCount` keeps the total.
 */
export const MAX_ATTEMPTS_KEPT = 50;

/**
 * A new delivery of `event` to the webhook `webhookId`: pending, due when the event happened, no
 * attempts, no lease, its event's ordering key. (`inKeyOrder` makes one wait behind its key.) Its
 * id is the pair's (`deliveryIdOf`): a store can make it again, the same, from the event.
 */
export function newDelivery(
  event: Pick<EventRecord, 'id' | 'accountId' | 'type' | 'createdAt' | 'orderingKey'>,
  webhookId: string,
): DeliveryRecord {
  return {
    id: deliveryIdOf(event.id, webhookId),
    accountId: event.accountId,
    webhookId,
    eventId: event.id,
    eventType: event.type,
    status: 'pending',
    attempts: [],
    attemptCount: 0,
    nextAttemptAt: event.createdAt,
    createdAt: event.createdAt,
    leaseOwner: null,
    leaseUntil: null,
    orderingKey: event.orderingKey ?? null,
    redeliverQueued: false,
  };
}

/**
 * A delivery of `event` to the webhook `webhookId` made by a recovery at `now`: a new delivery due at
 * once and dated `now`, so the log lists it with what happened then. Keyed, it takes its place
 * behind what its key holds pending (`inKeyOrder`), not the place its event had.
 */
export function recoveredDelivery(
  event: Pick<EventRecord, 'id' | 'accountId' | 'type' | 'orderingKey'>,
  webhookId: string,
  now: string,
): DeliveryRecord {
  // A delivery of its own, beside the one the publish made of the same event and webhook.
  return {
    ...newDelivery(
      { id: event.id, accountId: event.accountId, type: event.type, createdAt: now, orderingKey: event.orderingKey },
      webhookId,
    ),
    id: newId('whd'),
  };
}

/*
 * Ordering keys. Of one webhook's pending deliveries that share an ordering key, one at most is its
 * key's turn: due, retrying or in flight. Every other one is held: pending with no `nextAttemptAt`,
 * so no claim sees it. When the turn ends (the delivery succeeds, fails for good or is cancelled),
 * the earliest held one of the key, in creation order, is released: due at once. A store applies
 * these rules under one lock per key (one process's memory, or a transaction-scoped advisory lock on
 * PostgreSQL), so that deciding whether a key is taken and acting on it are one step.
 */

/** Whether the delivery is held behind an earlier one of its key. */
export function isHeld(delivery: Pick<DeliveryRecord, 'status' | 'nextAttemptAt' | 'orderingKey'>): boolean {
  return delivery.status === 'pending' && delivery.nextAttemptAt === null && delivery.orderingKey !== null;
}

/** A key's name in a store's maps: the webhook and the ordering key. */
export const keyOf = (webhookId: string, orderingKey: string) => `${webhookId}\u0000${orderingKey}`;

/**
 * New deliveries in key order: of those of one webhook and key, in the order given, the first is
 * due unless `taken` says the key already holds a pending delivery, and each later one is held.
 * Deliveries without a key are returned as they are.
 */
export function inKeyOrder(
  made: DeliveryRecord[],
  taken: (webhookId: string, orderingKey: string) => boolean,
): DeliveryRecord[] {
  const seen = new Set<string>();
  return made.map((delivery) => {
    if (delivery.orderingKey === null) return delivery;
    const key = keyOf(delivery.webhookId, delivery.orderingKey);
    const waits = seen.has(key) || taken(delivery.webhookId, delivery.orderingKey);
    seen.add(key);
    return waits ? { ...delivery, nextAttemptAt: null } : delivery;
  });
}

/** Whether recording `recorded` ended its key's turn: keyed, and pending no more. */
export function endsTurn(recorded: Pick<DeliveryRecord, 'status' | 'orderingKey'>): boolean {
  return recorded.orderingKey !== null && recorded.status !== 'pending';
}

/**
 * The delivery given back by `owner` unattempted (claimed ahead, never called): its lease dropped,
 * due as it was, so that the next claim takes it; `null` when `owner` holds no lease on it or it is
 * pending no more. A redeliver queued meanwhile asked for one more call, and this is it.
 */
export function giveBack(delivery: DeliveryRecord, owner: string): DeliveryRecord | null {
  if (delivery.status !== 'pending' || delivery.leaseOwner !== owner) return null;
  return { ...delivery, leaseOwner: null, leaseUntil: null, redeliverQueued: false };
}

/** The held delivery `delivery`, its key's turn now: due at `at`. */
export function release(delivery: DeliveryRecord, at: string): DeliveryRecord {
  return { ...delivery, nextAttemptAt: at };
}

/**
 * The events that one webhook's `deliveries` never delivered: those with no delivery succeeded
 * and none pending (every one failed or cancelled), each with its latest delivery's `createdAt`,
 * in the order first met. A delivery is made no earlier than its event, so an event created at or
 * after some time has a delivery at or after it: a caller filters on that before reading events.
 */
export function undeliveredEvents(deliveries: Iterable<DeliveryRecord>): Map<string, string> {
  const latest = new Map<string, string>();
  const delivered = new Set<string>();
  for (const delivery of deliveries) {
    if (delivery.status === 'succeeded' || delivery.status === 'pending') delivered.add(delivery.eventId);
    const seen = latest.get(delivery.eventId);
    if (seen === undefined || seen < delivery.createdAt) latest.set(delivery.eventId, delivery.createdAt);
  }
  for (const eventId of delivered) latest.delete(eventId);
  return latest;
}

/** Whether the delivery is due at `now`: pending, with its next attempt at or before `now`. */
export function isDue(delivery: DeliveryRecord, now: string): boolean {
  return delivery.status === 'pending' && delivery.nextAttemptAt !== null && delivery.nextAttemptAt <= now;
}

/** Whether a lease holds the delivery at `now`: one that lasts until `now` or later. */
export function isLeased(delivery: DeliveryRecord, now: string): boolean {
  return delivery.leaseUntil !== null && delivery.leaseUntil >= now;
}

/** Whether a claim at `now` may take the delivery: due, and no lease holds it. */
export function isClaimable(delivery: DeliveryRecord, now: string): boolean {
  return isDue(delivery, now) && !isLeased(delivery, now);
}

/** Claim order: earliest `nextAttemptAt` first (none: last), then by id, so equal times still claim in one stable order. */
export function compareDue(a: DeliveryRecord, b: DeliveryRecord): number {
  if (a.nextAttemptAt !== b.nextAttemptAt) {
    if (a.nextAttemptAt === null) return 1;
    if (b.nextAttemptAt === null) return -1;
    return compareKeys(a.nextAttemptAt, b.nextAttemptAt);
  }
  return compareKeys(a.id, b.id);
}

/**
 * The delivery leased to `owner` until `leaseUntil`. A redeliver queued behind a call whose lease
 * ran out unrecorded (its worker gone) is served by this call.
 */
export function lease(delivery: DeliveryRecord, owner: string, leaseUntil: string): DeliveryRecord {
  return { ...delivery, leaseOwner: owner, leaseUntil, redeliverQueued: false };
}

/**
 * When a delivery whose redeliver was queued during `attempt` falls due again: as the attempt
 * ended (its start and duration), so that the next claim takes it.
 */
export function dueAfter(attempt: Pick<DeliveryAttempt, 'at' | 'durationMs'>): string {
  return atom(new Date(Date.parse(attempt.at) + attempt.durationMs));
}

/**
 * Whether `recorded` (what `recordAttempt` made of a delivery after `attempt`) is due at once: a
 * redeliver queued during the call. A worker then claims again instead of waiting for its tick.
 */
export function isDueAfter(
  recorded: Pick<DeliveryRecord, 'status' | 'nextAttemptAt'>,
  attempt: Pick<DeliveryAttempt, 'at' | 'durationMs'>,
): boolean {
  return (
    recorded.status === 'pending' && recorded.nextAttemptAt !== null && recorded.nextAttemptAt <= dueAfter(attempt)
  );
}

/** What `Storage.recordAttempt` resolves when it changed nothing: the lease was lost, or the delivery is no longer pending. */
export const NOT_RECORDED: Readonly<AttemptRecorded> = Object.freeze({
  recorded: false,
  disabled: null,
  dueAgain: false,
});

/**
 * The delivery after `owner`'s attempt: the attempt appended (the oldest dropped past
 * `MAX_ATTEMPTS_KEPT`, `attemptCount` one more), the outcome's status and next attempt set, the
 * lease released; `null` when `owner` does not hold the lease or the delivery is not pending. With
 * a redeliver queued during the call, the outcome gives way: pending, due as the call ended
 * (`dueAfter`).
 */
export function recordAttempt(
  delivery: DeliveryRecord,
  owner: string,
  attempt: DeliveryAttempt,
  outcome: Pick<DeliveryRecord, 'status' | 'nextAttemptAt'>,
): DeliveryRecord | null {
  if (delivery.status !== 'pending' || delivery.leaseOwner !== owner) return null;
  return {
    ...delivery,
    attempts: [...delivery.attempts, { ...attempt }].slice(-MAX_ATTEMPTS_KEPT),
    attemptCount: delivery.attemptCount + 1,
    ...(delivery.redeliverQueued ? { status: 'pending', nextAttemptAt: dueAfter(attempt) } : outcome),
    leaseOwner: null,
    leaseUntil: null,
    redeliverQueued: false,
  };
}

/**
 * The delivery, whatever its status, pending again and due at `nextAttemptAt` (the time of asking),
 * lease dropped, attempts kept. While a lease holds it at that time its call may be in flight, and
 * one call at a time per delivery is the rule: the redeliver is queued instead (`redeliverQueued`),
 * and `recordAttempt` makes it due once that call is recorded. When another delivery holds its key's
 * turn (`keyTaken`), it is held instead, and goes when its place in the key comes.
 */
export function redeliver(delivery: DeliveryRecord, nextAttemptAt: string, keyTaken = false): DeliveryRecord {
  if (isLeased(delivery, nextAttemptAt)) return { ...delivery, redeliverQueued: true };
  return {
    ...delivery,
    status: 'pending',
    nextAttemptAt: keyTaken ? null : nextAttemptAt,
    leaseOwner: null,
    leaseUntil: null,
    redeliverQueued: false,
  };
}

/** The delivery cancelled: never attempted again, lease dropped; `null` when it is not pending (a finished one keeps its outcome). */
export function cancel(delivery: DeliveryRecord): DeliveryRecord | null {
  if (delivery.status !== 'pending') return null;
  return {
    ...delivery,
    status: 'cancelled',
    nextAttemptAt: null,
    leaseOwner: null,
    leaseUntil: null,
    redeliverQueued: false,
  };
}

export interface ClaimPlan {
  /** Leased to the claim's owner, in claim order: what the claim returns. */
  leased: DeliveryRecord[];
  /**
   * Due, but their webhook is gone (nowhere to send them) or disabled (it gets no calls): they end
   * here instead of being leased, and a recovery can queue their events again.
   */
  cancelled: DeliveryRecord[];
  /**
   * Due, but not to be sent now: their webhook is held (`heldUntil`), due again when the hold ends;
   * or their webhook's rate limit gave them a later second (`slotOf`), due then.
   */
  deferred: DeliveryRecord[];
}

/** What a claim asks of the store beyond its candidates, each a question about one delivery. */
export interface ClaimQuestions {
  /** Whether its webhook exists and is enabled; otherwise the claim cancels it. */
  deliverable(delivery: DeliveryRecord): boolean;
  /** Hears of each account met at its share: none of its candidates will be leased, so a store may stop offering them. */
  accountFull?(accountId: string): void;
  /** Until when its webhook is held (`heldAt` in `rules/webhook-health.ts`); `null`: not held. */
  heldUntil?(delivery: DeliveryRecord): string | null;
  /**
   * The later second its webhook's rate limit gives it (`paceSlots` in `rules/rate-limit.ts`);
   * `null` when it may go now: no limit, or its slot has come. Asked only of a delivery the claim
   * would otherwise lease.
   */
  slotOf?(delivery: DeliveryRecord): string | null;
}

/** The delivery due again at `at`: the end of its webhook's hold (`holdOf` in `rules/retry-schedule.ts`), or its slot. */
const defer = (delivery: DeliveryRecord, at: string): DeliveryRecord => ({
  ...delivery,
  nextAttemptAt: at,
});

/**
 * What a claim does, walking `candidates` in claim order (`compareDue`): each claimable one is
 * leased to `owner` until `leaseUntil`, or cancelled when its webhook is gone or disabled, or
 * deferred to the end of its webhook's hold, or skipped when its account holds its share
 * (`perAccount`) already, so that one account's backlog or hanging receivers never keep another's
 * deliveries waiting beyond this claim, or skipped when its webhook has as many calls in flight
 * for the owner as it takes (`fullWebhooks`), or deferred to the later second its webhook's rate
 * limit gives it. The walk ends once `limit` are leased, so a cancelled, deferred or skipped one does not
 * use up the limit.
 */
export function planClaim(candidates: Iterable<DeliveryRecord>, claim: Claim, questions: ClaimQuestions): ClaimPlan {
  const { deliverable, accountFull, heldUntil, slotOf } = questions;
  const plan: ClaimPlan = { leased: [], cancelled: [], deferred: [] };
  if (claim.limit <= 0) return plan;
  const held = new Map<string, number>();
  const full = new Set(claim.fullWebhooks);
  for (const delivery of candidates) {
    if (!isClaimable(delivery, claim.now)) continue;
    if (!deliverable(delivery)) {
      plan.cancelled.push(cancel(delivery)!);
      continue;
    }
    const until = heldUntil?.(delivery) ?? null;
    if (until !== null) {
      plan.deferred.push(defer(delivery, until));
      continue;
    }
    // Its webhook has as many calls in flight for this owner as it takes: it waits, due, for a later claim.
    if (full.has(delivery.webhookId)) continue;
    let holding = 0;
    if (claim.perAccount !== undefined) {
      const { inFlight } = claim.perAccount;
      // Own keys only: an account id such as "constructor" must not read the object's prototype.
      holding =
        held.get(delivery.accountId) ??
        (Object.hasOwn(inFlight, delivery.accountId) ? inFlight[delivery.accountId]! : 0);
      if (holding >= claim.perAccount.max) {
        accountFull?.(delivery.accountId);
        continue;
      }
    }
    const slot = slotOf?.(delivery) ?? null;
    if (slot !== null) {
      plan.deferred.push(defer(delivery, slot));
      continue;
    }
    if (claim.perAccount !== undefined) held.set(delivery.accountId, holding + 1);
    plan.leased.push(lease(delivery, claim.owner, claim.leaseUntil));
    if (plan.leased.length >= claim.limit) break;
  }
  return plan;
}
