/**
 * A pg-boss instance of `webhook-fleet.bench.js`, the baseline, in its own process:
 *
 *   node dist/bench/fleet-pgboss.js publisher <schema> <receiver url>
 *   node dist/bench/fleet-pgboss.js worker <schema> <receiver url> <batch>
 *
 * pg-boss 10 (the newest for Node 20) has no LISTEN/NOTIFY: its workers poll, at most every 0.5 s.
 * Used as its documentation shows: the publisher `insert`s each batch in one statement; a worker is
 * one `work()` fetching up to `batch` jobs a poll, and when it got a full batch it calls
 * `notifyWorker` so that a backlog is fetched again at once instead of after the polling interval.
 * Each job becomes the call the portal would make: the same body, signed with the reference
 * Standard Webhooks library, POSTed over a keep-alive agent to the same receiver.
 */
import http from 'node:http';
import PgBoss from 'pg-boss';
import { Webhook } from 'standardwebhooks';
import { DATABASE_URL, EVENT_TYPE, SECRET, publishAll, serve, type FleetData } from './support/fleet.js';

const QUEUE = 'webhook-fleet';
/** The portal's default call time-out, so a hanging receiver cannot hang the worker either. */
const TIMEOUT_MS = 15_000;
/** pg-boss's smallest polling interval. */
const POLLING_INTERVAL_SECONDS = 0.5;

const [role, schema, url, batchText = '32'] = process.argv.slice(2);
if ((role !== 'publisher' && role !== 'worker') || schema === undefined || url === undefined) {
  console.error('usage: fleet-pgboss.js publisher <schema> <receiver url> | worker <schema> <receiver url> <batch>');
  process.exit(2);
}

// application_name: pg-boss names its connections 'pgboss' unless told; the bench finds them by this.
const boss = new PgBoss({ connectionString: DATABASE_URL, schema, application_name: process.env.PGAPPNAME ?? 'pgboss' });
boss.on('error', (error: Error) => console.error(`pg-boss ${role}: ${error.message}`));
await boss.start();

const atom = (date: Date) => date.toISOString().slice(0, 19) + '+00:00';

if (role === 'publisher') {
  await boss.createQueue(QUEUE);
} else {
  const batchSize = Number(batchText);
  const agent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  const signer = new Webhook(SECRET);
  const post = (id: string, data: FleetData) =>
    new Promise<void>((resolve, reject) => {
      const at = new Date();
      const body = JSON.stringify({ id, type: EVENT_TYPE, createdAt: atom(new Date(data.sentAt)), data });
      const signature = signer.sign(id, at, body);
      const req = http.request(url, {
        method: 'POST',
        agent,
        timeout: TIMEOUT_MS,
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': String(Buffer.byteLength(body)),
          'User-Agent': 'pg-boss-bench',
          'webhook-id': id,
          'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
          'webhook-signature': signature,
          'X-Webhook-Signature': signature,
        },
      });
      req.on('timeout', () => req.destroy(new Error(`timed out after ${TIMEOUT_MS} ms`)));
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => (res.statusCode! < 300 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
  let workerId = '';
  workerId = await boss.work<FleetData>(QUEUE, { batchSize, pollingIntervalSeconds: POLLING_INTERVAL_SECONDS }, async (jobs) => {
    // A full batch: there may be more waiting, so skip the polling interval once.
    if (jobs.length === batchSize) boss.notifyWorker(workerId);
    await Promise.all(jobs.map((job) => post(job.id, job.data)));
  });
}

const process_ = serve({
  publish:
    role === 'publisher'
      ? (command) =>
          publishAll(command, async (data) => {
            await boss.insert(data.map((one) => ({ name: QUEUE, data: one })));
          })
      : undefined,
  async stop() {
    await boss.stop({ graceful: true, timeout: 5000 });
  },
});
process_.ready();
