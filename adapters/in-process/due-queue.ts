import { compareDue } from '../../src/rules/deliveries.js';
import type { DeliveryRecord } from '../../src/records.js';

interface QueueEntry {
  /** The delivery as stored now: a change that keeps its due time replaces it here, in place. */
  row: DeliveryRecord;
  /** The row's `nextAttemptAt` when queued: the order is kept on this. */
  due: string;
  /** Set when the row left the queue; the entry is skipped, and swept out in bulk later. */
  removed: boolean;
}

/** Claim order. A queued row's `nextAttemptAt` is its entry's `due`, removed entries included. */
const compareEntries = (a: QueueEntry, b: QueueEntry) => compareDue(a.row, b.row);

/**
 * Pending deliveries in due order, so a claim reads from the front and stops at the first not yet
 * due, instead of walking every delivery ever made. Removal only marks the entry (a splice per
 * recorded attempt would move the whole array); marked entries are swept when they are many.
 */
class DueQueue {
  private entries: QueueEntry[] = [];
  /** Entries before this index are all removed. */
  private head = 0;
  private readonly entryOf = new Map<string, QueueEntry>();
  private removedCount = 0;

  /** How many deliveries are queued. */
  get size(): number {
    return this.entryOf.size;
  }

  /** The due time of the first queued delivery; `null` when none is queued. */
  get firstDue(): string | null {
    return this.head < this.entries.length ? this.entries[this.head]!.due : null;
  }

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

  /** Takes the delivery out of the queue, whatever its state. */
  delete(id: string): void {
    const entry = this.entryOf.get(id);
    if (entry !== undefined) this.remove(entry);
  }

  private insert(row: DeliveryRecord, due: string): void {
    const entry = { row, due, removed: false };
    let low = this.head;
    let high = this.entries.length;
    // Almost always the last: a new delivery is due at its event's time, a retry later still.
    if (high > low && compareEntries(this.entries[high - 1]!, entry) < 0) low = high;
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

interface AccountSlot {
  accountId: string;
  queue: DueQueue;
  /** The queue's `firstDue` as the heap orders it. */
  due: string;
  /** Where the slot sits in the heap; -1 while its queue is empty. */
  at: number;
}

const earlier = (a: AccountSlot, b: AccountSlot) => a.due < b.due || (a.due === b.due && a.accountId < b.accountId);

/** A walk through one account's due deliveries, for the merge of a claim. */
interface Cursor {
  accountId: string;
  rows: Generator<DeliveryRecord>;
  head: DeliveryRecord;
}

/**
 * The pending deliveries of each account in its own due queue, and the accounts in a heap by their
 * first due delivery, so that a claim reads only the accounts with something due and leaves an
 * account at its share after one look: another account's backlog, however long, costs a claim
 * nothing (the bench row "claims beside another account's backlog" of `npm run bench`).
 */
export class DueByAccount {
  private readonly slots = new Map<string, AccountSlot>();
  private readonly heap: AccountSlot[] = [];

  /** Keeps the delivery's account queue, and that account's place, in step with `row`. */
  update(row: DeliveryRecord): void {
    const slot = this.slotOf(row.accountId);
    slot.queue.update(row);
    this.place(slot);
  }

  /** Takes the delivery out of its account's queue. */
  delete(accountId: string, id: string): void {
    const slot = this.slots.get(accountId);
    if (slot === undefined) return;
    slot.queue.delete(id);
    this.place(slot);
  }

  /**
   * The rows due at `now` across accounts, earliest first (`compareDue`). Calling the returned
   * `skip` with an account id drops that account's rows from the rest of the walk.
   */
  dueBy(now: string): { rows: Iterable<DeliveryRecord>; skip(accountId: string): void } {
    const skipped = new Set<string>();
    const heap = this.heap;
    // The accounts whose first row is due: the heap's nodes at or before `now`, found top down.
    const cursors: Cursor[] = [];
    const stack = heap.length > 0 ? [0] : [];
    while (stack.length > 0) {
      const index = stack.pop()!;
      const slot = heap[index]!;
      if (slot.due > now) continue;
      const rows = slot.queue.dueBy(now);
      const first = rows.next();
      if (!first.done) cursors.push({ accountId: slot.accountId, rows, head: first.value });
      for (const child of [2 * index + 1, 2 * index + 2]) if (child < heap.length) stack.push(child);
    }
    function* merged(): Generator<DeliveryRecord> {
      // Few accounts are due at once: a sorted list of their heads serves as the merge's heap.
      cursors.sort((a, b) => compareDue(a.head, b.head));
      while (cursors.length > 0) {
        const cursor = cursors.shift()!;
        if (skipped.has(cursor.accountId)) continue;
        yield cursor.head;
        const next = cursor.rows.next();
        if (next.done || skipped.has(cursor.accountId)) continue;
        cursor.head = next.value;
        let at = 0;
        while (at < cursors.length && compareDue(cursors[at]!.head, cursor.head) < 0) at++;
        cursors.splice(at, 0, cursor);
      }
    }
    return { rows: merged(), skip: (accountId) => skipped.add(accountId) };
  }

  private slotOf(accountId: string): AccountSlot {
    let slot = this.slots.get(accountId);
    if (slot === undefined) this.slots.set(accountId, (slot = { accountId, queue: new DueQueue(), due: '', at: -1 }));
    return slot;
  }

  /** Moves the slot to where its queue's first due time puts it in the heap, or out of it. */
  private place(slot: AccountSlot): void {
    const due = slot.queue.firstDue;
    if (due === null) {
      if (slot.at !== -1) this.removeAt(slot.at);
      if (slot.queue.size === 0) this.slots.delete(slot.accountId);
      return;
    }
    if (slot.at === -1) {
      slot.due = due;
      slot.at = this.heap.push(slot) - 1;
      this.up(slot.at);
      return;
    }
    if (slot.due === due) return;
    slot.due = due;
    this.up(slot.at);
    this.down(slot.at);
  }

  private removeAt(index: number): void {
    const removed = this.heap[index]!;
    const last = this.heap.pop()!;
    removed.at = -1;
    if (last === removed) return;
    this.heap[index] = last;
    last.at = index;
    this.up(index);
    this.down(last.at);
  }

  private up(index: number): void {
    const heap = this.heap;
    while (index > 0) {
      const parent = (index - 1) >>> 1;
      if (!earlier(heap[index]!, heap[parent]!)) break;
      this.swap(index, parent);
      index = parent;
    }
  }

  private down(index: number): void {
    const heap = this.heap;
    for (;;) {
      let least = index;
      for (const child of [2 * index + 1, 2 * index + 2])
        if (child < heap.length && earlier(heap[child]!, heap[least]!)) least = child;
      if (least === index) return;
      this.swap(index, least);
      index = least;
    }
  }

  private swap(a: number, b: number): void {
    const heap = this.heap;
    [heap[a], heap[b]] = [heap[b]!, heap[a]!];
    heap[a]!.at = a;
    heap[b]!.at = b;
  }
}
