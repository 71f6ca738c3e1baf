import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import cron, { type ScheduledTask } from 'node-cron';
import { errorMessage } from '../errors.js';
import type { Logger } from '../shared/logger.js';
import { noTelemetry, type CallOutcome, type Telemetry } from '../shared/telemetry.js';
import type { AttemptRecorded, Storage, WebhookCall, WebhookCallResult, WebhookTransport } from '../ports.js';
import type { ClaimedDelivery, DeliveryAttempt } from '../records.js';
import { atom, atomAtLeast } from '../shared/time.js';
import { buildCall, callBody } from './call.js';
import { endsTurn } from '../rules/deliveries.js';
import { attemptsInRun, holdOf, outcomeOf, type Outcome } from '../rules/retry-schedule.js';
import { StartWindow } from './start-window.js';
import { InFlightLimits } from './in-flight-limits.js';
import type { Load } from '../rules/in-flight.js';
import { LocalQueue, realTimers, type WorkerTimers } from './local-queue.js';
import { DEFAULT_DISABLE_AFTER_FAILURES, DEFAULT_DISABLE_AFTER_MS, attemptSucceeded } from '../rules/webhook-health.js';
import type { OperationalEvent } from '../domain/operational-events.js';

/**
 * A claim's lease outlasts the call by this much: the call itself is bounded by `timeoutMs`, and
 * the margin covers recording the attempt and a slow storage round trip. A worker that dies holds
 * its deliveries at most `timeoutMs` + 60 s; then any worker takes them again.
 */
export const LEASE_MARGIN_MS = 60_000;
/**
 * The serialized event bodies a worker keeps for the next calls of the same events: the latest
 * BODY_CACHE_EVENTS events, at most BODY_CACHE_CHARS characters. An event's deliveries to its
 * webhooks are claimed together or one claim after another, so the latest events are the ones
 * called again. Kept for longer, a body outlives the young generation's collections: with 32 MiB
 * of them the worker's scavenges copied every body it had sent in the last seconds and took
 * 11–42 ms, each a pause in every call (bench row "webhook fleet", lag p99 paced).
 */
const BODY_CACHE_EVENTS = 256;
const BODY_CACHE_CHARS = 4 * 1024 * 1024;
/** A claim for what falls due at a time (a second's slots, a hold's end) comes this long after it (timer lag). */
const WAKE_SLACK_MS = 5;
/** Times to claim again kept at most (`claimAt`): holds last an hour at most, at whole seconds. */
const MAX_WAKES = 3600;
/** A transport that ignores its deadline is cut off this long after it: the worker never hangs on one. */
const TRANSPORT_GRACE_MS = 1_000;
/**
 * A delivery claimed ahead waits for a slot at most this long; one that waited longer is not called,
 * since its call might outlast its lease (`timeoutMs` + 60 s from the claim). It is given back to
 * the store (`giveBackDeliveries`), claimable at once; a store without that keeps it leased until
 * the lease runs out.
 */
const AHEAD_WAIT_LIMIT_MS = LEASE_MARGIN_MS / 2;

export { REFILL_WAIT_MS, type WorkerTimers } from './local-queue.js';

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
  /** Adapt each webhook's calls in flight to its receiver (`rules/in-flight.ts`; default `true`). */
  adaptCallsInFlight?: boolean;
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

/** How a call went, for telemetry: a 2xx or a broker's acknowledgement, another status, no answer in time, or none at all. */
function callOutcome(result: WebhookCallResult): CallOutcome {
  if (attemptSucceeded(result)) return 'success';
  if (result.statusCode !== null) return 'failure';
  // A destination's errors start with its name (`amqp: timed out after …`).
  return /^(\w+: )?timed out/.test(result.error ?? '') ? 'timeout' : 'error';
}

/**
 * What a call's answer says of its receiver's load (`rules/in-flight.ts`): a `429`, a `503`, a
 * timeout or no answer at all is overload; a call that never left the portal says nothing.
 */
