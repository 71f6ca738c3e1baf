/**
 * How the fs record store behaves as it grows: `node dist/bench/fs-storage.bench.js`.
 * Prints write throughput (one write at a time, and many in flight sharing fsyncs), the open time
 * of a store of 100,000 records, the listing of a directory of 10,000 entries and gets by id, each
 * beside a baseline measured in the same run: the memory adapter, or the bare read of the log.
 * `BENCH_DIR` puts the store elsewhere than the system temp directory (a different disk, say).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { fsStorage } from '../adapters/fs/index.js';
import { memoryStorage } from '../adapters/memory/index.js';
import type { Storage } from '../src/index.js';
import { directoryRecord, fileRecord } from '../test/conformance/fixtures.js';
import { agreementRecord } from '../test/helpers/record-fixtures.js';

const TOTAL = 100_000;
const DIRECTORY_SIZE = 10_000;
const AGREEMENTS = 10_000;
const IN_FLIGHT = 256;

/**
 * Opens the store in a new Node process, as a restarted server would, so the heap it holds is
 * measured alone: the bench runs itself with `--open <dir> <ids>` and `--expose-gc`.
 */
function openInFreshProcess(storeDir: string, ids: string[]): { ms: number; heapMiB: number; getMs: number } {
  const self = fileURLToPath(import.meta.url);
  const result = spawnSync(process.execPath, ['--expose-gc', self, '--open', storeDir, ids.join(',')], {
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`opening in a fresh process failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as { ms: number; heapMiB: number; getMs: number };
}

if (process.argv[2] === '--open') {
  const [, , , storeDir, idList] = process.argv;
  const gc = (globalThis as { gc?: () => void }).gc!;
  gc();
  const before = process.memoryUsage().heapUsed;
  const storage = fsStorage({ dir: storeDir! });
  const { ms } = await time(() => storage.open!());
  gc();
  const heapMiB = (process.memoryUsage().heapUsed - before) / 1024 / 1024;
  const getMs = await getTime((id) => storage.getFileEntry('acct_a', id), idList!.split(','));
  await storage.close!();
  process.stdout.write(JSON.stringify({ ms, heapMiB, getMs }));
  process.exit(0);
}

const dir = mkdtempSync(path.join(process.env.BENCH_DIR ?? os.tmpdir(), 'customer-portal-bench-'));

async function time<T>(body: () => Promise<T>): Promise<{ ms: number; result: T }> {
  const start = performance.now();
  const result = await body();
  return { ms: performance.now() - start, result };
}

/** Runs `count` writes with at most `inFlight` of them waiting at once. */
async function writeMany(count: number, inFlight: number, write: (i: number) => Promise<unknown>) {
  let next = 0;
  const lane = async () => {
    while (next < count) await write(next++);
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, lane));
}

const perSecond = (count: number, ms: number) => `${Math.round((count / ms) * 1000).toLocaleString('en')}/s`;
const millis = (ms: number) => `${ms.toFixed(ms < 10 ? 2 : 0)} ms`;
const micros = (ms: number, count: number) => `${((ms / count) * 1000).toFixed(1)} µs`;
const rows: [string, string, string][] = [];
const report = (what: string, measured: string, baseline: string) => rows.push([what, measured, baseline]);

/** Fills a store: a directory of 10,000 entries, agreements read back from the log, and entries elsewhere up to 100,000. */
async function fill(storage: Storage, onDirectoryFull?: () => Promise<void>) {
  const directory = directoryRecord();
  await storage.insertFileEntry(directory);
  await writeMany(DIRECTORY_SIZE, IN_FLIGHT, (i) =>
    storage.insertFileEntry(fileRecord({ directoryId: directory.id, name: `file-${i}.pdf` })),
  );
  await onDirectoryFull?.();
  const agreements = Array.from({ length: AGREEMENTS }, () => agreementRecord());
  await writeMany(AGREEMENTS, IN_FLIGHT, (i) => storage.insertAgreement(agreements[i]!, []));
  await writeMany(TOTAL - DIRECTORY_SIZE - AGREEMENTS - 1, IN_FLIGHT, (i) =>
    storage.insertFileEntry(fileRecord({ name: `root-${i}.txt` })),
  );
  return { directory, agreements };
}

async function listTime(storage: Storage, accountId: string, directoryId: string, rounds = 20) {
  const { ms, result } = await time(async () => {
    let listed = 0;
    for (let round = 0; round < rounds; round++)
      listed = (await storage.listFileEntries(accountId, directoryId)).length;
    return listed;
  });
  if (result !== DIRECTORY_SIZE) throw new Error(`listed ${result} entries, expected ${DIRECTORY_SIZE}`);
  return ms / rounds;
}

async function getTime(get: (id: string) => Promise<unknown>, ids: string[]) {
  const { ms } = await time(async () => {
    for (const id of ids) if ((await get(id)) === null) throw new Error(`${id} is missing`);
  });
  return ms;
}

/**
 * One row for `npm run bench`. The filesystem adapter's issue sets no ratio target, so the rows are
 * reported with the ratio that makes higher better (memory is faster by nature).
 */
function bench(
  scenario: string,
  figure: number,
  unit: string,
  baselineName: string,
  baseline: number,
  higherIsBetter: boolean,
) {
  const ratio = higherIsBetter ? figure / baseline : baseline / figure;
  console.log(
    `BENCH ${JSON.stringify({ scenario, figure, unit, baselineName, baseline, ratio, target: 'none (reported)', holds: true })}`,
  );
}

try {
  // One write at a time: each waits for its own fsync.
  const sequential = fsStorage({ dir: path.join(dir, 'sequential') });
  await sequential.open!();
  const memory = memoryStorage();
  const SEQUENTIAL = 500;
  const oneByOne = await time(() => writeMany(SEQUENTIAL, 1, () => sequential.insertFileEntry(fileRecord())));
  const memoryOneByOne = await time(() => writeMany(SEQUENTIAL, 1, () => memory.insertFileEntry(fileRecord())));
  report(
    `write, one at a time (${SEQUENTIAL})`,
    perSecond(SEQUENTIAL, oneByOne.ms),
    `memory ${perSecond(SEQUENTIAL, memoryOneByOne.ms)}`,
  );
  await sequential.close!();

  // 100,000 records with 256 writes in flight: group commit shares each fsync among them.
  const storage = fsStorage({ dir: path.join(dir, 'store') });
  await storage.open!();
  let listSmall = 0;
  const filled = await time(() =>
    fill(storage, async () => {
      listSmall = await listTime(storage, 'acct_a', (await storage.listFileEntries('acct_a', null))[0]!.id);
    }),
  );
  const { directory, agreements } = filled.result;
  const reference = memoryStorage();
  const memoryFilled = await time(() => fill(reference));
  report(
    `write ${TOTAL.toLocaleString('en')} records, ${IN_FLIGHT} in flight`,
    perSecond(TOTAL, filled.ms),
    `memory ${perSecond(TOTAL, memoryFilled.ms)}`,
  );
  bench(
    `fs: write ${TOTAL.toLocaleString('en')} records, ${IN_FLIGHT} in flight`,
    (TOTAL * 1000) / filled.ms,
    'records/s',
    'memory',
    (TOTAL * 1000) / memoryFilled.ms,
    true,
  );

  const listLarge = await listTime(storage, 'acct_a', directory.id);
  const listMemory = await listTime(reference, 'acct_a', memoryFilled.result.directory.id);
  bench(
    `fs: list ${DIRECTORY_SIZE.toLocaleString('en')} entries (store of ${TOTAL.toLocaleString('en')})`,
    listLarge,
    'ms',
    'memory',
    listMemory,
    false,
  );
  report(
    `list a directory of ${DIRECTORY_SIZE.toLocaleString('en')} entries`,
    `${millis(listLarge)} (store of ${TOTAL.toLocaleString('en')}); ${millis(listSmall)} (store of ${DIRECTORY_SIZE.toLocaleString('en')})`,
    `memory ${millis(listMemory)}`,
  );

  const entries = await storage.listFileEntries('acct_a', directory.id);
  const entryIds = entries.map((entry) => entry.id);
  const memoryEntryIds = (await reference.listFileEntries('acct_a', memoryFilled.result.directory.id)).map(
    (entry) => entry.id,
  );
  const getEntry = await getTime((id) => storage.getFileEntry('acct_a', id), entryIds);
  const getEntryMemory = await getTime((id) => reference.getFileEntry('acct_a', id), memoryEntryIds);
  report(
    'get a file entry by id (held in memory)',
    micros(getEntry, entryIds.length),
    `memory ${micros(getEntryMemory, memoryEntryIds.length)}`,
  );

  const agreementIds = agreements.map((agreement) => agreement.id);
  const getAgreement = await getTime((id) => storage.getAgreement('acct_a', id), agreementIds);
  const getAgreementMemory = await getTime(
    (id) => reference.getAgreement('acct_a', id),
    memoryFilled.result.agreements.map((agreement) => agreement.id),
  );
  report(
    'get an agreement by id (read from the log)',
    micros(getAgreement, agreementIds.length),
    `memory ${micros(getAgreementMemory, agreementIds.length)}`,
  );
  await storage.close!();

  const log = path.join(dir, 'store', 'records.log');
  const bytes = statSync(log).size;
  const bare = await time(async () => readFileSync(log).length);
  const opened = openInFreshProcess(path.join(dir, 'store'), entryIds.slice(0, 1000));
  report(
    `open a store of ${TOTAL.toLocaleString('en')} records (${(bytes / 1024 / 1024).toFixed(1)} MiB log)`,
    millis(opened.ms),
    `reading the log alone ${millis(bare.ms)}`,
  );
  bench(
    `fs: open a store of ${TOTAL.toLocaleString('en')} records`,
    opened.ms,
    'ms',
    'reading the log alone',
    bare.ms,
    false,
  );
  report('heap the open store holds', `${opened.heapMiB.toFixed(0)} MiB`, '');
  report('get a file entry by id after reopening', micros(opened.getMs, 1000), '');

  const width = Math.max(...rows.map(([what]) => what.length));
  const measuredWidth = Math.max(...rows.map(([, measured]) => measured.length));
  console.log(
    `fs-storage bench — Node ${process.version}, ${os.platform()} ${os.arch()}, ${os.cpus().length} CPUs, store in ${dir}\n`,
  );
  for (const [what, measured, baseline] of rows)
    console.log(`${what.padEnd(width)}  ${measured.padEnd(measuredWidth)}  ${baseline}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
