import { type AgreementRecord, completionDueAt, isOpen, mailDueAt } from '../../src/records.js';

interface Entry {
  id: string;
  accountId: string;
  /** The earliest of the agreement's `expiresAt`, `nextReminderAt` and next mail (ATOM in UTC: compares as the instant). */
  at: string;
}

/** Entries one `dueBy` looks at, at most. */
const MAX_WALKED = 100_000;

const before = (a: Entry, b: Entry) => a.at < b.at || (a.at === b.at && a.id < b.id);

/**
 * The agreements that have a time to act at (an open one's `expiresAt` or next reminder, any one's
 * next mail to its signers or its completed copies still owed), in
 * the order of that time, for stores that keep no index of their own: `dueBy` reads from the front
 * and stops at the first not yet due, never walking every agreement. Kept in step with each insert
 * and update (and the fs log's replay).
 */
export class AgreementDue {
  private readonly entries: Entry[] = [];
  private readonly entryOf = new Map<string, Entry>();
  /** The open agreements with no reminder scheduled (made while reminders were off), by id: their account. */
  private readonly unscheduled = new Map<string, string>();

  /** Keeps the entry of `agreement` as it now is: an open one with a time, in its place, or none. */
  update(agreement: AgreementRecord): void {
    const open = isOpen(agreement);
    if (open && agreement.nextReminderAt === null) this.unscheduled.set(agreement.id, agreement.accountId);
    else this.unscheduled.delete(agreement.id);
    // An open agreement's expiry and reminder; any agreement's mail to its signers, open or not.
    const times = [
      ...(open ? [agreement.expiresAt, agreement.nextReminderAt] : []),
      mailDueAt(agreement),
      completionDueAt(agreement),
    ]
      .filter((at): at is string => at !== null)
      .sort();
    const current = this.entryOf.get(agreement.id);
    if (current !== undefined) {
      if (current.at === times[0]) return;
      this.entries.splice(this.indexOf(current), 1);
      this.entryOf.delete(agreement.id);
    }
    if (times.length === 0) return;
    const entry = { id: agreement.id, accountId: agreement.accountId, at: times[0]! };
    this.entries.splice(this.indexOf(entry), 0, entry);
    this.entryOf.set(entry.id, entry);
  }

  /** Forgets a removed agreement. */
  remove(id: string): void {
    this.unscheduled.delete(id);
    const current = this.entryOf.get(id);
    if (current === undefined) return;
    this.entries.splice(this.indexOf(current), 1);
    this.entryOf.delete(id);
  }

  /**
   * Up to `limit` agreements whose time is at or before `now`, the earliest first, at most
   * `perAccount` of one account. The walk past a full account's entries is bounded
   * (`MAX_WALKED`): behind a backlog larger than that, another account's agreements wait a tick
   * or two more, never the backlog's length.
   */
  dueBy(now: string, limit: number, perAccount: number, unscheduled: boolean): { accountId: string; id: string }[] {
    const due: { accountId: string; id: string }[] = [];
    const taken = new Map<string, number>();
    const take = (accountId: string, id: string) => {
      const count = taken.get(accountId) ?? 0;
      if (count === perAccount) return;
      taken.set(accountId, count + 1);
      due.push({ accountId, id });
    };
    let walked = 0;
    for (const entry of this.entries) {
      if (entry.at > now || due.length === limit || ++walked > MAX_WALKED) break;
      take(entry.accountId, entry.id);
    }
    if (!unscheduled) return due;
    for (const [id, accountId] of this.unscheduled) {
      if (due.length === limit || ++walked > MAX_WALKED) break;
      if (!due.some((one) => one.id === id)) take(accountId, id);
    }
    return due;
  }

  /** Where `entry` is, or goes, in the order. */
  private indexOf(entry: Entry): number {
    let low = 0;
    let high = this.entries.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (before(this.entries[middle]!, entry)) low = middle + 1;
      else high = middle;
    }
    return low;
  }
}
