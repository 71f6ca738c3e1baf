import type { DeliveryRecord } from '../../src/records.js';
import { type Pace, paceSlots, restartedPace } from '../../src/rules/rate-limit.js';

/**
 * The in-process store's pacing of rate-limited webhooks (`paceSlots` in `src/rules/rate-limit.ts`):
 * where each webhook's pacing stands, and which deliveries wait for the slot it gave them. Kept in
 * memory only: after a restart every waiting delivery is paced again from then, which never lets
 * more calls through than the limit.
 */
export class Pacing {
  private readonly paces = new Map<string, Pace>();
  /** The deliveries given a later second, with it: each goes once due at that second, without another slot. */
  private readonly slots = new Map<string, { webhookId: string; slot: string }>();
  private sweepAt = 1024;

  /**
   * The later second a claim at `now` defers `delivery` to, its webhook limited to `rateLimit` calls
   * a second; `null` when it may go now (its slot has come, or the second it gets is `now`'s), which
   * spends the slot.
   */
  slotOf(delivery: DeliveryRecord, rateLimit: number, now: string): string | null {
    const given = this.slots.get(delivery.id);
    if (given !== undefined) {
      this.slots.delete(delivery.id);
      if (given.slot === delivery.nextAttemptAt) return null;
    }
    const { slots, pace } = paceSlots(this.paces.get(delivery.webhookId) ?? null, now, rateLimit, 1);
    this.paces.set(delivery.webhookId, pace!);
    const slot = slots[0]!;
    if (slot <= now) return null;
    this.slots.set(delivery.id, { webhookId: delivery.webhookId, slot });
    return slot;
  }

  /**
   * Gives back the slots of the webhook's deliveries that wait for a later second than `now` (its
   * limit, `before`, changed or went): their ids, each paced again when due. The pacing goes back to
   * `now`'s second, whose slots all count as given when it stood beyond (`restartedPace`).
   */
  restart(webhookId: string, now: string, before: number): string[] {
    const pace = this.paces.get(webhookId);
    if (pace !== undefined) this.paces.set(webhookId, restartedPace(pace, now, before));
    const waited: string[] = [];
    for (const [id, given] of this.slots) {
      if (given.webhookId !== webhookId || given.slot <= now) continue;
      this.slots.delete(id);
      waited.push(id);
    }
    return waited;
  }

  /**
   * The webhook is held (`Retry-After`, or its receiver down) and the claim defers the delivery to
   * the hold's end: its slot, and the ones given after it, are spent on nothing, so the pacing starts
   * again from when it is paced next.
   */
  held(webhookId: string, deliveryId: string): void {
    this.slots.delete(deliveryId);
    this.paces.delete(webhookId);
  }

  /** The delivery no longer holds a slot (redelivered, cancelled): it is paced again if it falls due. */
  forget(deliveryId: string): void {
    this.slots.delete(deliveryId);
  }

  /**
   * Drops the slots of deliveries that no longer wait for them (`waits` false: gone, or made due
   * another way), once their number has doubled since the last look: what the map holds stays
   * within twice what waits.
   */
  sweep(waits: (deliveryId: string, slot: string) => boolean): void {
    if (this.slots.size < this.sweepAt) return;
    for (const [id, { slot }] of this.slots) if (!waits(id, slot)) this.slots.delete(id);
    this.sweepAt = Math.max(1024, 2 * this.slots.size);
  }
}
