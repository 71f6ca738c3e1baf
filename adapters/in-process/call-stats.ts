import {
  CALL_STATS_KEPT_MS,
  type CallStatsHour,
  emptyHour,
  hourOf,
  latencyBin,
  outcomeIndex,
} from '../../src/rules/call-stats.js';
import type { DeliveryRecord } from '../../src/records.js';

const OUTCOMES = ['succeeded', 'failed', 'errors'] as const;

/**
 * Each webhook's calls by the hour (`Storage.callStats`), kept from the attempts its deliveries
 * hold: when a row of a delivery replaces another, the attempts it adds (by `attemptCount`) are
 * counted, and a revert takes out the same ones; a delivery retention removes keeps its counts. A
 * store with a journal rebuilds the counts as it replays; from a compacted log, a delivery past 50
 * attempts counts the 50 it holds. Hours older than eight days before the latest one counted are dropped.
 */
export class CallStats {
  private readonly byWebhook = new Map<string, Map<string, CallStatsHour>>();
  private latest = '';
  private cutoff = '';

  /**
   * A delivery's row changed from `before` to `after` (either absent): counts the attempts `after`
   * made beyond `before`, or takes out those `before` made beyond `after` (a revert).
   */
  change(before: DeliveryRecord | undefined, after: DeliveryRecord | undefined): void {
    const added = (after?.attemptCount ?? 0) - (before?.attemptCount ?? 0);
    if (added > 0) this.count(after!.attempts.slice(-added), 1, after!.webhookId);
    else if (added < 0) this.count(before!.attempts.slice(added), -1, before!.webhookId);
  }

  /** Counts the attempts (`sign` 1), or takes them out (-1). */
  private count(attempts: readonly DeliveryRecord['attempts'][number][], sign: 1 | -1, webhookId: string): void {
    for (const attempt of attempts) {
      const hour = hourOf(attempt.at);
      // Advancing may drop the webhook's map (all its hours past the span): it is looked up after.
      if (sign > 0 && hour > this.latest) this.advance(hour);
      if (hour < this.cutoff) continue;
      let hours = this.byWebhook.get(webhookId);
      if (hours === undefined) {
        if (sign < 0) continue;
        this.byWebhook.set(webhookId, (hours = new Map()));
      }
      let counts = hours.get(hour);
      if (counts === undefined) {
        if (sign < 0) continue;
        hours.set(hour, (counts = emptyHour(hour)));
      }
      counts[OUTCOMES[outcomeIndex(attempt)]] += sign;
      counts.latency[latencyBin(attempt.durationMs)]! += sign;
    }
  }

  /** A webhook removed: its counts go with it. */
  forget(webhookId: string): void {
    this.byWebhook.delete(webhookId);
  }

  /** The webhook's hours from `since` on, earliest first, as copies. */
  since(webhookId: string, since: string): CallStatsHour[] {
    const hours = this.byWebhook.get(webhookId);
    if (hours === undefined) return [];
    return [...hours.values()]
      .filter((hour) => hour.hour >= since)
      .sort((a, b) => (a.hour < b.hour ? -1 : 1))
      .map((hour) => ({ ...hour, latency: [...hour.latency] }));
  }

  /** A later hour was counted: hours past the kept span are dropped, once an hour. */
  private advance(hour: string): void {
    this.latest = hour;
    this.cutoff = hourOf(new Date(Date.parse(hour) - CALL_STATS_KEPT_MS).toISOString().replace(/\.\d+Z$/, '+00:00'));
    for (const [webhookId, hours] of this.byWebhook) {
      for (const key of hours.keys()) if (key < this.cutoff) hours.delete(key);
      if (hours.size === 0) this.byWebhook.delete(webhookId);
    }
  }
}
