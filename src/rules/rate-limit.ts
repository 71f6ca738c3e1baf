import { atom } from '../shared/time.js';

/*
 * A webhook's `rateLimit`: at most that many calls start in any one-second window.
 *
 * Two steps keep to it. A store paces the webhook's due deliveries into whole-second slots, at most
 * `rateLimit` a second, from where the last pacing stopped (`paceSlots`): a paced delivery is due
 * at its slot, and a claim leases a rate-limited webhook's delivery only once paced, which spends
 * the slot. Since the slots are shared through the store, instances together hold to them. Then
 * each worker starts the calls it leased no faster than the limit (`StartWindow` in
 * `webhooks/start-window.ts`), so that the slots of two seconds claimed late never start together.
 */

/** Where a webhook's pacing stands: the second it fills (ATOM) and how many of its slots are given. */
export interface Pace {
  second: string;
  used: number;
}

/** ATOM `second` plus `n` seconds. */
const plusSeconds = (second: string, n: number) => atom(new Date(Date.parse(second) + n * 1000));

/**
 * The slots of `count` deliveries of a webhook limited to `rateLimit` calls a second, paced at
 * `now` (ATOM, of second precision): from the second `pace` fills (or `now`'s, when that is past), at most `rateLimit` to a
 * second, in order; and where the pacing then stands. `pace` `null`: never paced.
 */
export function paceSlots(
  pace: Pace | null,
  now: string,
  rateLimit: number,
  count: number,
): { slots: string[]; pace: Pace | null } {
  const start = pace === null || pace.second < now ? { second: now, used: 0 } : pace;
  if (count <= 0) return { slots: [], pace };
  const slots: string[] = [];
  for (let i = 0; i < count; i++) slots.push(plusSeconds(start.second, Math.floor((start.used + i) / rateLimit)));
  const last = start.used + count - 1;
  return {
    slots,
    pace: { second: plusSeconds(start.second, Math.floor(last / rateLimit)), used: (last % rateLimit) + 1 },
  };
}

/**
 * Where a webhook's pacing stands at `now` once the slots it gave for later seconds are given back
 * (its limit, `before`, changed): at `now`'s second, every slot of which counts as given when the
 * pacing stood beyond it; as it was otherwise.
 */
export function restartedPace(pace: Pace, now: string, before: number): Pace {
  return pace.second > now ? { second: now, used: before } : pace;
}
