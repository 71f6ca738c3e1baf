import { parentPort, workerData } from 'node:worker_threads';
import { errorMessage } from '../errors.js';
import { type CopyPlan, SealError, completedCopy } from './completed-copy.js';
import { loadLibpdf } from './pdf-layout.js';
import { inspectSeal } from './seal-check.js';
import { type Sealer, type SealingOptions, createSealer } from './sealing.js';
import type { ThreadSealing } from './pdf-work.js';

/**
 * The worker thread where the PDFs of senders are opened (`pdf-work.ts`): a PDF built to loop, to
 * nest without end or to swell in memory exhausts this thread's limits, never the portal's.
 */

type Job =
  | { id: number; op: 'pages'; bytes: Uint8Array }
  | { id: number; op: 'inspect'; bytes: Uint8Array; repair: boolean }
  | { id: number; op: 'copy'; bytes: Uint8Array; plan: CopyPlan };
type Answer = { op: 'signed'; request: number; signature?: Uint8Array; error?: string };

const port = parentPort!;
const asked = new Map<number, { resolve: (signature: Uint8Array) => void; reject: (error: Error) => void }>();
let requests = 0;

/** An external key's `sign` is the host's, on the main thread: each digest travels there and back. */
function signOnMainThread(digest: Buffer, algorithm: 'RSA-SHA256' | 'ECDSA-SHA256'): Promise<Uint8Array> {
  const request = ++requests;
  return new Promise((resolve, reject) => {
    asked.set(request, { resolve, reject });
    port.postMessage({ op: 'sign', request, digest, algorithm });
  });
}

function sealingOptions(sealing: ThreadSealing): SealingOptions | undefined {
  if (sealing === null) return undefined;
  const timestamp = sealing.timestampUrl === undefined ? {} : { timestampUrl: sealing.timestampUrl };
  if ('p12' in sealing)
    return {
      p12: Buffer.from(sealing.p12),
      ...(sealing.password === undefined ? {} : { password: sealing.password }),
      ...timestamp,
    };
  return { certificate: sealing.certificate, sign: signOnMainThread, ...timestamp };
}

let sealer: Promise<Sealer | null> | undefined;

async function run(job: Job): Promise<unknown> {
  if (job.op === 'pages') {
    const lib = await loadLibpdf();
    return (await lib.PDF.load(job.bytes)).getPageCount();
  }
  if (job.op === 'inspect') return inspectSeal(job.bytes, { repair: job.repair });
  sealer ??= createSealer(sealingOptions(workerData.sealing as ThreadSealing));
  const made = await sealer;
  // Told when the sealing starts: past the time limit then, it is the key or the authority that is slow.
  const sealingNow =
    made === null
      ? null
      : {
          ...made,
          seal: (...args: Parameters<Sealer['seal']>) => (
            port.postMessage({ op: 'sealing', id: job.id }), made.seal(...args)
          ),
        };
  const copy = await completedCopy(
    Buffer.from(job.bytes.buffer, job.bytes.byteOffset, job.bytes.byteLength),
    job.plan,
    sealingNow,
  );
  return { ...copy, bytes: new Uint8Array(copy.bytes.buffer, copy.bytes.byteOffset, copy.bytes.byteLength) };
}

port.on('message', (message: Job | Answer) => {
  if (message.op === 'signed') {
    const waiting = asked.get(message.request);
    asked.delete(message.request);
    if (message.error !== undefined) waiting?.reject(new Error(message.error));
    else waiting?.resolve(message.signature!);
    return;
  }
  run(message).then(
    (result) => port.postMessage({ op: 'done', id: message.id, result }),
    (error: unknown) =>
      port.postMessage({
        op: 'failed',
        id: message.id,
        seal: error instanceof SealError,
        message: errorMessage(error),
      }),
  );
});
