import type { BlobStore, Storage } from '../ports.js';
import { errorMessage } from '../errors.js';
import { atom } from '../shared/time.js';

/** How long one check may take before it counts as failed. */
const READY_CHECK_TIMEOUT_MS = 2_000;
/** Deliveries `ready()` counts at most: the queue's figure is "at least" past it. */
const READY_QUEUE_LIMIT = 10_000;
/** A key of a record id's shape that no record has: what the blob store is asked about. */
const PROBE_KEY = 'rdy_probe';

/** One check of `portal.ready()`: whether it passed, how long it took, and why it failed. */
export interface CheckResult {
  ok: boolean;
  durationMs: number;
  /** The failure, in the store's or driver's words. */
  error?: string;
}

export interface WorkerCheck {
  /** `true` while the worker runs, or when this portal runs none (`webhooks.worker: false`). */
  ok: boolean;
  /** Whether this portal's worker is running. */
  running: boolean;
  /** Deliveries due and not taken by any worker, counted up to 10,000; `null` when the store cannot tell. */
  waiting: number | null;
  /** How long the earliest of them has been due, in ms: how far behind delivery is (0 when none waits). */
  lagMs: number | null;
}

/** What `portal.ready()` resolves: `ok` when every check passed. */
export interface Readiness {
  ok: boolean;
  checks: { storage: CheckResult; blobs: CheckResult; worker: WorkerCheck };
}

/** The queue of deliveries waiting at the clock's now; `null` for a store that cannot tell. */
export async function readQueue(storage: Storage, now: Date): Promise<{ waiting: number; lagMs: number } | null> {
  if (storage.deliveryQueue === undefined) return null;
  const { waiting, oldestDueAt } = await storage.deliveryQueue(atom(now), READY_QUEUE_LIMIT);
  return { waiting, lagMs: oldestDueAt === null ? 0 : Math.max(0, now.getTime() - Date.parse(oldestDueAt)) };
}

/** Resolves `work`, or rejects once `ms` passed: a probe never waits on a store that does not answer. */
function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

async function check<T>(
  run: () => Promise<T>,
  timeoutMs: number,
): Promise<{ result: CheckResult; value: T | undefined }> {
  const started = performance.now();
  const took = () => Math.round((performance.now() - started) * 10) / 10;
  try {
    const value = await within(run(), timeoutMs);
    return { result: { ok: true, durationMs: took() }, value };
  } catch (error) {
    return { result: { ok: false, durationMs: took(), error: errorMessage(error) }, value: undefined };
  }
}

export interface ReadinessOptions {
  storage: Storage;
  blobs: BlobStore;
  /** Whether this portal's worker runs; `null` when it runs none. */
  workerRunning: () => boolean | null;
  clock: () => Date;
  timeoutMs?: number;
}

/**
 * `portal.ready()`: the record store and the blob store each answer a read within the timeout, and
 * the worker runs. The store's read is the delivery queue where it has one (`Storage.deliveryQueue`),
 * so the same round trip tells how far behind delivery is. The lag is reported, not judged: an
 * instance taken out of a load balancer delivers nothing faster (see docs/operations.md).
 */
export function createReadiness(options: ReadinessOptions): () => Promise<Readiness> {
  const { storage, blobs, clock } = options;
  const timeoutMs = options.timeoutMs ?? READY_CHECK_TIMEOUT_MS;
  return async function ready() {
    const now = clock();
    const readStore = () =>
      storage.deliveryQueue !== undefined
        ? readQueue(storage, now)
        : storage.getWebhook('', 'wbh_readiness').then(() => null);
    const [records, bytes] = await Promise.all([
      check(readStore, timeoutMs),
      check(() => blobs.stat(PROBE_KEY), timeoutMs),
    ]);
    const running = options.workerRunning();
    const queue = records.value ?? null;
    const worker: WorkerCheck = {
      ok: running !== false,
      running: running === true,
      waiting: queue?.waiting ?? null,
      lagMs: queue?.lagMs ?? null,
    };
    return {
      ok: records.result.ok && bytes.result.ok && worker.ok,
      checks: { storage: records.result, blobs: bytes.result, worker },
    };
  };
}
