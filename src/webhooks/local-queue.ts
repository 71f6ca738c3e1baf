import type { Logger } from '../shared/logger.js';
import { errorMessage } from '../errors.js';
import type { ClaimedDelivery } from '../records.js';

/**
 * The longest a freed slot waits, with a backlog, for others to free so that one claim fills them
 * together: a bound on what a slow or hanging call holds back of the others' refill.
 */
export const REFILL_WAIT_MS = 20;
/**
 * Below that bound a freed slot waits as long as this many claims take (their recent duration): a
 * wait longer than the claims it saves would idle slots for nothing. On a store whose claims take no
 * time (memory) the wait is a millisecond; on PostgreSQL under load (claims of 5 ms) it reaches the bound.
 */
const REFILL_WAIT_CLAIMS = 2;

/** What the worker's scheduler reads time from and waits with. */
export interface WorkerTimers {
  /** Milliseconds, monotonic (as `timers.now()`). */
  now(): number;
  /** As `setTimeout`, for a timer that must not keep the process alive. */
  setTimeout(run: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: WorkerTimers = {
  now: () => performance.now(),
  setTimeout(run, ms) {
    const timer = setTimeout(run, ms);
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** What the queue does with a delivery, and how it claims more: the worker's stages. */
interface LocalQueueStages<Made> {
  /** Claims up to `limit` due deliveries, leased to this worker, given what it holds of each account. */
  claim(limit: number, held: Readonly<Record<string, number>>): Promise<ClaimedDelivery[]>;
  /** Makes the delivery's call; resolves once its answer came (or it failed), never later than its deadline. */
  call(claimed: ClaimedDelivery): Promise<Made>;
  /** Records the call's attempt; resolves `true` when more may now be due for this worker (a redeliver, a key's turn ended). */
  record(claimed: ClaimedDelivery, made: Made): Promise<boolean>;
  /**
   * Milliseconds until the delivery's call may start (its webhook's rate limit), 0 for now,
   * `Infinity` until one of the calls in flight ends (its webhook's calls in flight at their limit);
   * a call started is told of with `started`. Absent: every call may start at once.
   */
  gate?(claimed: ClaimedDelivery, now: number): number;
  started?(claimed: ClaimedDelivery, now: number): void;
  /** Deliveries claimed ahead that waited `aheadWaitLimitMs` for a slot, never called: for the store to take back. */
  giveBack?(claimed: ClaimedDelivery[]): void;
}

export interface LocalQueueOptions<Made> extends LocalQueueStages<Made> {
  /** Calls in flight at once; as many more may be claimed ahead. */
  concurrency: number;
  /** Calls of one account in flight or claimed ahead at once. */
  perAccount: number;
  /** A delivery claimed ahead waits for a slot at most this long; one that waited longer is not called but given back. */
  aheadWaitLimitMs: number;
  timers: WorkerTimers;
  logger: Logger;
}

/**
 * A worker's local queue: the deliveries it has claimed and not yet recorded, and when it claims
 * again. Each delivery goes through its stages in order, claim → call → record; the queue decides
 * when, never what a call or a record does.
 *
 * Its modes, which may overlap:
 * - **idle**: nothing claimed, ahead, in flight or being recorded; `whenIdle()` resolves.
 * - **claiming**: one claim at a time. A `fill()` meanwhile only sets `again`; the claim's end
 *   refills, whether the claim worked or failed.
 * - **delivering**: at most `concurrency` calls in flight, and as many deliveries claimed ahead of
 *   free slots (in claim order): a call that ends starts the next one at once, instead of after a
 *   claim's round trip. One whose webhook's rate limit has it wait (`gate`) lets the next ones go
 *   first, and a timer starts it when its time comes. A call's slot frees when its answer came, not once its attempt is recorded:
 *   the delivery stays leased until then, so no claim takes it again.
 * - **waiting to refill**: with a backlog (`again`), freed room waits for more to free so that one
 *   claim fills it all, as long as two claims take (1 to `REFILL_WAIT_MS`); at once when nothing is
 *   left in flight, or when the last claim took all it asked for and a slot's worth is free.
 * - **stopped**: claims no more; what was claimed still goes out and is recorded, and `drain()`
 *   resolves once it is.
 *
 * Claiming ahead and refilling together are the worker's speed (bench row "webhook fleet";
 * docs/performance.md, "Figures behind the code": claiming ahead, refilling the slots together).
 *
 * The state the modes share, each field written only by the methods named:
 * - `again` (`fill`, `claimed`, `release`, `recorded`, `mayHaveMore`): more may be due than the last claim took;
 * - `filledLast` (`claimed`): the last claim took all it asked for;
 * - `claimMs` (`claim`): how long recent claims took, a moving average;
 * - `full` (`claimed`, `release`): accounts whose share the last claim found full, so the first of
 *   their calls to end claims again.
 */
export class LocalQueue<Made> {
  private readonly options: LocalQueueOptions<Made>;
  private stopped = false;
  private claiming: Promise<void> | null = null;
  private again = false;
  private filledLast = false;
  private refillTimer: unknown;
  private gateTimer: unknown;
  private gateDue = 0;
  private claimMs = 0;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly ahead: { claimed: ClaimedDelivery; at: number }[] = [];
  private readonly recording = new Set<Promise<void>>();
  /** This worker's deliveries by account, in flight or claimed ahead: what the fair share of the next claim counts. */
  private readonly heldByAccount: Record<string, number> = Object.create(null);
  private readonly full = new Set<string>();
  private idleWaiters: (() => void)[] = [];

  constructor(options: LocalQueueOptions<Made>) {
    this.options = options;
  }

  /** Whether a claim is due when room frees: more may be due than the last claim could take. */
  get backlogged(): boolean {
    return this.again;
  }

  /** Claims now, up to the free room, unless a claim is on its way (then once it ends). */
  fill(): void {
    this.options.timers.clearTimeout(this.refillTimer);
    this.refillTimer = undefined;
    if (this.stopped) return;
    if (this.claiming !== null) {
      this.again = true;
      return;
    }
    const limit = this.free();
    if (limit <= 0) {
      this.again = true;
      return;
    }
    this.again = false;
    this.claiming = this.claim(limit).finally(() => {
      this.claiming = null;
      this.refill();
      this.settleIfIdle();
    });
  }

  /** With a backlog, claims once the freed room is worth a claim (the "waiting to refill" mode). */
  refill(): void {
    if (!this.again || this.stopped || this.claiming !== null) return;
    const { concurrency, timers } = this.options;
    if (this.inFlight.size + this.ahead.length === 0 || (this.filledLast && this.free() >= concurrency)) {
      return this.fill();
    }
    if (this.refillTimer !== undefined || this.free() <= 0) return;
    const wait = Math.min(REFILL_WAIT_MS, Math.max(1, REFILL_WAIT_CLAIMS * this.claimMs));
    this.refillTimer = timers.setTimeout(() => this.fill(), wait);
  }

  /** More may be due than the last claim took (a webhook it passed over has room again): claim once room frees. */
  mayHaveMore(): void {
    this.again = true;
  }

  /** Whether deliveries of the webhook wait claimed ahead: they take its room as it frees, before any claim could. */
  hasAhead(webhookId: string): boolean {
    return this.ahead.some(({ claimed }) => claimed.delivery.webhookId === webhookId);
  }

  /** Resolves once nothing is claimed, ahead, in flight or being recorded. */
  whenIdle(): Promise<void> {
    const idle = new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    this.settleIfIdle();
    return idle;
  }

  /** Claims no more; resolves once what was claimed has gone out and been recorded. */
  async drain(): Promise<void> {
    this.stopped = true;
    this.options.timers.clearTimeout(this.refillTimer);
    // Resolved by the last call's record, or by the gate's timer for calls a rate limit holds back.
    await this.whenIdle();
  }

  /**
   * Deliveries the next claim may take: room for `concurrency` in flight and as many ahead, less what
   * waits to be recorded beyond `concurrency` (a slow store slows the claims instead of piling up records).
   */
  private free(): number {
    const { concurrency } = this.options;
    return 2 * concurrency - this.inFlight.size - this.ahead.length - Math.max(0, this.recording.size - concurrency);
  }

  /** Whether a call may start: a slot is free, and no more than `concurrency` answered calls wait to be recorded. */
  private canStart(): boolean {
    const { concurrency } = this.options;
    return this.inFlight.size < concurrency && this.inFlight.size + this.recording.size < 2 * concurrency;
  }

  private async claim(limit: number): Promise<void> {
    const { timers, logger } = this.options;
    const held = { ...this.heldByAccount };
    let claimed: ClaimedDelivery[];
    try {
      const started = timers.now();
      claimed = await this.options.claim(limit, held);
      this.claimMs = 0.7 * this.claimMs + 0.3 * (timers.now() - started);
    } catch (error) {
      // Nothing more is asked for it: the next tick claims again. A fill asked while it ran (a
      // publish, a redeliver, a call that ended) still claims once, as after a claim that worked.
      logger.error({ err: errorMessage(error) }, 'webhook worker: claiming due deliveries failed');
      return;
    }
    this.claimed(claimed, limit, held);
  }

  /** Takes in what a claim leased to this worker: they go out even when `drain()` came meanwhile. */
  private claimed(claimed: ClaimedDelivery[], limit: number, held: Record<string, number>): void {
    const { perAccount, timers } = this.options;
    const at = timers.now();
    for (const delivery of claimed) {
      const { accountId } = delivery.delivery;
      this.heldByAccount[accountId] = (this.heldByAccount[accountId] ?? 0) + 1;
      this.ahead.push({ claimed: delivery, at });
    }
    this.startAhead();
    this.filledLast = claimed.length === limit;
    if (this.filledLast) this.again = true;
    const leased = new Map<string, number>();
    for (const { delivery } of claimed) leased.set(delivery.accountId, (leased.get(delivery.accountId) ?? 0) + 1);
    // Counted from what the claim saw, not from what is in flight now: on a slow store the calls it
    // saw may all have ended meanwhile, and the rest of the account's backlog would wait for a tick.
    this.full.clear();
    for (const account of new Set([...Object.keys(held), ...leased.keys()])) {
      if ((held[account] ?? 0) + (leased.get(account) ?? 0) < perAccount) continue;
      // Its calls all ended while the claim ran: nothing of its would ask again, so ask now.
      if (this.heldByAccount[account] === undefined) this.again = true;
      else this.full.add(account);
    }
  }

  /**
   * Starts the deliveries claimed ahead, in claim order, while slots are free; one its gate holds
   * back stays, and a timer comes back for it.
   */
  private startAhead(): void {
    const { timers, logger, aheadWaitLimitMs, gate } = this.options;
    let soonest = Infinity;
    const expired: ClaimedDelivery[] = [];
    for (let i = 0; i < this.ahead.length && this.canStart(); ) {
      const { claimed, at } = this.ahead[i]!;
      const now = timers.now();
      if (now - at > aheadWaitLimitMs) {
        this.ahead.splice(i, 1);
        this.release(claimed.delivery.accountId);
        expired.push(claimed);
        logger.warn(
          { deliveryId: claimed.delivery.id, waitedMs: Math.round(now - at) },
          'webhook worker: a delivery claimed ahead waited too long for a slot; it is not called but given back (or left to its lease)',
        );
        continue;
      }
      const wait = gate === undefined ? 0 : gate(claimed, now);
      if (wait > 0) {
        soonest = Math.min(soonest, wait);
        i++;
        continue;
      }
      this.ahead.splice(i, 1);
      this.options.started?.(claimed, now);
      this.startCall(claimed);
    }
    if (expired.length > 0) this.options.giveBack?.(expired);
    if (soonest === Infinity) return;
    const due = timers.now() + soonest;
    if (this.gateTimer !== undefined) {
      if (this.gateDue <= due) return;
      timers.clearTimeout(this.gateTimer);
    }
    this.gateDue = due;
    this.gateTimer = timers.setTimeout(() => {
      this.gateTimer = undefined;
      this.startAhead();
      this.refill();
      this.settleIfIdle();
    }, soonest);
  }

  private release(accountId: string): void {
    // An account that held its whole share may have more due that a claim skipped: claim again.
    if (this.full.delete(accountId)) this.again = true;
    if (--this.heldByAccount[accountId]! === 0) delete this.heldByAccount[accountId];
  }

  private startCall(claimed: ClaimedDelivery): void {
    const { accountId } = claimed.delivery;
    const call: Promise<void> = this.options
      .call(claimed)
      .then((made) => this.startRecord(claimed, made))
      .catch((error) =>
        this.options.logger.error(
          { deliveryId: claimed.delivery.id, err: errorMessage(error) },
          'webhook worker: making a call failed',
        ),
      )
      .finally(() => {
        this.inFlight.delete(call);
        this.release(accountId);
        this.settled();
      });
    this.inFlight.add(call);
  }

  private startRecord(claimed: ClaimedDelivery, made: Made): void {
    const record: Promise<void> = this.options
      .record(claimed, made)
      .then((moreDue) => {
        // A redeliver queued during the call, or the end of its key's turn: claim again rather than
        // leave it to the next tick.
        if (moreDue) this.again = true;
      })
      .catch((error) =>
        this.options.logger.error(
          { deliveryId: claimed.delivery.id, err: errorMessage(error) },
          'webhook worker: recording an attempt failed',
        ),
      )
      .finally(() => {
        this.recording.delete(record);
        this.settled();
      });
    this.recording.add(record);
  }

  /** A call or a record ended: start what waits, refill, and tell the idle waiters. */
  private settled(): void {
    this.startAhead();
    this.refill();
    this.settleIfIdle();
  }

  private settleIfIdle(): void {
    if (this.claiming !== null || this.inFlight.size > 0 || this.recording.size > 0 || this.ahead.length > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
