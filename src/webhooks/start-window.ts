/**
 * The span a webhook's `rateLimit` is counted over: a second, and a margin for the calls' transit
 * (a call started just inside one second may reach its receiver in the next). With a second alone,
 * a receiver counting the calls in each second of its clock saw 1,008 at a limit of 1,000.
 */
const WINDOW_MS = 1050;
/**
 * Calls also start evenly, `1000 / rateLimit` ms apart, with at most this many milliseconds' worth
 * at once: the slots of a second all fall due as it begins, and started together they met a
 * receiver's token bucket of a tenth of a second with 429s (bench row "throttling").
 */
const BURST_MS = 10;

/**
 * The calls this worker started in the last window, of each webhook with a rate limit: a call of a
 * webhook limited to `rateLimit` starts only while fewer than that many started in the window before
 * (`rules/rate-limit.ts`). The store's slots keep instances together to the limit; this keeps one
 * worker to it when a claim took the slots of two seconds at once (a late tick).
 */
export class StartWindow {
  /** Start times (ms, ascending) within the last window, by webhook; a webhook with none is dropped. */
  private readonly starts = new Map<string, number[]>();
  /** When each webhook's next call is due to start, evenly spaced (a virtual scheduling time). */
  private readonly due = new Map<string, number>();
  /**
   * The next look at every webhook's starts, by how many are kept: one whose calls stopped (deleted,
   * or no longer limited) is dropped then, so what is kept is what started in the last window.
   */
  private sweepAt = 64;

  /** Milliseconds from `now` until a call of the webhook may start; 0: now. */
  wait(webhookId: string, rateLimit: number, now: number): number {
    const times = this.recent(webhookId, now);
    const full = times.length < rateLimit ? 0 : times[times.length - rateLimit]! + WINDOW_MS - now;
    const early = (this.due.get(webhookId) ?? now) - BURST_MS - now;
    return Math.max(0, full, early);
  }

  /** A call of the webhook limited to `rateLimit` started at `now`. */
  started(webhookId: string, rateLimit: number, now: number): void {
    if (this.starts.size >= this.sweepAt) {
      for (const id of [...this.starts.keys()]) this.recent(id, now);
      this.sweepAt = Math.max(64, 2 * this.starts.size);
    }
    const times = this.recent(webhookId, now);
    if (times.length === 0) this.starts.set(webhookId, times);
    times.push(now);
    this.due.set(webhookId, Math.max(this.due.get(webhookId) ?? now, now) + 1000 / rateLimit);
  }

  /** The webhook's starts in the window up to `now`, those older dropped. */
  private recent(webhookId: string, now: number): number[] {
    const times = this.starts.get(webhookId);
    if (times === undefined) return [];
    let old = 0;
    while (old < times.length && times[old]! <= now - WINDOW_MS) old++;
    if (old > 0) times.splice(0, old);
    // None in the window: the last started over a window ago, so its next was due by then too.
    if (times.length === 0) {
      this.starts.delete(webhookId);
      this.due.delete(webhookId);
    }
    return times;
  }
}
