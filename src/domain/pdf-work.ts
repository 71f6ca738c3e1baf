import { Worker } from 'node:worker_threads';
import { errorMessage } from '../errors.js';
import { type CompletedCopy, type CopyPlan, SealError } from './completed-copy.js';
import type { SealReport } from './seal-check.js';
import type { SealingOptions } from './sealing.js';

/** The sealing option as the worker thread gets it: data only; an external key's `sign` stays here. */
export type ThreadSealing =
  | null
  | { p12: Uint8Array; password?: string; timestampUrl?: string }
  | { certificate: string; timestampUrl?: string };

/** A PDF that cannot be opened or updated within the worker's limits: that document's copy fails, never the portal. */
export class PdfError extends Error {}

/** The worker has more jobs waiting than it takes: try again later (a copy is retried on the schedule). */
export class PdfBusy extends Error {
  constructor(waiting: number) {
    super(`the PDF worker has ${waiting} jobs waiting, the most it takes`);
  }
}

/** Jobs waiting for the worker, at most: each holds its PDF (up to 25 MiB for /verify) until its turn. */
const MAX_WAITING = 32;

export interface PdfLimits {
  /** The worker thread's heap (V8's old generation), in MiB. */
  memoryMb: number;
  /** The longest a page count, or reading a PDF's seals, may take, in ms. */
  pagesMs: number;
  /** The longest a completed copy may take, stamping and sealing (the timestamp authority and the host's `sign` included), in ms. */
  copyMs: number;
}

const PDF_LIMITS: PdfLimits = { memoryMb: 512, pagesMs: 15_000, copyMs: 120_000 };

type Outgoing =
  | { op: 'pages'; bytes: Uint8Array }
  | { op: 'inspect'; bytes: Uint8Array; repair: boolean }
  | { op: 'copy'; bytes: Uint8Array; plan: CopyPlan };
type Incoming =
  | { op: 'done'; id: number; result: unknown }
  | { op: 'sealing'; id: number }
  | { op: 'failed'; id: number; seal: boolean; message: string }
  | { op: 'sign'; request: number; digest: Uint8Array; algorithm: 'RSA-SHA256' | 'ECDSA-SHA256' };

/**
 * Where the portal opens PDFs a sender uploaded: one worker thread, with a heap of its own
 * (`resourceLimits`) and a time limit on each job, doing one job at a time. A PDF that loops,
 * nests without end or swells past the heap ends the thread, not the process: the job rejects
 * with a `PdfError`, and the next job starts a new thread. The thread is unreferenced, so it
 * never keeps the process alive, and started only with the first PDF.
 */
