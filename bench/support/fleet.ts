/**
 * What the processes of `webhook-fleet.bench.js` share: the IPC messages, the event data, the
 * publishing loop and the signed call the peers' workers make. One file, so every contender
 * publishes the same data at the same pace and the receiver gets the same calls.
 */
import http from 'node:http';
import { Webhook } from 'standardwebhooks';

/** The database of the bench (trust auth on 127.0.0.1 by default). */
export const DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
/** The event type every webhook of the portal subscribes to, and the `type` of every call body. */
export const EVENT_TYPE = 'customer-created';
/** A Standard Webhooks secret, for the pg-boss workers (the portal makes its own per webhook). */
const SECRET = 'whsec_' + Buffer.alloc(32, 7).toString('base64');

/** Coordinator → process. */
export type Command =
  | { cmd: 'publish'; events: number; batch: number; rate: number; pad: number }
  | { cmd: 'stop' }
  | { cmd: 'claims' };

/** Process → coordinator. */
export type Report =
  | { ready: true }
  | { published: number; started: number; seconds: number }
  | { failed: string }
  | { claims: number; p50: number; p99: number; max: number };

/** Epoch milliseconds with a fraction: one clock for every process of the machine. */
export const now = () => performance.timeOrigin + performance.now();

/** What every event carries: when it was published (read by the receiver), and padding. */
export interface FleetData {
  sentAt: number;
  pad: string;
}

/**
 * Publishes `events` in batches of `batch`, each batch awaited before the next; at most `rate`
 * events a second when `rate` > 0 (a batch starts at its scheduled time or, late, at once).
 */
export async function publishAll(
  { events, batch, rate, pad }: { events: number; batch: number; rate: number; pad: number },
  publishBatch: (data: FleetData[], first: number) => Promise<void>,
): Promise<{ published: number; started: number; seconds: number }> {
  const padding = 'x'.repeat(pad);
  const started = now();
  for (let first = 0; first < events; first += batch) {
    if (rate > 0) {
      const due = started + (first / rate) * 1000;
      const wait = due - now();
      if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    const size = Math.min(batch, events - first);
    const sentAt = now();
    await publishBatch(
      Array.from({ length: size }, () => ({ sentAt, pad: padding })),
      first,
    );
  }
  return { published: events, started, seconds: (now() - started) / 1000 };
}

/** Wires a child process to the coordinator: commands in, reports out, gone with its parent. */
export function serve(handlers: {
  publish?: (command: Extract<Command, { cmd: 'publish' }>) => Promise<Report>;
  /** The claims made since the last ask: how many, and their times (a portal worker). */
  claims?: () => Report;
  stop: () => Promise<void>;
}) {
  const send = (report: Report) => process.send!(report);
  process.on('disconnect', () => process.exit(1));
  process.on('message', (command: Command) => {
    if (command.cmd === 'stop') {
      handlers.stop().then(
        () => process.exit(0),
        (error) => {
          console.error(`fleet process: stopping failed: ${(error as Error).message}`);
          process.exit(1);
        },
      );
    } else if (command.cmd === 'claims' && handlers.claims !== undefined) {
      send(handlers.claims());
    } else if (command.cmd === 'publish' && handlers.publish !== undefined) {
      handlers.publish(command).then(send, (error) => send({ failed: (error as Error).message }));
    }
  });
  return { ready: () => send({ ready: true }), failed: (message: string) => send({ failed: message }) };
}

/** The portal's default call time-out, so that a hanging receiver cannot hang a peer's worker either. */
const CALL_TIMEOUT_MS = 15_000;

const atom = (date: Date) => date.toISOString().slice(0, 19) + '+00:00';

/**
 * The call a peer's worker makes for one job: the portal's body, signed with the reference
 * Standard Webhooks library, POSTed with `http.request` over a keep-alive agent, as users of
 * pg-boss and graphile-worker write it. Resolves on a 2xx, rejects otherwise (the job is retried).
 */
export function signedPoster(url: string, userAgent: string): (id: string, data: FleetData) => Promise<void> {
  const agent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  const signer = new Webhook(SECRET);
  return (id, data) =>
    new Promise<void>((resolve, reject) => {
      const at = new Date();
      const body = JSON.stringify({ id, type: EVENT_TYPE, createdAt: atom(new Date(data.sentAt)), data });
      const signature = signer.sign(id, at, body);
      const req = http.request(url, {
        method: 'POST',
        agent,
        timeout: CALL_TIMEOUT_MS,
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': String(Buffer.byteLength(body)),
          'User-Agent': userAgent,
          'webhook-id': id,
          'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
          'webhook-signature': signature,
          'X-Webhook-Signature': signature,
        },
      });
      req.on('timeout', () => req.destroy(new Error(`timed out after ${CALL_TIMEOUT_MS} ms`)));
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => (res.statusCode! < 300 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
}
