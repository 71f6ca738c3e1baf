/**
 * Where the fair claim starts each account's walk: `planClaim` of src/rules/deliveries.ts reads
 * each account's claimable deliveries in claim order; the floors let the SQL walk begin past what
 * the last claims took, which changes what is read, never what is leased.
 */
import { atom } from '../../../src/shared/time.js';
import type { DeliveryRecord } from '../../../src/records.js';
import type { Row } from '../client.js';

/**
 * Milliseconds a new delivery may have been made before the claim that first sees it (clocks, commit
 * lag): each claim looks back `FRESH_SLACK_MS` from the previous claim, and one every `WIDE_SCAN_MS`
 * looks back `WIDE_SLACK_MS`, each to the start of that second. Due times are whole seconds: a
 * delivery made at 10.9 s and stored after a claim at 11.0 s is due at 10 s, a whole second before
 * the claim it missed, however short the lag. Every claim reads the stretch it looks back over, every
 * pending delivery due in it. So a claim reads the second before only when the claim before it came
 * less than `FRESH_SLACK_MS` into its own second: read by every claim, it slowed the deliveries while
 * publishing (bench row "webhook fleet"; docs/performance.md, "Figures behind the code": the claim).
 */
export const FRESH_SLACK_MS = 250;
export const WIDE_SLACK_MS = 1000;
export const WIDE_SCAN_MS = 250;
/** The rescue (see `claimFloors`) at most this often, and at most 2 % of the time when it is slow. */
export const RESCUE_MS = 15_000;
export const RESCUE_SHARE = 50;

/** A floor as a number, for comparing: an ATOM time, or '-infinity'. */
const floorMs = (floor: string) => (floor === '-infinity' ? -Infinity : Date.parse(floor));

/**
 * Where this instance's fair claims start each account's walk (`fairClaim`). With VACUUM held back
 * (a long transaction anywhere on the database), every claim and record leaves row versions the
 * claim's index walk must step over, and walking each account from its first pending entry made
 * every claim pay for every delivery since: claims slowed, deliveries fell behind, and the
 * backlog grew (the horizon bench, `npm run bench:horizon`). So each account's walk starts at its
 * floor: the due time of the first delivery the last claim leased for it. Below the floor there
 * are only deliveries leased since (a call in flight), finished, or due again later. An account
 * with a delivery that fell due since the last claim (new, a retry whose time came, redelivered)
 * is found by a scan of just that stretch of the due index.
 *
 * What can fall below a floor unseen (a lease that ran out; a delivery whose due time lagged its
 * commit by more than the wide slack) is found by the rescue: a read of every account's earliest
 * claimable delivery, run beside the claims on a connection of its own (never holding one up),
 * every `RESCUE_MS` or, when it is slow, after 50 times as long as it took; it lowers the floors
 * it finds below. A first claim, and one whose clock jumped, walks every account from the start.
 */
export function claimFloors(clock: () => number = () => performance.now()) {
  /** Each known account's floor: an ATOM time, or '-infinity'. */
  const known = new Map<string, string>();
  let last: string | undefined;
  /** How far into its second the last claim began, at least: since the first claim this instance began in that second (ms). */
  let lastInto = 0;
  /** The second of the latest claims, and when (clock()) the first of them began. */
  let second: string | undefined;
  let secondBegan = 0;
  let nextWideScan = 0;
  let nextRescue = clock() + RESCUE_MS;
  let rescuing = false;
  return {
    known: known as ReadonlyMap<string, string>,
    /** Where the next claim's scan of newly due deliveries starts (that second included); `null`: a full claim. */
    windowFrom(now: string): string | null {
      const previous = last === undefined ? Number.NaN : Date.parse(last);
      const at = Date.parse(now);
      // A first claim, or a clock gone backwards or a minute ahead: every account, from the start.
      if (!(at >= previous && at - previous <= 60_000)) return null;
      const wide = clock() >= nextWideScan;
      if (wide) nextWideScan = clock() + WIDE_SCAN_MS;
      // A delivery the last claim missed, made at most FRESH_SLACK_MS before it, is due in that
      // claim's second if the claim came that far into it, else maybe in the second before. atom()
      // truncates: the scan starts where that second does.
      const lookBack = wide ? WIDE_SLACK_MS : lastInto >= FRESH_SLACK_MS ? 0 : FRESH_SLACK_MS;
      return atom(new Date(previous - lookBack));
    },
    /**
     * After a claim at `now` that began at `began` (clock()): each account leased for
     * starts its next walk at the first delivery leased; one the claim looked at, with room in its
     * share, and found nothing for, is forgotten (when the claim had room left, so nothing was passed
     * over); the others keep the floor the claim gave them (`f_accounts`, `f_floors` of its first row).
     */
    claimed(
      now: string,
      began: number,
      leased: DeliveryRecord[],
      row: Row | undefined,
      claim: {
        limit: number;
        max: number;
        inFlight: Readonly<Record<string, number>>;
        fullWebhooks?: readonly string[];
      },
    ) {
      // ATOM strings sort in time order. Claims run at once (workers sharing this store) may end out of order.
      if (second === undefined || now > second) [second, secondBegan] = [now, began];
      else if (now === second) secondBegan = Math.min(secondBegan, began);
      lastInto = now === second ? began - secondBegan : 0;
      last = now;
      const first = new Map<string, string>();
      for (const delivery of leased) {
        const seen = first.get(delivery.accountId);
        if (seen === undefined || delivery.nextAttemptAt! < seen)
          first.set(delivery.accountId, delivery.nextAttemptAt!);
      }
      const looked = (row?.f_accounts ?? []) as string[];
      const given = (row?.f_floors ?? []) as string[];
      for (const [i, account] of looked.entries()) {
        const leasedFrom = first.get(account);
        if (leasedFrom !== undefined) {
          known.set(account, leasedFrom);
          continue;
        }
        const room = claim.max - (Object.hasOwn(claim.inFlight, account) ? claim.inFlight[account]! : 0);
        // Room in its share, and the claim had room left: it has nothing due from its floor on
        // (unless the claim passed over webhooks at their calls in flight, whose deliveries stay due).
        if (room > 0 && leased.length < claim.limit && (claim.fullWebhooks ?? []).length === 0) known.delete(account);
        else if (!known.has(account)) known.set(account, given[i]!);
      }
    },
    /** Runs `read` (the rescue's statement: each account's earliest claimable due time) when one is due. */
    rescue(read: () => Promise<Row[]>): void {
      if (rescuing || clock() < nextRescue) return;
      rescuing = true;
      const started = clock();
      read()
        .then((rows) => {
          for (const row of rows) {
            const account = row.account_id as string;
            const due = row.due as string;
            const floor = known.get(account);
            if (floor === undefined || floorMs(due) < floorMs(floor)) known.set(account, due);
          }
        })
        // A rescue that failed (the database away) is tried again at the next one's time.
        .catch(() => {})
        .finally(() => {
          rescuing = false;
          nextRescue = clock() + Math.max(RESCUE_MS, RESCUE_SHARE * (clock() - started));
        });
    },
  };
}
