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

/** Seconds from `from` to the ATOM `to`. */
export const secondsBetween = (from: Date, to: string) => (Date.parse(to) - from.getTime()) / 1000;

/** Polls `check` until it holds; for what happens at once but not synchronously (the first attempt after publish). */
export async function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 3000): Promise<void> {
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
