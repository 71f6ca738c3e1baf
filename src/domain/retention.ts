import type { RetentionOptions } from '../options.js';
import type { Storage } from '../ports.js';
import type { Logger } from '../shared/logger.js';
import type { Telemetry } from '../shared/telemetry.js';
import { atom } from '../shared/time.js';

const DEFAULT_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;
/** The shortest retention: a minute. */
const MIN_RETENTION_MS = 60_000;
/** Records one batch removes at most: a transaction a store writes at once, a short lock. */
const RETENTION_BATCH = 500;
/** Batches one tick runs at most; a tick whose batches all came back full leaves the rest to the next. */
const RETENTION_BATCHES_PER_TICK = 20;
/** A generation of a store that removes whole ones (`rotateHistory`): an eighth of the shorter retention, from a minute to a day. */
const GENERATIONS_PER_RETENTION = 8;
const GENERATION_SPAN_MS = { min: 60_000, max: 24 * 60 * 60 * 1000 };

/**
 * How long a generation spans, for the retention in force: `Infinity` (never a new one) when
 * nothing is ever removed. A finished delivery is kept at most about this much longer than its
 * retention (an event, as long as its generation's deliveries); a store holds about
 * `retention / span` generations (30 days: 31 of a day).
 */
export function generationSpan({ eventsMs, deliveriesMs }: Required<RetentionOptions>): number {
  const shorter = Math.min(eventsMs, deliveriesMs);
  if (shorter === Infinity) return Infinity;
  return Math.min(
    GENERATION_SPAN_MS.max,
    Math.max(GENERATION_SPAN_MS.min, Math.floor(shorter / GENERATIONS_PER_RETENTION)),
  );
}

/** The retention in force, checked: each a whole number of milliseconds, at least a minute, or `Infinity`. */
export function resolveRetention(options: RetentionOptions | undefined): Required<RetentionOptions> {
  if (options !== undefined && (typeof options !== 'object' || options === null))
    throw new TypeError('retention must be an object such as { eventsMs, deliveriesMs }');
  const read = (name: keyof RetentionOptions): number => {
    const value = options?.[name] ?? DEFAULT_RETENTION_MS;
    if (value === Infinity || (Number.isSafeInteger(value) && value >= MIN_RETENTION_MS)) return value;
    throw new TypeError(
      `retention.${name} must be a whole number of milliseconds, at least ${MIN_RETENTION_MS} (a minute), or Infinity`,
    );
  };
  return { eventsMs: read('eventsMs'), deliveriesMs: read('deliveriesMs') };
}

/**
 * What the worker's tick does for retention: removes finished deliveries and events past their
 * time, in batches of `RETENTION_BATCH`, oldest first, off the request path (`Storage.removeExpired`);
 * a store that removes whole generations starts the next one first (`Storage.rotateHistory`).
 * A pending delivery is never removed, nor an event a delivery still names. Instances that tick at
 * once share the work: a store removes each record once.
 */
export function createRetention(deps: {
  storage: Storage;
  clock: () => Date;
  logger: Logger;
  retention: Required<RetentionOptions>;
  telemetry?: Telemetry;
}) {
  const { eventsMs, deliveriesMs } = deps.retention;
  const span = generationSpan(deps.retention);
  const cutoff = (now: number, ms: number) => (ms === Infinity ? null : atom(new Date(now - ms)));
  return async function tick(): Promise<{ deliveries: number; events: number }> {
    const removed = { deliveries: 0, events: 0 };
    const now = deps.clock().getTime();
    if (span !== Infinity) await deps.storage.rotateHistory?.(atom(new Date(now)), span);
    const before = { deliveries: cutoff(now, deliveriesMs), events: cutoff(now, eventsMs) };
    for (let batch = 0; batch < RETENTION_BATCHES_PER_TICK; batch++) {
      const gone = await deps.storage.removeExpired(before, RETENTION_BATCH);
      removed.deliveries += gone.deliveries;
      removed.events += gone.events;
      deps.telemetry?.removed('deliveries', gone.deliveries);
      deps.telemetry?.removed('events', gone.events);
      if (gone.deliveries < RETENTION_BATCH && gone.events < RETENTION_BATCH) break;
      // Between batches, the requests and calls waiting for the event loop go first.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (removed.deliveries + removed.events > 0)
      deps.logger.debug(removed, 'retention: removed finished deliveries and events past their time');
    return removed;
  };
}
