/**
 * The server the fault and load parts kill and restart: a portal on the filesystem adapters in
 * `DATA_DIR`, with a worker that ticks every second, a short retry schedule and loopback receivers
 * allowed. `CLOCK_SKEW_S` runs its clock ahead (to let a dead process's delivery leases lapse
 * without waiting a minute). Outside `/v1` it serves test-only routes: `POST /_test/publish`
 * (an event, as a host app would publish it), `POST /_test/attachment` (a ticket attachment) and
 * `POST /_test/memory` (a full collection when started with `--expose-gc`, then `process.memoryUsage()`).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fsBlobs, fsStorage } from '../adapters/fs/index.js';
import { connectDatabase } from '../adapters/sql/connect.js';
import { sqlAdapters } from '../adapters/sql/index.js';
import { HttpError, createPortal, type Logger } from '../src/index.js';
import { SIGNING_KEY_1 } from '../test/helpers/download.js';
import { KEY_A, KEY_B } from '../test/helpers/server.js';

/**
 * What the standalone server prints: one JSON object a line, info on stdout (the parent waits there
 * for `listening`), warnings and errors on stderr; debug left out. Every line goes to the scan for secrets.
 */
function jsonLines(): Logger {
  const line = (level: string, stream: NodeJS.WritableStream) => (object: object, msg?: string) =>
    stream.write(JSON.stringify({ time: new Date().toISOString(), level, ...object, msg }) + '\n');
  return {
    debug: () => {},
    info: line('info', process.stdout),
    warn: line('warn', process.stderr),
    error: line('error', process.stderr),
  };
}

const dir = process.env.DATA_DIR!;
const skewMs = Number(process.env.CLOCK_SKEW_S ?? 0) * 1000;
const logger = jsonLines();
// With SQL_SCHEMA, the SQL adapters on the PostgreSQL server at DATABASE_URL, in that schema;
// SQL_WAIT_FOR_DATABASE_MS, their waitForDatabaseMs (default theirs).
const database = process.env.SQL_SCHEMA ? await connectDatabase(process.env.DATABASE_URL!) : null;
const waitForDatabaseMs = process.env.SQL_WAIT_FOR_DATABASE_MS;
const adapters = database
  ? sqlAdapters({
      client: database.client,
      schema: process.env.SQL_SCHEMA!,
      ...(waitForDatabaseMs === undefined ? {} : { waitForDatabaseMs: Number(waitForDatabaseMs) }),
    })
  : { storage: fsStorage({ dir }), blobs: fsBlobs({ dir: path.join(dir, 'blobs') }) };

const portal = await createPortal({
  ...adapters,
  auth: { apiKeys: { [KEY_A]: 'acct_a', [KEY_B]: 'acct_b' } },
  signingKeys: [SIGNING_KEY_1],
  logger,
  clock: () => new Date(Date.now() + skewMs),
  webhooks: {
    tick: '* * * * * *',
    timeoutMs: 3000,
    concurrency: 16,
    retrySchedule: Array.from({ length: 40 }, (_, i) => (i < 5 ? 1 : 2)),
    allowPrivateNetworks: true,
  },
});

async function body(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function harness(req: http.IncomingMessage, res: http.ServerResponse): void {
  const send = (status: number, value: unknown) =>
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
  (async () => {
    if (req.method === 'POST' && req.url === '/_test/publish') {
      const data = JSON.parse((await body(req)).toString() || '{}');
      send(201, await portal.events.publish('acct_a', 'customer-created', data));
    } else if (req.method === 'POST' && req.url === '/_test/attachment') {
      send(
        201,
        await portal.tickets.putAttachment('acct_a', {
          name: 'load.bin',
          mime: 'application/octet-stream',
          body: await body(req),
        }),
      );
    } else if (req.method === 'POST' && req.url === '/_test/memory') {
      // Twice, a moment apart: a buffer's memory outside the heap is freed by V8's sweeper after the
      // collection that found it dead, so one collection and an immediate reading would still count it.
      const gc = (globalThis as { gc?: () => void }).gc;
      for (let i = 0; i < 2; i++) {
        gc?.();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      send(200, process.memoryUsage());
    } else send(404, { message: 'no such test route' });
  })().catch((error: unknown) => {
    // As the portal's own routes answer: an HttpError (a 503 while the database is away) keeps its status.
    if (error instanceof HttpError)
      res
        .writeHead(error.status, { ...error.headers, 'content-type': 'application/json' })
        .end(JSON.stringify({ message: error.message }));
    else send(500, { message: String(error) });
  });
}

const server = http.createServer((req, res) => portal.handler(req, res, () => harness(req, res)));
process.on('SIGTERM', () =>
  server.close(() =>
    portal
      .close()
      .then(() => database?.close())
      .then(() => process.exit(0)),
  ),
);
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  logger.info({ url: `http://127.0.0.1:${port}`, pid: process.pid }, 'listening');
});
