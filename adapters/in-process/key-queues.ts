import { isHeld, keyOf } from '../../src/rules/deliveries.js';
import type { DeliveryRecord } from '../../src/records.js';

/** A pending delivery's place in its key: creation time, then the order the store saw it pending in. */
interface Place {
  id: string;
  createdAt: string;
  seen: number;
}

const before = (a: Place, b: Place) => (a.createdAt !== b.createdAt ? a.createdAt < b.createdAt : a.seen < b.seen);

/** One key's pending deliveries: those whose turn it is (one, by the rules), and the held ones in order. */
interface KeyQueue {
  turn: Set<string>;
  /** The held ones in order from `head`; those before it have left (see `leave`). */
  held: Place[];
  head: number;
}

/**
 * The pending deliveries of each ordering key (`rules/deliveries.ts`, "Ordering keys"), kept in
 * step with the delivery rows: whether a key is taken, and which held one comes next. Creation order
 * is the deliveries' `createdAt`, then the order rows were first written in, which a replay and a
 * compaction keep (as the delivery log's order does).
 */
export class KeyQueues {
  private readonly queues = new Map<string, KeyQueue>();
  /** Each pending keyed delivery's place: where it stands, to find it again when it changes or leaves. */
  private readonly places = new Map<string, Place & { key: string }>();
  private seen = 0;

  /** Keeps the queues in step with `delivery`, the row's new state. */
  update(delivery: DeliveryRecord): void {
    if (delivery.orderingKey === null) return;
    const key = keyOf(delivery.webhookId, delivery.orderingKey);
    let place = this.places.get(delivery.id);
    if (place !== undefined) this.leave(place);
    // Only a pending delivery holds a place: a finished one is forgotten (a redeliver gives it a new one).
    if (delivery.status !== 'pending') {
      this.places.delete(delivery.id);
      return;
    }
    if (place === undefined) {
      place = { id: delivery.id, createdAt: delivery.createdAt, seen: ++this.seen, key };
      this.places.set(delivery.id, place);
    }
    let queue = this.queues.get(key);
    if (queue === undefined) this.queues.set(key, (queue = { turn: new Set(), held: [], head: 0 }));
    if (!isHeld(delivery)) {
      queue.turn.add(delivery.id);
      return;
    }
    // Almost always the newest: appended without a search.
    const { held } = queue;
    let at = held.length;
    while (at > queue.head && before(place, held[at - 1]!)) at--;
    held.splice(at, 0, place);
  }

  /** Forgets the delivery (removed from the store). */
  delete(id: string): void {
    const place = this.places.get(id);
    if (place === undefined) return;
    this.leave(place);
    this.places.delete(id);
  }

  /** Whether the key holds a pending delivery: its turn's, or a held one. */
  taken(webhookId: string, orderingKey: string): boolean {
    return this.queues.has(keyOf(webhookId, orderingKey));
  }

  /** Whether a pending delivery other than `id` has the key's turn. */
  turnOf(webhookId: string, orderingKey: string, id: string): boolean {
    const queue = this.queues.get(keyOf(webhookId, orderingKey));
    if (queue === undefined) return false;
    return queue.turn.size > (queue.turn.has(id) ? 1 : 0);
  }

  /** The key's held deliveries, earliest first. */
  held(webhookId: string, orderingKey: string): readonly string[] {
    const queue = this.queues.get(keyOf(webhookId, orderingKey));
    return queue === undefined ? [] : queue.held.slice(queue.head).map((place) => place.id);
  }

  private leave(place: Place & { key: string }): void {
    const queue = this.queues.get(place.key);
    if (queue === undefined) return;
    if (!queue.turn.delete(place.id)) {
      // Held ones leave from the front (released, or cancelled in order): the head moves on, and the
      // array is cut once half of it is gone, so that cancelling a key of 100,000 held costs no
      // square (a splice each: 2.9 s on the event loop).
      const at = queue.held.indexOf(place, queue.head);
      if (at === queue.head) queue.head++;
      else if (at !== -1) queue.held.splice(at, 1);
      if (queue.head > 32 && queue.head * 2 > queue.held.length) {
        queue.held = queue.held.slice(queue.head);
        queue.head = 0;
      }
    }
    if (queue.turn.size === 0 && queue.held.length === queue.head) this.queues.delete(place.key);
  }
}