export function createPdfWork(sealing: SealingOptions | undefined, limits: PdfLimits = PDF_LIMITS) {
  const threadSealing: ThreadSealing =
    sealing === undefined
      ? null
      : 'p12' in sealing
        ? {
            p12: new Uint8Array(sealing.p12),
            ...(sealing.password === undefined ? {} : { password: sealing.password }),
            ...timestamp(sealing),
          }
        : { certificate: sealing.certificate, ...timestamp(sealing) };
  let worker: Worker | null = null;
  let jobs = 0;
  /** The job the worker is on: its thread, and whether it is sealing (the key and the timestamp authority answer then). */
  let current: {
    id: number;
    thread: Worker;
    sealing: boolean;
    resolve: (result: unknown) => void;
    reject: (error: Error) => void;
  } | null = null;
  let queue: Promise<unknown> = Promise.resolve();
  let waiting = 0;

  function settle(id: number, outcome: { result: unknown } | { error: Error }): void {
    if (current?.id !== id) return;
    const job = current;
    current = null;
    if ('error' in outcome) job.reject(outcome.error);
    else job.resolve(outcome.result);
  }

  function start(): Worker {
    const thread = new Worker(new URL('./pdf-thread.js', import.meta.url), {
      workerData: { sealing: threadSealing },
      resourceLimits: { maxOldGenerationSizeMb: limits.memoryMb, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
    });
    thread.unref();
    thread.on('message', (message: Incoming) => {
      if (message.op === 'done') return settle(message.id, { result: message.result });
      if (message.op === 'sealing') {
        if (current?.id === message.id) current.sealing = true;
        return;
      }
      if (message.op === 'failed') {
        const error = message.seal
          ? new SealError(message.message.replace(/^the sealing key failed: /, ''))
          : new PdfError(message.message);
        return settle(message.id, { error });
      }
      // The host's key signs here, where its `sign` lives.
      const external = sealing !== undefined && 'sign' in sealing ? sealing : null;
      Promise.resolve()
        .then(() => external!.sign(Buffer.from(message.digest), message.algorithm))
        .then((signature) => {
          if (!(signature instanceof Uint8Array))
            throw new TypeError('sealing.sign must resolve a Buffer or Uint8Array');
          return { signature: new Uint8Array(signature) };
        })
        .catch((error: unknown) => ({ error: errorMessage(error) }))
        // A thread that has ended takes no message; its job is settled by its end.
        .then((answer) => thread.postMessage({ op: 'signed', request: message.request, ...answer }))
        .catch(() => {});
    });
    // Only this thread's own job ends with it: after a timeout the next job may already run on a new one.
    const ended = (reason: string) => {
      if (worker === thread) worker = null;
      if (current?.thread === thread) settle(current.id, { error: new PdfError(reason) });
    };
    thread.on('error', (error: Error & { code?: string }) =>
      ended(
        error.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? `opening it needs more than the ${limits.memoryMb} MiB the PDF worker may use`
          : `the PDF worker failed: ${errorMessage(error)}`,
      ),
    );
    thread.on('exit', () => ended('the PDF worker stopped'));
    return thread;
  }

  function run(message: Outgoing, timeoutMs: number): Promise<unknown> {
    const thread = (worker ??= start());
    const id = ++jobs;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        // Past the time while sealing, it is the key or the timestamp authority that is slow: tried again later.
        const slow = current?.id === id && current.sealing;
        const reason = `it took longer than ${timeoutMs / 1000} s to ${slow ? 'seal (the key or the timestamp authority did not answer)' : 'open and update'}`;
        settle(id, { error: slow ? new SealError(new Error(reason)) : new PdfError(reason) });
        if (worker === thread) worker = null;
        void thread.terminate();
      }, timeoutMs);
      current = {
        id,
        thread,
        sealing: false,
        resolve: (result) => {
          clearTimeout(timer);
          resolve(result);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      thread.postMessage({ id, ...message });
    });
  }

  /** One job after another: the next starts once the one before has settled; past `MAX_WAITING`, a `PdfBusy`. */
  function enqueue<T>(message: Outgoing, timeoutMs: number): Promise<T> {
    if (waiting >= MAX_WAITING) return Promise.reject(new PdfBusy(waiting));
    waiting++;
    const next = queue.then(() => run(message, timeoutMs)).finally(() => waiting--);
    queue = next.catch(() => undefined);
    return next as Promise<T>;
  }

  return {
    /** The number of pages of `bytes`; rejects with a `PdfError` for bytes that are no PDF it can read. */
    pageCount: (bytes: Buffer) => enqueue<number>({ op: 'pages', bytes }, limits.pagesMs),

    /** What the PDF's own seals say (`seal-check.ts`, `repair` as there); rejects with a `PdfError` past the limits. */
    inspectSeal: (bytes: Buffer, { repair }: { repair: boolean }) =>
      enqueue<SealReport>({ op: 'inspect', bytes, repair }, limits.pagesMs),

    /** The completed copy (`completed-copy.ts`); rejects with a `PdfError` for the PDF, a `SealError` for the key. */
    async completedCopy(original: Buffer, plan: CopyPlan): Promise<CompletedCopy> {
      const made = await enqueue<CompletedCopy & { bytes: Uint8Array }>(
        { op: 'copy', bytes: original, plan },
        limits.copyMs,
      );
      return { ...made, bytes: Buffer.from(made.bytes.buffer, made.bytes.byteOffset, made.bytes.byteLength) };
    },

    /** Stops the thread; a job still running rejects. */
    async close(): Promise<void> {
      const thread = worker;
      worker = null;
      await thread?.terminate();
    },
  };
}

export type PdfWork = ReturnType<typeof createPdfWork>;

function timestamp(sealing: { timestampUrl?: string }) {
  return sealing.timestampUrl === undefined ? {} : { timestampUrl: sealing.timestampUrl };
}
