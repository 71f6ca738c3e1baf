import type { AgreementRecord } from '../../src/records.js';

/**
 * The open agreements that have a time to act at (their `expiresAt`, or their next reminder), for
 * stores that keep no index of their own: `dueBy` reads those whose time has come without walking
 * every agreement ever made. Kept in step with each insert and update (and the fs log's replay).
 */
export class AgreementDue {
  private readonly due = new Map<string, { accountId: string; at: string }>();

  /** Keeps the entry of `agreement` as it now is: an open one with a time, or none. */
  update(agreement: AgreementRecord): void {
    const open = agreement.status === 'sent' && agreement.closedAt === null;
    const times = [agreement.expiresAt, agreement.nextReminderAt].filter((at): at is string => at !== null);
    if (!open || times.length === 0) {
      this.due.delete(agreement.id);
      return;
    }
    // ATOM strings in UTC compare as the instants they name.
    this.due.set(agreement.id, { accountId: agreement.accountId, at: times.sort()[0]! });
  }

  /** Up to `limit` agreements whose time is at or before `now`, the earliest first. */
  dueBy(now: string, limit: number): { accountId: string; id: string }[] {
    const found: { accountId: string; id: string; at: string }[] = [];
    for (const [id, entry] of this.due) if (entry.at <= now) found.push({ id, ...entry });
    return found.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0)).slice(0, limit).map(({ accountId, id }) => ({ accountId, id }));
  }
}
