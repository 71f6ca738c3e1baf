/**
 * A graphile-worker instance of `webhook-fleet.bench.js`, a peer, in its own process:
 *
 *   node dist/bench/fleet-graphile.js publisher <schema> <receiver url>
 *   node dist/bench/fleet-graphile.js worker <schema> <receiver url> <batch>
 *
 * graphile-worker 0.18 (Node 22 and later), configured as its performance page and release notes
 * say for throughput: `batch` jobs at once (`concurrentJobs`), a pool one larger, a local queue of
 * `batch + 1` jobs fetched and locked in one query, and completions and failures batched
 * (`completeJobBatchDelay`, `failJobBatchDelay` 0). New jobs wake the workers by its own
 * LISTEN/NOTIFY. The publisher adds each batch with one `addJobs`. Each job becomes the call the
 * portal would make (`signedPoster`); the job id is the event id.
 */
import { Logger, type Runner, makeWorkerUtils, run } from 'graphile-worker';
import { DATABASE_URL, type FleetData, publishAll, serve, signedPoster } from './support/fleet.js';

const TASK = 'webhook';

const [role, schema, url, batchText = '32'] = process.argv.slice(2);
if ((role !== 'publisher' && role !== 'worker') || schema === undefined || url === undefined) {
  console.error('usage: fleet-graphile.js publisher <schema> <receiver url> | worker <schema> <receiver url> <batch>');
  process.exit(2);
}

/**
 * Warnings and errors only: at its default level the worker writes a line for every completed job,
 * which a deployment moving thousands a second turns down (the portal's worker logs no line a call).
 */
const logger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') console.error(`graphile-worker ${role}: ${message}`);
});

let runner: Runner | undefined;
const utils =
  role === 'publisher' ? await makeWorkerUtils({ connectionString: DATABASE_URL, schema, logger }) : undefined;
if (utils !== undefined) {
  await utils.migrate();
} else {
  const batch = Number(batchText);
  const post = signedPoster(url, 'graphile-worker-bench');
  runner = await run({
    connectionString: DATABASE_URL,
    schema,
    noHandleSignals: true,
    logger,
    taskList: {
      [TASK]: async (payload, helpers) => {
        await post(`evt_${helpers.job.id}`, payload as FleetData);
      },
    },
    preset: {
      worker: {
        concurrentJobs: batch,
        maxPoolSize: batch + 1,
        localQueue: { size: batch + 1 },
        completeJobBatchDelay: 0,
        failJobBatchDelay: 0,
      },
    },
  });
}

const process_ = serve({
  publish:
    utils === undefined
      ? undefined
      : (command) =>
          publishAll(command, async (data) => {
            await utils.addJobs(data.map((payload) => ({ identifier: TASK, payload })));
          }),
  async stop() {
    await runner?.stop();
    await utils?.release();
  },
});
process_.ready();
