import { compareDue } from '../../src/domain/deliveries.js';
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
export class DueQueue {
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
