import { CALL_STATS_KEPT_MS, type CallStatsHour, emptyHour, hourOf, latencyBin, outcomeIndex } from '../../src/domain/call-stats.js';
import type { DeliveryRecord } from '../../src/records.js';

const OUTCOMES = ['succeeded', 'failed', 'errors'] as const;

/**
 * Each webhook's calls by the hour (`Storage.callStats`), kept from the attempts its deliveries
 * hold: a delivery's attempts are counted when its row is stored and taken out when a newer row of
 * it replaces that one, so a store with a journal rebuilds the same counts when it replays. A
 * delivery keeps its last 50 attempts: past that, the oldest leave the counts as they leave the row.
 * Hours older than eight days before the latest one counted are dropped.
 */
export class CallStats {
  private readonly byWebhook = new Map<string, Map<string, CallStatsHour>>();
  private latest = '';
  private cutoff = '';

  /** Counts the delivery's attempts (`sign` 1), or takes them out (-1). */
  count(delivery: DeliveryRecord, sign: 1 | -1): void {
    for (const attempt of delivery.attempts) {
      const hour = hourOf(attempt.at);
      // Advancing may drop the webhook's map (all its hours past the span): it is looked up after.
      if (sign > 0 && hour > this.latest) this.advance(hour);
      if (hour < this.cutoff) continue;
      let hours = this.byWebhook.get(delivery.webhookId);
      if (hours === undefined) {
        if (sign < 0) continue;
        this.byWebhook.set(delivery.webhookId, (hours = new Map()));
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
