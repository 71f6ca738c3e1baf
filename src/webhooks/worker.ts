import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import cron, { type ScheduledTask } from 'node-cron';
import { errorMessage } from '../errors.js';
import type { Logger } from '../shared/logger.js';
import { noTelemetry, type CallOutcome, type Telemetry } from '../shared/telemetry.js';
import type { Storage, WebhookCall, WebhookCallResult, WebhookTransport } from '../ports.js';
import type { ClaimedDelivery, DeliveryAttempt } from '../records.js';
import { atom } from '../shared/time.js';
import { buildCall, callBody } from './call.js';
import { endsTurn } from '../rules/deliveries.js';
import { attemptsInRun, outcomeOf, type Outcome } from '../rules/retry-schedule.js';
import { DEFAULT_DISABLE_AFTER_FAILURES, DEFAULT_DISABLE_AFTER_MS, attemptSucceeded } from '../rules/webhook-health.js';
import type { OperationalEvent } from '../domain/operational-events.js';

/**
 * A claim's lease outlasts the call by this much: the call itself is bounded by `timeoutMs`, and
 * the margin covers recording the attempt and a slow storage round trip. A worker that dies holds
 * its deliveries at most `timeoutMs` + 60 s; then any worker takes them again.
 */
export const LEASE_MARGIN_MS = 60_000;
/** How many characters of serialized event bodies a worker keeps for the next calls of the same events. */
const BODY_CACHE_CHARS = 32 * 1024 * 1024;
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
/** A transport that ignores its deadline is cut off this long after it: the worker never hangs on one. */
const TRANSPORT_GRACE_MS = 1_000;
/**
 * A delivery claimed ahead waits for a slot at most this long; one that waited longer is not called,
 * since its call might outlast its lease (`timeoutMs` + 60 s from the claim). It stays leased, and
 * goes out once its lease has run out, by whichever worker claims it then.
 */
const AHEAD_WAIT_LIMIT_MS = LEASE_MARGIN_MS / 2;

export interface WebhookWorkerOptions {
  storage: Storage;
  transport: WebhookTransport;
  clock: () => Date;
  logger: Logger;
  /** node-cron expression of the poll. */
  tick: string;
  timeoutMs: number;
  concurrency: number;
  /** Calls of one account in flight at once (default `max(1, floor(concurrency / 4))`). */
  concurrencyPerAccount?: number;
  retrySchedule: readonly number[];
  /** In [0, 1), for the jitter; injectable so tests can pin it. */
  random?: () => number;
  /** The lease owner this worker claims as (default: a new random id). */
  owner?: string;
  /** A webhook whose calls have all failed this long, in at least `disableAfterFailures` attempts, is disabled (default 5 days). */
  disableAfterMs?: number;
  /** Default 10. */
  disableAfterFailures?: number;
  /** Hears of what the host may want to tell its customer: a webhook disabled, a delivery exhausted or recovered. */
  emit?: (event: OperationalEvent) => void;
  /** Other work of the tick (agreements' expiry and reminders): run on each cron tick and by `tick()`, one run at a time. */
  housekeeping?: () => Promise<void>;
  /** A client span and a duration for each call, a count for each recorded attempt. */
  telemetry?: Telemetry;
  /** The scheduler's own time: waits, and how long claims and calls take (default the real ones); tests pass a fake clock. */
  timers?: WorkerTimers;
}

