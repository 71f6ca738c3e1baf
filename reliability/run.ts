/**
 * `npm run test:reliability`: attacks a running portal with bad input, a security matrix, faults,
 * load and slow clients, and prints what it tried as a table. Exits 1 on any 5xx, hang, loss or
 * wrong answer. `FC_SEED` replays the generated inputs; `RELIABILITY_ONLY=inputs,security,…` runs a part.
 */
import { allRows, details, failed, row, table } from './tally.js';

const seed = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : Math.floor(Math.random() * 2 ** 31);
const only = (process.env.RELIABILITY_ONLY ?? '').split(',').filter(Boolean);
const wanted = (part: string) => only.length === 0 || only.includes(part);

type Part = [name: string, run: () => Promise<void>];

async function main(): Promise<void> {
  console.log(`reliability: fast-check seed ${seed} (replay with FC_SEED=${seed})`);
  const { startTarget } = await import('./target.js');
  const parts: Part[] = [
    [
      'inputs',
      async () => {
        const inputs = await import('./inputs.js');
        const target = await startTarget();
        try {
          await inputs.generatedMultipart(target, seed, Number(process.env.RELIABILITY_MULTIPART_RUNS ?? 400));
          await inputs.handWrittenMultipart(target);
          await inputs.generatedIds(target, seed, Number(process.env.RELIABILITY_ID_RUNS ?? 1000));
          await inputs.headers(target);
          await inputs.methods(target);
          await inputs.bodiesOnGet(target);
        } finally {
          await target.close();
        }
      },
    ],
    [
      'security',
      async () => {
        const security = await import('./security.js');
        const target = await startTarget();
        try {
          await security.authMatrix(target);
          await security.downloadLinks(target);
        } finally {
          await target.close();
        }
        await security.ssrf();
      },
    ],
    [
      'costs',
      async () => {
        const costs = await import('./costs.js');
        const target = await startTarget();
        try {
          await costs.signatureImages(target);
          await costs.filterCosts(target);
        } finally {
          await target.close();
        }
      },
    ],
    ['faults', async () => (await import('./faults.js')).faults()],
    ['disk', async () => (await import('./full-disk.js')).fullDisk()],
    [
      'load',
      async () =>
        (await import('./load.js')).load(
          Number(process.env.RELIABILITY_LOAD_S ?? 60),
          Number(process.env.RELIABILITY_LOAD_CLIENTS ?? 8),
        ),
    ],
    ['slow', async () => (await import('./slow-clients.js')).slowClients()],
  ];
  for (const [name, run] of parts) {
    if (!wanted(name)) continue;
    const started = Date.now();
    try {
      await run();
    } catch (error) {
      const broken = row(name, 'the part itself');
      broken.tried++;
      broken.wrong++;
      broken.failures.push(`threw: ${error instanceof Error ? error.stack : String(error)}`);
    }
    console.log(`reliability: ${name} done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
  // Last: every log line of every part is in by now.
  (await import('./security.js')).secretsInLogs();
  console.log('\n' + table() + '\n');
  const notes = details();
  if (notes) console.log(notes + '\n');
  const bad = failed();
  console.log(
    bad
      ? `reliability: FAILED (seed ${seed})`
      : `reliability: ${allRows().length} categories, no 5xx, no hang, nothing lost`,
  );
  process.exit(bad ? 1 : 0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
