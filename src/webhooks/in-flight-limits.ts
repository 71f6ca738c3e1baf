import { type InFlightLimit, type Load, afterCall, freshLimit, pauseAfter, slowStart } from '../rules/in-flight.js';

/**
 * This worker's calls in flight of each webhook, and each one's adaptive limit
 * (`rules/in-flight.ts`). A webhook at its account's share with none in flight is forgotten: what
 * the map holds is bounded by the webhooks with calls in flight or a limit below the share.
 */
export class InFlightLimits {
  /**
   * Each webhook's limit and calls in flight; `peak`: its limit when the current run of overloaded
   * answers began (`null`: the last answer was no overload).
   */
  private readonly webhooks = new Map<
    string,
    { limit: InFlightLimit; inFlight: number; peak: number | null; pauses: number }
  >();

  /** `ceiling`: the most calls of one account this worker has in flight (its per-account share). */
  constructor(private readonly ceiling: number) {}

  /**
   * Webhooks kept with no call in flight (limited below the share, or disabled) at most: past it,
   * those are forgotten and start again at the share, so that webhooks made and deleted one after
   * another cannot grow the map.
   */
  private static readonly MAX_IDLE = 10_000;

  /** Whether a call of the webhook may start now: fewer in flight than its limit. */
  hasRoom(webhookId: string): boolean {
    const entry = this.webhooks.get(webhookId);
    return entry === undefined || entry.inFlight < entry.limit.limit;
  }

  /**
   * The webhooks limited below their account's share with as many calls in flight as that: a claim
   * leases none of theirs (at the share, the account's own limit keeps the claim from them).
   */
  full(): string[] {
    const full: string[] = [];
    for (const [id, entry] of this.webhooks)
      if (entry.limit.limit < this.ceiling && entry.inFlight >= entry.limit.limit) full.push(id);
    return full;
  }

  started(webhookId: string): void {
    let entry = this.webhooks.get(webhookId);
    if (entry === undefined) {
      if (this.webhooks.size >= InFlightLimits.MAX_IDLE)
        for (const [id, kept] of this.webhooks) if (kept.inFlight === 0) this.webhooks.delete(id);
      entry = { limit: freshLimit(this.ceiling), inFlight: 0, peak: null, pauses: 0 };
      this.webhooks.set(webhookId, entry);
    }
    entry.inFlight++;
  }

  /**
   * A call of the webhook started at `startedAt` answered at `now`, its load as said: the limit it
   * leaves, and whether that changed. A success after overloaded answers took the limit down to one
   * (its receiver was down, and is back) starts slowly again, up to half the limit before the run.
   * An overload at one call asks for a pause before the next try (`pauseMs`, `pauseAfter`).
   */
  ended(
    webhookId: string,
    load: Load,
    startedAt: number,
    now: number,
  ): { limit: number; changed: boolean; pauseMs: number | null } {
    const entry = this.webhooks.get(webhookId)!;
    entry.inFlight--;
    const before = entry.limit.limit;
    let pauseMs: number | null = null;
    if (load === 'overloaded') {
      entry.peak ??= before;
      // At one call, started after the last fall: the receiver is down, not merely busy.
      if (before === 1 && startedAt >= entry.limit.fellAt) pauseMs = pauseAfter(entry.pauses++);
    }
    if (load === 'ok' && entry.peak !== null && before === 1) entry.limit = slowStart(Math.floor(entry.peak / 2));
    else entry.limit = afterCall(entry.limit, load, startedAt, now, this.ceiling);
    if (load === 'ok') {
      entry.peak = null;
      entry.pauses = 0;
    }
    const { limit } = entry.limit;
    if (entry.inFlight === 0 && limit >= this.ceiling && entry.peak === null) this.webhooks.delete(webhookId);
    return { limit, changed: limit !== before, pauseMs };
  }

  /** The webhook was disabled: once enabled again, its calls start slowly, up to its account's share. */
  disabled(webhookId: string): void {
    const entry = this.webhooks.get(webhookId);
    const inFlight = entry?.inFlight ?? 0;
    this.webhooks.set(webhookId, { limit: slowStart(this.ceiling), inFlight, peak: null, pauses: 0 });
  }

  /** The webhook's limit (its account's share when nothing limits it). */
  limitOf(webhookId: string): number {
    return this.webhooks.get(webhookId)?.limit.limit ?? this.ceiling;
  }
}
