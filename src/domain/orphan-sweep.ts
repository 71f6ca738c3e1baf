import cron, { type ScheduledTask } from 'node-cron';
import { describeError } from '../errors.js';
import type { Logger } from '../shared/logger.js';
import type { BlobInfo, BlobStore, Storage } from '../ports.js';
import { atom } from '../shared/time.js';

/** A blob younger than this may belong to an upload whose record is still being written. */
const ORPHAN_MIN_AGE_MS = 60 * 60 * 1000;
/** node-cron, with seconds: every ten minutes. */
const ORPHAN_SWEEP_SCHEDULE = '0 */10 * * * *';
/** Blobs looked at, at most, by one run; a walk over more goes on at the next run. */
const ORPHAN_SWEEP_MAX_BLOBS = 10_000;
/** Blobs looked at between two yields to the event loop. */
const ORPHAN_SWEEP_PAGE = 100;

/** Lets timers and I/O run: the sweep's own awaits may all be resolved promises (memory adapters). */
const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

export interface OrphanSweep {
  /** Schedules `tick` (idempotent). The timer does not keep the process alive. */
  start(): void;
  /** Stops the schedule and waits for a running tick to end. */
  stop(): Promise<void>;
  /**
   * Looks at up to `maxBlobsPerRun` blobs older than an hour and removes those no record names;
   * resolves the keys removed. Removes up to as many expired idempotency keys and portal sessions first. A walk over more blobs than that goes on where it stopped at the
   * next tick; once it ends, the next tick starts a new one.
   */
  tick(): Promise<string[]>;
}

/**
 * Bytes are written before the record that names them, so a crash (or a lost adapter call)
 * between the two leaves a blob nobody can reach. This sweep finds such blobs by age and removes them.
 *
 * Its cost is bounded, whatever the store holds: it walks the blobs in pages of `pageSize`, yields
 * to the event loop between pages (so requests and timers go on meanwhile), and looks at no more
 * than `maxBlobsPerRun` blobs a run, keeping its place in the walk for the next run.
 */
export function createOrphanSweep(deps: {
  storage: Storage;
  blobs: BlobStore;
  clock: () => Date;
  logger: Logger;
  schedule?: string;
  /** Blobs looked at, at most, per run (default 10,000). */
  maxBlobsPerRun?: number;
  /** Blobs looked at between two yields to the event loop (default 100). */
  pageSize?: number;
}): OrphanSweep {
  const { storage, blobs, clock, logger } = deps;
  const maxBlobsPerRun = deps.maxBlobsPerRun ?? ORPHAN_SWEEP_MAX_BLOBS;
  const pageSize = deps.pageSize ?? ORPHAN_SWEEP_PAGE;
  let task: ScheduledTask | undefined;
  let running: Promise<string[]> | undefined;
  /** The walk a run left unfinished at its bound; the next run goes on with it. */
  let walk: AsyncIterator<BlobInfo> | undefined;

  async function endWalk(): Promise<void> {
    const ending = walk;
    walk = undefined;
    await ending?.return?.()?.catch(() => {});
  }

  /**
   * Expired idempotency keys and portal sessions go with the same run, up to as many as blobs. A
   * claim also takes over an expired key by itself, and an expired session is refused whether or
   * not it is still kept: a failure here is logged, and the blobs are swept all the same.
   */
  async function sweepExpired(what: string, remove: (now: string, limit: number) => Promise<number>): Promise<void> {
    try {
      const removed = await remove(atom(clock()), maxBlobsPerRun);
      if (removed > 0) logger.info({ removed }, `orphan sweep removed expired ${what}`);
    } catch (error) {
      logger.warn({ err: describeError(error) }, `orphan sweep could not remove expired ${what}`);
    }
  }

  async function sweep(): Promise<string[]> {
    await sweepExpired('idempotency keys', (now, limit) => storage.sweepIdempotencyKeys(now, limit));
    await sweepExpired('portal sessions', (now, limit) => storage.sweepPortalSessions(now, limit));
    // A blob older than an hour when the walk started is older still when a later run reaches it.
    walk ??= blobs.listBefore(atom(new Date(clock().getTime() - ORPHAN_MIN_AGE_MS)))[Symbol.asyncIterator]();
    const removed: string[] = [];
    let looked = 0;
    try {
      while (looked < maxBlobsPerRun) {
        const next = await walk.next();
        if (next.done === true) {
          walk = undefined;
          break;
        }
        looked++;
        const { key } = next.value;
        if (!(await storage.isBlobReferenced(key)) && (await blobs.delete(key))) removed.push(key);
        if (looked % pageSize === 0) await yieldToEventLoop();
      }
    } catch (error) {
      // The next run starts a new walk.
      await endWalk();
      throw error;
    }
    if (removed.length > 0)
      logger.info({ removed: removed.length, looked }, 'orphan sweep removed blobs no record names');
    return removed;
  }

  function tick(): Promise<string[]> {
    // One sweep at a time: a slow store must not have two walks deleting side by side.
    running ??= sweep().finally(() => (running = undefined));
    return running;
  }

  return {
    start() {
      if (task !== undefined) return;
      task = cron.createTask(
        deps.schedule ?? ORPHAN_SWEEP_SCHEDULE,
        () => tick().catch((error) => logger.error({ err: describeError(error) }, 'orphan sweep failed')),
        { name: 'customer-portal orphan sweep', noOverlap: true, unref: true, logger: cronLogger(logger) },
      );
      void task.start();
    },
    async stop() {
      const stopping = task;
      task = undefined;
      await stopping?.destroy();
      await running?.catch(() => {});
      await endWalk();
    },
    tick,
  };
}

/** node-cron writes to the console unless given a logger: route its lines to the portal's. */
function cronLogger(logger: Logger) {
  const text = (message: string | Error) => (message instanceof Error ? message.message : message);
  return {
    info: (message: string) => logger.debug({ source: 'node-cron' }, message),
    debug: (message: string | Error) => logger.debug({ source: 'node-cron' }, text(message)),
    warn: (message: string) => logger.warn({ source: 'node-cron' }, message),
    error: (message: string | Error, error?: Error) =>
      logger.error({ source: 'node-cron', err: error === undefined ? undefined : describeError(error) }, text(message)),
  };
}