function loadOf(result: WebhookCallResult): Load {
  if (result.local === true) return 'other';
  if (attemptSucceeded(result)) return 'ok';
  if (result.statusCode === null || result.statusCode === 429 || result.statusCode === 503) return 'overloaded';
  return 'other';
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
  const adaptive = options.adaptCallsInFlight ?? true;
  const health = {
    disableAfterMs: options.disableAfterMs ?? DEFAULT_DISABLE_AFTER_MS,
    disableAfterFailures: options.disableAfterFailures ?? DEFAULT_DISABLE_AFTER_FAILURES,
  };
  const emit = options.emit ?? (() => {});
  const telemetry = options.telemetry ?? noTelemetry;
  const timers = options.timers ?? realTimers;

  /**
   * Each recent event's body, serialized once for all its deliveries (an event fans out to every
   * webhook of its type): bounded by count and size, so a burst of large events cannot hold memory.
   */
  const bodies = new LRUCache<string, string>({
    max: BODY_CACHE_EVENTS,
    maxSize: BODY_CACHE_CHARS,
    sizeCalculation: (body) => Math.max(1, body.length),
  });

  let task: ScheduledTask | undefined;
  let stopped = false;

  /** Claims due deliveries for this worker, leased for a call's deadline and `LEASE_MARGIN_MS`. */
  async function claim(limit: number, held: Readonly<Record<string, number>>): Promise<ClaimedDelivery[]> {
    const now = clock();
    const claimed = await storage.claimDeliveries({
      now: atom(now),
      leaseUntil: atom(new Date(now.getTime() + leaseMs)),
      limit,
      owner,
      perAccount: { max: perAccount, inFlight: held },
      ...(adaptive ? { fullWebhooks: passOver() } : {}),
    });
    // A rate-limited webhook's next deliveries are due as a later second begins (their slots).
    if (claimed.some(({ webhook }) => webhook.rateLimit !== undefined))
      claimAt(Math.floor(now.getTime() / 1000) * 1000 + 1000);
    return claimed;
  }

  /**
   * Claims again at `at` (epoch ms, the portal's clock), when deliveries this worker knows of fall
   * due: a rate-limited webhook's next second, the end of a hold. Rather than leave them to the
   * tick (every 5 s by default): a webhook held for a second by `Retry-After: 1` waited five. Only
   * while running (tests drive `tick()` themselves); one timer, for the earliest time asked, and the
   * later times kept for it to set again (a hold that ends after another's must not wait for the tick).
   */
  let wake: { at: number; timer: unknown } | undefined;
  const wakeAt = new Set<number>();
  function claimAt(at: number): void {
    if (task === undefined || stopped) return;
    // Times are whole seconds (holds, slots): the set holds a few, bounded by the seconds of an hour.
    if (wakeAt.size < MAX_WAKES) wakeAt.add(at);
    if (wake !== undefined && wake.at <= at) return;
    if (wake !== undefined) timers.clearTimeout(wake.timer);
    const timer = timers.setTimeout(
      () => {
        wake = undefined;
        const now = clock().getTime();
        let next = Number.POSITIVE_INFINITY;
        for (const time of wakeAt) {
          if (time <= now) wakeAt.delete(time);
          else next = Math.min(next, time);
        }
        queue.fill();
        if (next !== Number.POSITIVE_INFINITY) claimAt(next);
      },
      Math.max(0, at - clock().getTime()) + WAKE_SLACK_MS,
    );
    wake = { at, timer };
  }

  /**
   * Each webhook's calls in flight on this worker, within a limit that follows what its receiver
   * takes; a change is kept in its health for the API to show (the latest value, one write at a
   * time per webhook; a failed write is logged and left to the next change).
   */
  const limits = new InFlightLimits(perAccount);
  /**
   * Webhooks the latest claim passed over at their limit, until one of their calls ends with none
   * of theirs claimed ahead. Each claim starts the set again: one that did not pass a webhook over
   * could lease its deliveries. So it holds at most the webhooks with calls in flight.
   */
  const passedOver = new Set<string>();
  function passOver(): string[] {
    const full = limits.full();
    passedOver.clear();
    for (const id of full) passedOver.add(id);
    return full;
  }
  const sharing = new Map<string, number | null>();
  async function share(webhookId: string, limit: number): Promise<void> {
    const busy = sharing.has(webhookId);
    sharing.set(webhookId, limit >= perAccount ? null : limit);
    if (busy) return;
    while (sharing.has(webhookId)) {
      const value = sharing.get(webhookId)!;
      try {
        await storage.setInFlightLimit(webhookId, value);
      } catch (error) {
        logger.warn(
          { webhookId, err: errorMessage(error) },
          'webhook worker: keeping a limit of calls in flight failed',
        );
      }
      if (sharing.get(webhookId) === value) sharing.delete(webhookId);
    }
  }

  /** Sends, but never waits past the deadline, whatever the transport does. */
  async function send(call: WebhookCall): Promise<WebhookCallResult> {
    let timer: unknown;
    // Told to the transport when the worker stops waiting for it: a call it let run past its
    // deadline is then ended, not left holding a socket.
    const abandoned = new AbortController();
    const cutOff = new Promise<WebhookCallResult>((resolve) => {
      timer = timers.setTimeout(() => {
        abandoned.abort();
        resolve({ statusCode: null, headers: {}, error: `timed out after ${timeoutMs} ms` });
      }, timeoutMs + TRANSPORT_GRACE_MS);
    });
    const sent = transport
      .send(call, { timeoutMs, signal: abandoned.signal })
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
    /** Its receiver is down (overload at one call in flight): the webhook pauses this long. */
    pauseMs: number | null;
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
    const ended = timers.now();
    const durationMs = Math.round(ended - started);
    observed.end(callOutcome(result), result.statusCode, result.error, durationMs);
    if (!adaptive) return { at, result, durationMs, pauseMs: null };
    const { limit, changed, pauseMs } = limits.ended(webhook.id, loadOf(result), started, ended);
    if (changed) void share(webhook.id, limit);
    // A claim passed its deliveries over while it was full: the next one may take them, once none
    // of its own claimed ahead is left to take the room first (a claim would find it full again).
    if (passedOver.has(webhook.id) && !queue.hasAhead(webhook.id)) {
      passedOver.delete(webhook.id);
      queue.mayHaveMore();
    }
    return { at, result, durationMs, pauseMs };
  }

  /** Records the attempt, reports what it changed; `true` when more may be due for this worker. */
  async function recordCall(
    { delivery, event, webhook }: ClaimedDelivery,
    { at, result, durationMs, pauseMs }: MadeCall,
  ): Promise<boolean> {
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
    // Waits (a hold, a pause, a retry) count from the answer, not from now: a record that waited
    // for a busy process must not lengthen them. The answer's time is the call's start plus its
    // duration, never after now (a clock that stands still, as a test's, reads the same).
    const answered = new Date(Math.min(clock().getTime(), at.getTime() + durationMs));
    // The receiver asked its calls to wait (429 or 503 with Retry-After): until then, none of its
    // webhook's deliveries is sent, this one included.
    const asked = holdOf(result, answered);
    if (asked !== null) attempt.held = true;
    // Or it is down (overload at one call in flight): its calls pause before the next try. This
    // attempt is a failure like any other, and its delivery retries on schedule.
    const hold = asked ?? (pauseMs === null ? null : atomAtLeast(answered, pauseMs));
    if (hold !== null) {
      holdLocally(webhook.id, Date.parse(hold));
      claimAt(Date.parse(hold));
    }
    // A call that never left (the egress proxy failed) is the operator's, and one the receiver held
    // is no failure: neither costs the webhook health nor the delivery a retry; the first comes
    // again at the schedule's first step, the second when the hold ends.
    const previous = local ? 0 : attemptsInRun(delivery.attempts, retrySchedule.length);
    const outcome = outcomeOf(result, previous, retrySchedule, answered, random);
    const recorded = await storage.recordAttempt({
      id: delivery.id,
      owner,
      attempt,
      outcome,
      ...(local || asked !== null ? {} : { health }),
      ...(hold === null ? {} : { hold }),
    });
    // A redeliver queued during the call left the delivery due again, unless this write disabled
    // its webhook: then the next claim cancels it, and the attempt's outcome is what counts.
    const redelivered = recorded.dueAgain && recorded.disabled === null;
    // Enabled again, its calls start slowly.
    if (recorded.disabled !== null) limits.disabled(webhook.id);
    // Redelivered, or its key's turn ended (the next of the key is due).
    const moreDue = redelivered || (recorded.recorded && endsTurn({ ...delivery, status: outcome.status }));
    telemetry.delivery(
      !recorded.recorded
        ? 'not-recorded'
        : redelivered
          ? 'redelivered'
          : asked !== null
            ? 'held'
            : outcome.status === 'succeeded'
              ? 'delivered'
              : outcome.status === 'failed'
                ? 'exhausted'
                : 'retrying',
    );
    if (recorded.recorded) {
      try {
        report({ delivery, event, webhook }, attempt, outcome, recorded.disabled, redelivered);
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
        status: !recorded.recorded ? 'not recorded' : redelivered ? 'pending (redelivered)' : outcome.status,
        nextAttemptAt: redelivered ? 'now' : outcome.nextAttemptAt,
      },
      recorded.recorded
        ? 'webhook attempt'
        : 'webhook attempt not recorded: the lease was lost or the delivery cancelled',
    );
    if (local) {
      logger.warn(
        { deliveryId: delivery.id, webhookId: webhook.id, error: attempt.error },
        'webhook call did not leave: the egress proxy failed; retried, and not charged to the webhook',
      );
    }
    return moreDue;
  }

  /**
   * Tells the host what this recorded attempt changed. Only the worker whose write recorded it gets
   * here (the lease makes that one), so each event is emitted once across instances.
   */
  function report(
    { delivery, event }: ClaimedDelivery,
    attempt: DeliveryAttempt,
    outcome: Outcome,
    disabled: AttemptRecorded['disabled'],
    redelivered: boolean,
  ): void {
    const base = {
      accountId: delivery.accountId,
      webhookId: delivery.webhookId,
      deliveryId: delivery.id,
      at: attempt.at,
    };
    if (disabled !== null) emit({ ...base, type: 'webhook.disabled', reason: disabled });
    // With a redeliver queued during the call the delivery goes on: a failure is not its end.
    if (outcome.status === 'failed' && !redelivered) {
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

  // Each rate-limited webhook's calls start no faster than its limit, on this worker too; and no
  // more of a webhook's are in flight than it takes (until one of its calls ends).
  const window = new StartWindow();
  const heldBack = new WeakSet<ClaimedDelivery>();
  /**
   * The holds this worker recorded (`Retry-After`, or a receiver down), until when by the portal's
   * clock (epoch ms): the deliveries it claimed ahead of them wait too, not only those a claim would
   * defer.
   */
  const held = new Map<string, number>();
  function holdLocally(webhookId: string, until: number): void {
    // Those ended are dropped once there are many: what is kept is the webhooks held now.
    if (held.size >= 1024) {
      const now = clock().getTime();
      for (const [id, end] of held) if (end <= now) held.delete(id);
    }
    if ((held.get(webhookId) ?? 0) < until) held.set(webhookId, until);
  }
  const gate = (claimed: ClaimedDelivery, now: number): number => {
    const { webhook } = claimed;
    const holdEnds = held.get(webhook.id);
    if (holdEnds !== undefined) {
      const left = holdEnds - clock().getTime();
      if (left > 0) return left;
      held.delete(webhook.id);
    }
    const full = adaptive && !limits.hasRoom(webhook.id);
    const wait = full
      ? Number.POSITIVE_INFINITY
      : webhook.rateLimit === undefined
        ? 0
        : window.wait(webhook.id, webhook.rateLimit, now);
    if (wait > 0 && !heldBack.has(claimed)) {
      heldBack.add(claimed);
      telemetry.limited(full ? 'in-flight' : 'rate');
    }
    return wait;
  };
  /** The scheduler: when to claim, when each claimed delivery is called and recorded. */
  const queue = new LocalQueue<MadeCall>({
    concurrency,
    perAccount,
    aheadWaitLimitMs: AHEAD_WAIT_LIMIT_MS,
    timers,
    logger,
    claim,
    call: makeCall,
    record: recordCall,
    gate,
    started: ({ webhook }, now) => {
      if (adaptive) limits.started(webhook.id);
      if (webhook.rateLimit !== undefined) window.started(webhook.id, webhook.rateLimit, now);
    },
    giveBack,
  });

  /**
   * Deliveries claimed ahead that waited too long (their webhook held through an outage, say):
   * given back, so that they go when a claim next takes them, not once their lease runs out.
   */
  function giveBack(expired: ClaimedDelivery[]): void {
    if (storage.giveBackDeliveries === undefined) return;
    const ids = expired.map(({ delivery }) => delivery.id);
    const giving: Promise<void> = storage
      .giveBackDeliveries(owner, ids)
      .then(
        () => queue.fill(),
        (error) =>
          logger.error(
            { worker: owner, deliveries: ids.length, err: errorMessage(error) },
            'webhook worker: giving back deliveries failed; they wait for their leases to run out',
          ),
      )
      .finally(() => givingBack.delete(giving));
    givingBack.add(giving);
  }
  /** Give-backs on their way: `stop()` waits for them, so that the store is not closed under one. */
  const givingBack = new Set<Promise<void>>();

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
          queue.fill();
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
      queue.fill();
    },
    async stop() {
      stopped = true;
      if (wake !== undefined) timers.clearTimeout(wake.timer);
      wakeAt.clear();
      const draining = queue.drain();
      await task?.destroy();
      task = undefined;
      await housekeeping;
      await draining;
      await Promise.all(givingBack);
    },
    async tick() {
      await houseKeep();
      queue.fill();
      return queue.whenIdle();
    },
    poke() {
      // With a backlog the next claim is on its way, and takes the new deliveries in their turn.
      if (queue.backlogged) queue.refill();
      else queue.fill();
    },
  };
}