/** What the worker's scheduler reads time from and waits with. */
export interface WorkerTimers {
  /** Milliseconds, monotonic (as `timers.now()`). */
  now(): number;
  /** As `setTimeout`, for a timer that must not keep the process alive. */
  setTimeout(run: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: WorkerTimers = {
  now: () => performance.now(),
  setTimeout(run, ms) {
    const timer = setTimeout(run, ms);
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** How a call went, for telemetry: a 2xx, another status, no answer in time, or none at all. */
function callOutcome(result: WebhookCallResult): CallOutcome {
  if (result.statusCode !== null) return attemptSucceeded(result) ? 'success' : 'failure';
  return result.error?.startsWith('timed out') ? 'timeout' : 'error';
}

/** Delivers due webhook calls: on its cron tick, when poked, and when asked through `tick()`. */
export interface WebhookWorker {
  /** The lease owner this worker claims deliveries as. */
  readonly owner: string;
  /** Whether the poll runs: after `start()`, until `stop()`. */
  readonly running: boolean;
  /** Starts the cron poll (its timer does not keep the process alive) and takes what is already due. */
  start(): void;
  /** Stops the poll, takes no more deliveries, and resolves once the calls in flight are recorded. */
  stop(): Promise<void>;
  /**
   * Claims what is due now (up to the free slots of `concurrency`, again as slots free up) and
   * delivers it; resolves once nothing is claimed, in flight or being recorded. Tests drive the schedule with it.
   */
  tick(): Promise<void>;
  /** `tick()` without waiting: what `events.publish` calls so the first attempt goes out at once. */
  poke(): void;
}

/** The default fair share of one account: a quarter of the slots, at least one. */
export const defaultConcurrencyPerAccount = (concurrency: number) => Math.max(1, Math.floor(concurrency / 4));

export function createWebhookWorker(options: WebhookWorkerOptions): WebhookWorker {
  const { storage, transport, clock, logger, timeoutMs, concurrency, retrySchedule } = options;
  const random = options.random ?? Math.random;
  const owner = options.owner ?? `worker_${randomUUID()}`;
  const leaseMs = timeoutMs + LEASE_MARGIN_MS;
  const perAccount = options.concurrencyPerAccount ?? defaultConcurrencyPerAccount(concurrency);
  const health = {
    disableAfterMs: options.disableAfterMs ?? DEFAULT_DISABLE_AFTER_MS,
    disableAfterFailures: options.disableAfterFailures ?? DEFAULT_DISABLE_AFTER_FAILURES,
  };
  const emit = options.emit ?? (() => {});
  const telemetry = options.telemetry ?? noTelemetry;
  const timers = options.timers ?? realTimers;

  /**
   * Each event's body, serialized once for all its deliveries and retries (an event fans out to
   * every webhook of its type): bounded by size, so a burst of large events cannot hold memory.
   */
  const bodies = new LRUCache<string, string>({
    maxSize: BODY_CACHE_CHARS,
    sizeCalculation: (body) => Math.max(1, body.length),
  });

  let task: ScheduledTask | undefined;
  let stopped = false;
  let claiming: Promise<void> | null = null;
  /** Set when more may be due than the last claim could take: a slot that frees claims again. */
  let again = false;
  /**
   * Whether the last claim took all it asked for: more is due than this worker holds, so a claim
   * goes out as soon as a slot's worth of room is free. One that took less was bounded by the
   * accounts' shares, and the next waits for the refill (a claim at each freed slot took one each).
   */
  let filledLast = false;
  /** Set while freed slots wait for more to free before one claim fills them all (see `refill`). */
  let refillTimer: unknown;
  /** How long the recent claims took, in ms (a moving average): what a freed slot waits for others. */
  let claimMs = 0;
  /** Calls in flight: what `concurrency` counts. */
  const inFlight = new Set<Promise<void>>();
  /**
   * Deliveries claimed ahead of free slots, in claim order, each with when it was claimed: as a call
   * ends, the next one starts at once instead of after a claim's round trip. At most `concurrency`
   * of them. With fast receivers a worker on PostgreSQL spent most of each call's cycle waiting for
   * the claim that refilled its slot (bench row "webhook fleet", draining; the figures in
   * docs/performance.md, "Figures behind the code": claiming ahead).
   */
  const ahead: { claimed: ClaimedDelivery; at: number }[] = [];
  /**
   * Attempts being recorded. A call's slot frees when its answer came, not once the attempt is
   * stored: the delivery stays leased until then, so no claim takes it again, and the next call
   * does not wait for a database round trip. At most `concurrency` more than the free slots: a
   * slow database slows the claims instead of piling up records.
   */
  const recording = new Set<Promise<void>>();
  /**
   * This worker's deliveries by account, in flight or claimed ahead: what the fair share of the next
   * claim counts, so an account never has more than its share of calls in flight.
   */
  const heldByAccount: Record<string, number> = Object.create(null);
  /**
   * Accounts whose share the last claim found full, or filled: it may have skipped due deliveries of
   * theirs, so the first of their calls to end claims again. Counted from what the claim saw, not
   * from what is in flight when it returns: on a slow store the calls it saw may all have ended by
   * then, and the rest of the account's backlog would wait for the next tick.
   */
  const full = new Set<string>();
  let idleWaiters: (() => void)[] = [];

  /**
   * Deliveries the next claim may take: room for `concurrency` in flight and as many ahead, less what
   * waits to be recorded beyond `concurrency` (a slow store slows the claims instead of piling up records).
   */
  const free = () => 2 * concurrency - inFlight.size - ahead.length - Math.max(0, recording.size - concurrency);
  /** Whether a call may start: a slot is free, and no more than `concurrency` answered calls wait to be recorded. */
  const canStart = () => inFlight.size < concurrency && inFlight.size + recording.size < 2 * concurrency;

  /** Starts the deliveries claimed ahead, in claim order, while slots are free. */
  function startAhead(): void {
    while (ahead.length > 0 && canStart()) {
      const { claimed, at } = ahead.shift()!;
      if (timers.now() - at <= AHEAD_WAIT_LIMIT_MS) {
        startCall(claimed);
        continue;
      }
      release(claimed.delivery.accountId);
      logger.warn(
        { deliveryId: claimed.delivery.id, waitedMs: Math.round(timers.now() - at) },
        'webhook worker: a delivery claimed ahead waited too long for a slot; it goes out once its lease runs out',
      );
    }
  }

  function release(accountId: string): void {
    // An account that held its whole share may have more due that a claim skipped: claim again.
    if (full.delete(accountId)) again = true;
    if (--heldByAccount[accountId]! === 0) delete heldByAccount[accountId];
  }

  function settleIfIdle(): void {
    if (claiming !== null || inFlight.size > 0 || recording.size > 0 || ahead.length > 0) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  function whenIdle(): Promise<void> {
    const idle = new Promise<void>((resolve) => idleWaiters.push(resolve));
    settleIfIdle();
    return idle;
  }

  function fill(): void {
    timers.clearTimeout(refillTimer);
    refillTimer = undefined;
    if (stopped) return;
    if (claiming !== null) {
      again = true;
      return;
    }
    const limit = free();
    if (limit <= 0) {
      again = true;
      return;
    }
    again = false;
    claiming = claimAndStart(limit).finally(() => {
      claiming = null;
      refill();
      settleIfIdle();
    });
  }

  /**
   * With a backlog, freed slots are refilled together: a claim is made once nothing is in flight or
   * claimed ahead, or once a slot's worth of room is free after a claim that took all it asked for,
   * or once the first freed room has waited as long as two claims take (at least 1 ms, at most
   * `REFILL_WAIT_MS`), whichever comes first. Most of a claim's cost does not depend on its size, so
   * claims that take more deliveries each cost less CPU a delivery. A wait bound by the claims' own
   * duration keeps a store whose claims cost nothing (memory) claiming almost as slots free, where a
   * fixed wait cost it deliveries/s (bench row "webhook fleet"; the figures in docs/performance.md,
   * "Refilling the slots together").
   */
  function refill(): void {
    if (!again || stopped || claiming !== null) return;
    if (inFlight.size + ahead.length === 0 || (filledLast && free() >= concurrency)) return fill();
    if (refillTimer !== undefined || free() <= 0) return;
    refillTimer = timers.setTimeout(fill, Math.min(REFILL_WAIT_MS, Math.max(1, REFILL_WAIT_CLAIMS * claimMs)));
  }

  async function claimAndStart(limit: number): Promise<void> {
    const now = clock();
    const held: Record<string, number> = { ...heldByAccount };
    let claimed: ClaimedDelivery[];
    try {
      const started = timers.now();
      claimed = await storage.claimDeliveries({
        now: atom(now),
        leaseUntil: atom(new Date(now.getTime() + leaseMs)),
        limit,
        owner,
        perAccount: { max: perAccount, inFlight: held },
      });
      claimMs = 0.7 * claimMs + 0.3 * (timers.now() - started);
    } catch (error) {
      again = false;
      logger.error({ err: errorMessage(error) }, 'webhook worker: claiming due deliveries failed');
      return;
    }
    // Claimed deliveries are leased to us: they go out even when stop() came meanwhile, and stop() waits.
    const at = timers.now();
    for (const delivery of claimed) {
      heldByAccount[delivery.delivery.accountId] = (heldByAccount[delivery.delivery.accountId] ?? 0) + 1;
      ahead.push({ claimed: delivery, at });
    }
    startAhead();
    filledLast = claimed.length === limit;
    if (filledLast) again = true;
    const leased = new Map<string, number>();
    for (const { delivery } of claimed) leased.set(delivery.accountId, (leased.get(delivery.accountId) ?? 0) + 1);
    full.clear();
    for (const account of new Set([...Object.keys(held), ...leased.keys()])) {
      if ((held[account] ?? 0) + (leased.get(account) ?? 0) < perAccount) continue;
      // Its calls all ended while the claim ran: nothing of its would ask again, so ask now.
      if (heldByAccount[account] === undefined) again = true;
      else full.add(account);
    }
  }

  function startCall(claimed: ClaimedDelivery): void {
    const { accountId } = claimed.delivery;
    const call: Promise<void> = makeCall(claimed)
      .then((made) => startRecord(claimed, made))
      .catch((error) =>
        logger.error(
          { deliveryId: claimed.delivery.id, err: errorMessage(error) },
          'webhook worker: making a call failed',
        ),
      )
      .finally(() => {
        inFlight.delete(call);
        release(accountId);
        startAhead();
        refill();
        settleIfIdle();
      });
    inFlight.add(call);
  }

  function startRecord(claimed: ClaimedDelivery, made: MadeCall): void {
    const record: Promise<void> = recordCall(claimed, made)
      .catch((error) =>
        logger.error(
          { deliveryId: claimed.delivery.id, err: errorMessage(error) },
          'webhook worker: recording an attempt failed',
        ),
      )
      .finally(() => {
        recording.delete(record);
        startAhead();
        refill();
        settleIfIdle();
      });
    recording.add(record);
  }

  /** Sends, but never waits past the deadline, whatever the transport does. */
  async function send(call: WebhookCall): Promise<WebhookCallResult> {
    let timer: unknown;
    const cutOff = new Promise<WebhookCallResult>((resolve) => {
      timer = timers.setTimeout(
        () => resolve({ statusCode: null, headers: {}, error: `timed out after ${timeoutMs} ms` }),
        timeoutMs + TRANSPORT_GRACE_MS,
      );
    });
    const sent = transport
      .send(call, { timeoutMs })
      .catch((error: unknown) => ({ statusCode: null, headers: {}, error: errorMessage(error) }));
    try {
      return await Promise.race([sent, cutOff]);
    } finally {
      timers.clearTimeout(timer);
    }
  }

  interface MadeCall {
    at: Date;
    result: WebhookCallResult;
    durationMs: number;
  }

  /** Builds, signs and sends the call; resolves its outcome, whatever it was. */
  async function makeCall({ delivery, event, webhook }: ClaimedDelivery): Promise<MadeCall> {
    const at = clock();
    const observed = telemetry.call({
      url: webhook.url,
      attempt: delivery.attemptCount + 1,
      webhookId: webhook.id,
      deliveryId: delivery.id,
      eventType: event.type,
    });
    const started = timers.now();
    let result: WebhookCallResult;
    try {
      let body = bodies.get(event.id);
      if (body === undefined) bodies.set(event.id, (body = callBody(event)));
      result = await send(buildCall(webhook, event, at, body));
    } catch (error) {
      // A record the call cannot be built from (a secret that is not base64, say): an attempt that failed.
      result = { statusCode: null, headers: {}, error: `the call could not be made: ${errorMessage(error)}` };
    }
    const durationMs = Math.round(timers.now() - started);
    observed.end(callOutcome(result), result.statusCode, result.error, durationMs);
    return { at, result, durationMs };
  }

  async function recordCall(
    { delivery, event, webhook }: ClaimedDelivery,
    { at, result, durationMs }: MadeCall,
  ): Promise<void> {
    const { statusCode } = result;
    const redirected = result.error === null && statusCode !== null && statusCode >= 300 && statusCode < 400;
    const local = result.local === true && statusCode === null;
    const attempt: DeliveryAttempt = {
      at: atom(at),
      statusCode,
      error: redirected ? 'redirect not followed' : result.error,
      durationMs,
    };
    if (local) attempt.local = true;
    // A call that never left (the egress proxy failed) is the operator's: it costs the webhook no
    // health and the delivery no retry; it comes again at the schedule's first step.
    const previous = local ? 0 : attemptsInRun(delivery.attempts, retrySchedule.length);
    const outcome = outcomeOf(result, previous, retrySchedule, clock(), random);
    const recorded = await storage.recordAttempt(
      delivery.id,
      owner,
      attempt,
      outcome,
      local ? undefined : health,
      delivery,
    );
    // A redeliver was queued during the call (the delivery is due again), or its key's turn ended
    // (the next of the key is due): this worker claims again (startRecord's refill) rather than
    // leaving it to the next tick.
    if (recorded === 'due-again' || (recorded !== false && endsTurn({ ...delivery, status: outcome.status })))
      again = true;
    telemetry.delivery(
      recorded === false
        ? 'not-recorded'
        : recorded === 'due-again'
          ? 'redelivered'
          : outcome.status === 'succeeded'
            ? 'delivered'
            : outcome.status === 'failed'
              ? 'exhausted'
              : 'retrying',
    );
    if (recorded !== false) {
      try {
        report({ delivery, event, webhook }, attempt, outcome, recorded);
      } catch (error) {
        logger.error(
          { deliveryId: delivery.id, err: errorMessage(error) },
          'webhook worker: reporting an operational event failed',
        );
      }
    }
    logger.info(
      {
        deliveryId: delivery.id,
        webhookId: webhook.id,
        eventId: event.id,
        eventType: event.type,
        attempt: delivery.attemptCount + 1,
        statusCode,
        error: attempt.error,
        durationMs,
        status: recorded === 'due-again' ? 'pending (redelivered)' : recorded ? outcome.status : 'not recorded',
        nextAttemptAt: recorded === 'due-again' ? 'now' : outcome.nextAttemptAt,
      },
      recorded ? 'webhook attempt' : 'webhook attempt not recorded: the lease was lost or the delivery cancelled',
    );
    if (local) {
      logger.warn(
        { deliveryId: delivery.id, webhookId: webhook.id, error: attempt.error },
        'webhook call did not leave: the egress proxy failed; retried, and not charged to the webhook',
      );
    }
  }

  /**
   * Tells the host what this recorded attempt changed. Only the worker whose write recorded it gets
   * here (the lease makes that one), so each event is emitted once across instances.
   */
  function report(
    { delivery, event }: ClaimedDelivery,
    attempt: DeliveryAttempt,
    outcome: Outcome,
    recorded: true | string,
  ): void {
    const base = {
      accountId: delivery.accountId,
      webhookId: delivery.webhookId,
      deliveryId: delivery.id,
      at: attempt.at,
    };
    if (recorded === 'gone' || recorded === 'failing') emit({ ...base, type: 'webhook.disabled', reason: recorded });
    // With a redeliver queued during the call the delivery goes on: a failure is not its end.
    if (outcome.status === 'failed' && recorded !== 'due-again') {
      emit({
        ...base,
        type: 'delivery.exhausted',
        reason: attempt.statusCode === 410 ? 'gone' : 'retries-exhausted',
        eventId: event.id,
        attempts: delivery.attemptCount + 1,
        statusCode: attempt.statusCode,
        error: attempt.error,
      });
    } else if (outcome.status === 'succeeded') {
      // The failures that came right before this success (those the log still holds).
      let failedAttempts = 0;
      for (let i = delivery.attempts.length - 1; i >= 0 && !attemptSucceeded(delivery.attempts[i]!); i--)
        failedAttempts++;
      if (failedAttempts > 0)
        emit({
          ...base,
          type: 'delivery.recovered',
          reason: 'succeeded-after-failures',
          eventId: event.id,
          failedAttempts,
        });
    }
  }

  let housekeeping: Promise<void> | undefined;
  /** One run of `options.housekeeping` at a time; a failure is logged, the next tick tries again. */
  function houseKeep(): Promise<void> {
    if (options.housekeeping === undefined || stopped) return Promise.resolve();
    housekeeping ??= options
      .housekeeping()
      .catch((error: unknown) =>
        logger.error({ worker: owner, err: errorMessage(error) }, "webhook worker: the tick's other work failed"),
      )
      .finally(() => (housekeeping = undefined));
    return housekeeping;
  }

  return {
    owner,
    get running() {
      return task !== undefined && !stopped;
    },
    start() {
      if (stopped || task !== undefined) return;
      task = cron.createTask(
        options.tick,
        () => {
          fill();
          void houseKeep();
        },
        {
          name: `customer-portal webhooks ${owner}`,
          unref: true,
          suppressMissedWarning: true,
          logger: {
            info: () => {},
            debug: () => {},
            warn: (message) => logger.warn({ worker: owner }, `webhook worker cron: ${message}`),
            error: (message, error) =>
              logger.error({ worker: owner, err: errorMessage(error ?? message) }, 'webhook worker cron failed'),
          },
        },
      );
      task.start();
      // Deliveries that fell due while no worker ran (a restart) go out now, not at the first tick.
      fill();
    },
    async stop() {
      stopped = true;
      timers.clearTimeout(refillTimer);
      await task?.destroy();
      task = undefined;
      await housekeeping;
      while (claiming !== null || inFlight.size > 0 || recording.size > 0 || ahead.length > 0) {
        await claiming;
        await Promise.allSettled([...inFlight, ...recording]);
      }
    },
    async tick() {
      await houseKeep();
      fill();
      return whenIdle();
    },
    poke() {
      // With a backlog the next claim is on its way, and takes the new deliveries in their turn.
      if (again) refill();
      else fill();
    },
  };
}
