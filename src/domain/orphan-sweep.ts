import cron, { type ScheduledTask } from 'node-cron';
import { describeError } from '../errors.js';
import type { Logger } from '../shared/logger.js';
import type { BlobStore, Storage } from '../ports.js';
import { atom } from '../shared/time.js';

/** A blob younger than this may belong to an upload whose record is still being written. */
export const ORPHAN_MIN_AGE_MS = 60 * 60 * 1000;
/** node-cron, with seconds: every ten minutes. */
export const ORPHAN_SWEEP_SCHEDULE = '0 */10 * * * *';

export interface OrphanSweep {
  /** Schedules `tick` (idempotent). The timer does not keep the process alive. */
  start(): void;
  /** Stops the schedule and waits for a running tick to end. */
  stop(): Promise<void>;
  /** Removes every blob older than an hour that no record names; resolves the keys removed. */
  tick(): Promise<string[]>;
}

/**
 * Bytes are written before the record that names them, so a crash (or a lost adapter call)
 * between the two leaves a blob nobody can reach. This sweep finds such blobs by age and removes them.
 */
export function createOrphanSweep(deps: {
  storage: Storage;
  blobs: BlobStore;
  clock: () => Date;
  logger: Logger;
  schedule?: string;
}): OrphanSweep {
  const { storage, blobs, clock, logger } = deps;
  let task: ScheduledTask | undefined;
  let running: Promise<string[]> | undefined;

  async function sweep(): Promise<string[]> {
    const before = atom(new Date(clock().getTime() - ORPHAN_MIN_AGE_MS));
    const removed: string[] = [];
    for await (const blob of blobs.listBefore(before)) {
      if (await storage.isBlobReferenced(blob.key)) continue;
      if (await blobs.delete(blob.key)) removed.push(blob.key);
    }
    if (removed.length > 0) logger.info({ removed: removed.length }, 'orphan sweep removed blobs no record names');
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
