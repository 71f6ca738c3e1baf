import { KEY_A, KEY_B } from './server.js';
import { createPortal, type Portal, type PortalOptions } from '../../src/index.js';

/** A cron expression that does not fire while a test runs (midnight, January 1st): tests call `tick()` themselves. */
export const NEVER = '0 0 0 1 1 *';

/**
 * A clock the test moves by hand. It starts at the real time (whole seconds), so that receivers
 * verifying with the Standard Webhooks library, which checks timestamps against the real clock,
 * accept calls as long as a test moves it by less than their five-minute tolerance.
 */
export function manualClock(start = new Date(Math.floor(Date.now() / 1000) * 1000)) {
  let now = start;
  return {
    clock: () => now,
    get now() {
      return now;
    },
    advance(seconds: number) {
      now = new Date(now.getTime() + seconds * 1000);
    },
    /** Moves to an ATOM date-time (a delivery's `nextAttemptAt`, say). */
    to(atom: string) {
      now = new Date(atom);
    },
  };
}

/**
 * The worker scheduler's time (`WorkerTimers`), passing only when nothing else can run: a timer
 * waits in a list, and once the event loop has nothing left but timers (a `setImmediate` after the
 * pending promises), time jumps to the earliest and runs it. What the scheduler measures on it is
 * what it asked for, whatever the load on the machine. Timers set for `horizonMs` or later never
 * fire (a call's cut-off, say, while a test holds the call).
 */
export function fakeTimers({ horizonMs = Number.POSITIVE_INFINITY } = {}) {
  let now = 0;
  let last = 0;
  const pending = new Map<number, { at: number; run: () => void }>();
  let stepping = false;
  const step = () => {
    stepping = false;
    let next: [number, { at: number; run: () => void }] | undefined;
    for (const entry of pending)
      if (entry[1].at < horizonMs && (next === undefined || entry[1].at < next[1].at)) next = entry;
    if (next === undefined) return;
    pending.delete(next[0]);
    now = Math.max(now, next[1].at);
    next[1].run();
    schedule();
  };
  const schedule = () => {
    if (stepping) return;
    stepping = true;
    setImmediate(step);
  };
  const timers = {
    now: () => now,
    setTimeout(run: () => void, ms: number): unknown {
      pending.set(++last, { at: now + Math.max(0, ms), run });
      schedule();
      return last;
    },
    clearTimeout(handle: unknown) {
      pending.delete(handle as number);
    },
    /** Resolves after `ms` of this time. */
    sleep: (ms: number) => new Promise<void>((resolve) => timers.setTimeout(resolve, ms)),
  };
  return timers;
}

/** Seconds from `from` to the ATOM `to`. */
export const secondsBetween = (from: Date, to: string) => (Date.parse(to) - from.getTime()) / 1000;

/**
 * Polls `check` until it holds; for what happens at once but not synchronously (the first attempt
 * after publish). The bound only ends a test that would otherwise hang: a store under a machine busy
 * with other files took over 3 s to record a redelivery, so it is 10 s.
 */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A portal for webhook tests: account keys, a manual tick, and whatever `options` add. */
export function webhookPortal(options: PortalOptions = {}): Promise<Portal> {
  return createPortal({
    auth: { apiKeys: { [KEY_A]: 'acct_a', [KEY_B]: 'acct_b' } },
    ...options,
    webhooks: { tick: NEVER, ...options.webhooks },
  });
}

/** A promise with its resolve handle, to hold a call in flight until the test lets it go. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => (resolve = done));
  return { promise, resolve };
}
