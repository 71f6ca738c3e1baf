/**
 * A pg-boss instance of `webhook-fleet.bench.js`, a peer, in its own process:
 *
 *   node dist/bench/fleet-pgboss.js publisher <schema> <receiver url>
 *   node dist/bench/fleet-pgboss.js worker <schema> <receiver url> <batch>
 *
 * pg-boss 12 (Node 22 and later), configured as its documentation says for throughput: the queue
 * made with `notify` and the instances with `useListenNotify`, so a worker is woken by a new job
 * instead of its next poll; the publisher `insert`s each batch in one statement; a worker is one
 * `work()` fetching up to `batch` jobs at once, fetching again at once while its batches come back
 * full (`burstWhenBatchFull`). Each job becomes the call the portal would make (`signedPoster`).
 */
import { PgBoss } from 'pg-boss';
import { DATABASE_URL, type FleetData, publishAll, serve, signedPoster } from './support/fleet.js';

const QUEUE = 'webhook-fleet';

const [role, schema, url, batchText = '32'] = process.argv.slice(2);
if ((role !== 'publisher' && role !== 'worker') || schema === undefined || url === undefined) {
  console.error('usage: fleet-pgboss.js publisher <schema> <receiver url> | worker <schema> <receiver url> <batch>');
  process.exit(2);
}

// application_name: pg-boss names its connections 'pgboss' unless told; the bench finds them by this.
const boss = new PgBoss({
  connectionString: DATABASE_URL,
  schema,
  application_name: process.env.PGAPPNAME ?? 'pgboss',
  useListenNotify: true,
});
boss.on('error', (error: Error) => console.error(`pg-boss ${role}: ${error.message}`));
await boss.start();

if (role === 'publisher') {
  await boss.createQueue(QUEUE, { notify: true });
} else {
  const batchSize = Number(batchText);
  const post = signedPoster(url, 'pg-boss-bench');
  await boss.work<FleetData>(QUEUE, { batchSize, burstWhenBatchFull: true }, async (jobs) => {
    await Promise.all(jobs.map((job) => post(job.id, job.data)));
  });
}

const process_ = serve({
  publish:
    role === 'publisher'
      ? (command) =>
          publishAll(command, async (data) => {
            await boss.insert(
              QUEUE,
              data.map((one) => ({ data: one })),
            );
          })
      : undefined,
  async stop() {
    await boss.stop({ graceful: true, timeout: 5000 });
  },
});
process_.ready();
