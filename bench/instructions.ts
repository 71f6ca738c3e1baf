/**
 * Instructions a request, counted by callgrind: a figure that does not move with the host's other
 * tenants, for judging a change to the hot path on a busy machine.
 *   npm run bench:instructions                     (about 7 minutes on a busy 2-core host: slow, so not part of `npm run bench`)
 *   npm run bench:instructions -- portal           (only the contenders named)
 *   BENCH_SCENARIOS=404 npm run bench:instructions (only the scenarios whose names contain one of these)
 *
 * Each server (bench/servers: the portal on memory storage, bare node:http, Fastify) runs under
 * `valgrind --tool=callgrind` with `node --single-threaded` (compilation and GC on the main thread,
 * so that they are counted where they happen), instrumentation off. Per scenario: a warm-up of
 * `BENCH_CALLGRIND_WARMUP` requests (20,000) uncounted, then `BENCH_CALLGRIND_WINDOWS` (3) windows of
 * `BENCH_CALLGRIND_REQUESTS` (2,000) requests each counted on its own, the load (node:http, 32
 * keep-alive connections opened once, one request at a time each, cycling through 1,000 ids) from
 * outside valgrind.
 * From each window's total, the instructions spent inside optimizing compilation (TurboFan, still
 * at work after the warm-up now and then) and major GCs are taken out, as `callgrind_annotate
 * --inclusive=yes` counts them: they come in bursts that land in one window and not the next, and
 * are not a request's steady cost (scavenges, which every request's garbage pays for, stay in).
 * The least window counts.
 * `BENCH_CALLGRIND_CACHE=1` also simulates the caches and branch predictors (`--cache-sim=yes
 * --branch-sim=yes`, about twice as slow) and prints, per request of each window, the misses and
 * mispredictions beside the instructions: what separates two servers whose instructions agree but
 * whose CPU time does not.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { KEY, directoryId, missingIds, webhooks } from './servers/fixture.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const WARMUP = Number(process.env.BENCH_CALLGRIND_WARMUP ?? 20_000);
const REQUESTS = Number(process.env.BENCH_CALLGRIND_REQUESTS ?? 2_000);
const WINDOWS = Number(process.env.BENCH_CALLGRIND_WINDOWS ?? 3);
const CONNECTIONS = 32;
const SCENARIO_FILTER = process.env.BENCH_SCENARIOS?.split(',');
const CACHE_SIM = Boolean(process.env.BENCH_CALLGRIND_CACHE);
const named = process.argv.slice(2);
const CONTENDERS = named.length > 0 ? named : ['portal', 'bare', 'fastify'];

const AUTH = { authorization: `Bearer ${KEY}` };
const SCENARIOS = [
  { name: 'GET /v1/webhooks/{id}', paths: webhooks.map((one) => `/v1/webhooks/${one.id}`), headers: AUTH, status: 200 },
  { name: '404 (no such webhook)', paths: missingIds.map((id) => `/v1/webhooks/${id}`), headers: AUTH, status: 404 },
  { name: '401 (no key)', paths: webhooks.map((one) => `/v1/webhooks/${one.id}`), headers: {}, status: 401 },
  // A listing costs some 25 GETs: a tenth of the requests keeps the run as long. Fastify's baseline has no listing.
  {
    name: 'GET /v1/files (1,000 entries)',
    paths: [`/v1/files?directoryId=${directoryId}`],
    headers: AUTH,
    status: 200,
    share: 0.1,
    only: ['portal', 'bare'],
  },
].filter((scenario) => !SCENARIO_FILTER || SCENARIO_FILTER.some((part) => scenario.name.includes(part)));

/**
 * Sends `amount` requests of `scenario` over the 32 keep-alive connections of `agent`, one request
 * at a time on each. The connections stay open from the warm-up through every window, so that no
 * window counts connection setup and teardown (autocannon opens its connections anew on each run).
 */
async function load(agent: http.Agent, port: number, scenario: (typeof SCENARIOS)[number], amount: number) {
  let sent = 0;
  let unexpected = 0;
  const get = (path: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path, headers: scenario.headers, agent }, (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode!));
      });
      // A kept connection the server closed as idle just as it was reused: the request never
      // reached it, and goes again on a new connection (as node's documentation advises).
      req.once('error', (error: NodeJS.ErrnoException) =>
        req.reusedSocket && error.code === 'ECONNRESET' ? get(path).then(resolve, reject) : reject(error),
      );
    });
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (sent < amount) {
        const path = scenario.paths[sent++ % scenario.paths.length]!;
        if ((await get(path)) !== scenario.status) unexpected++;
      }
    }),
  );
  if (unexpected > 0) throw new Error(`${scenario.name}: ${unexpected} answers other than ${scenario.status}`);
}

const control = (child: ChildProcess, ...args: string[]) =>
  execFileSync('callgrind_control', [...args, String(child.pid)], { stdio: 'pipe' });

/** Functions whose inclusive cost is taken out of a window: bursts that are not a request's steady cost. */
const BURSTS = ['v8::internal::Compiler::CompileOptimized(', 'v8::internal::MarkCompactCollector::CollectGarbage('];

/** The events of a dump with the caches simulated, as callgrind names them (`I1mr`: first-level instruction cache read misses, `Bcm`: mispredicted conditional branches, …). */
const SIMULATED = ['I1mr', 'D1mr', 'D1mw', 'ILmr', 'DLmr', 'DLmw', 'Bc', 'Bcm', 'Bi', 'Bim'];

/**
 * A callgrind dump's total instructions, less the inclusive cost of `BURSTS`; with the caches
 * simulated, also every event's total.
 */
function steadyInstructions(file: string): { total: number; steady: number; events: Record<string, number> } {
  const text = readFileSync(file, 'utf8');
  const match = /^totals: ([\d ]+)/m.exec(text);
  if (!match) throw new Error(`${file}: no totals line`);
  const listed = /^events: (.+)$/m.exec(text)?.[1];
  const names = listed === undefined ? ['Ir'] : listed.trim().split(' ');
  const values = match[1]!.trim().split(' ').map(Number);
  const events = Object.fromEntries(names.map((name, i) => [name, values[i] ?? 0]));
  const total = values[0]!;
  const annotated = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], {
    maxBuffer: 256 * 2 ** 20,
  }).toString();
  let bursts = 0;
  for (const name of BURSTS) {
    // Sorted by inclusive cost: the first line naming the function is its whole cost.
    const line = annotated.split('\n').find((text) => text.includes(name));
    if (line !== undefined) bursts += Number(line.trim().split(' ')[0]!.replaceAll(',', ''));
  }
  return { total, steady: total - bursts, events };
}

async function countContender(name: string): Promise<Record<string, number>> {
  const dir = mkdtempSync(path.join(tmpdir(), 'portal-callgrind-'));
  const out = path.join(dir, 'callgrind.out');
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      ...(CACHE_SIM ? ['--cache-sim=yes', '--branch-sim=yes'] : []),
      `--callgrind-out-file=${out}`,
      process.execPath,
      '--single-threaded',
      // With the dumps kept, node writes /tmp/perf-<pid>.map: the JS functions behind the bare
      // addresses callgrind_annotate shows for JIT code.
      ...(process.env.BENCH_CALLGRIND_KEEP ? ['--perf-basic-prof'] : []),
      path.join(here, 'servers', `${name}.js`),
    ],
    { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] },
  );
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const figures: Record<string, number> = {};
  let agent: http.Agent | undefined;
  try {
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on(
        'line',
        (text) => text.startsWith('READY ') && resolve(text.slice(6)),
      );
      child.once('exit', (code) =>
        reject(new Error(`${name} under callgrind exited with ${code}:\n${stderr.slice(-2000)}`)),
      );
    });
    const { port } = JSON.parse(line) as { port: number };
    agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
    for (const scenario of SCENARIOS) {
      if (scenario.only !== undefined && !scenario.only.includes(name)) continue;
      const requests = Math.round(REQUESTS * (scenario.share ?? 1));
      await load(agent, port, scenario, Math.round(WARMUP * (scenario.share ?? 1)));
      const dumps: string[] = [];
      for (let window = 0; window < WINDOWS; window++) {
        control(child, '--zero');
        control(child, '--instr=on');
        await load(agent, port, scenario, requests);
        control(child, '--instr=off');
        const before = new Set(readdirSync(dir));
        control(child, '--dump');
        const dumped = readdirSync(dir).filter((file) => !before.has(file));
        if (dumped.length !== 1)
          throw new Error(`${name}: expected one new callgrind dump, found ${dumped.join(', ') || 'none'}`);
        dumps.push(path.join(dir, dumped[0]!));
      }
      // Read once the windows are over: the connections are not left idle between them.
      const counted = dumps.map(steadyInstructions);
      const windows = counted.map((one) => one.steady / requests);
      const totals = counted.map((one) => one.total / requests);
      figures[scenario.name] = Math.min(...windows);
      const thousands = (values: number[]) => values.map((value) => (value / 1000).toFixed(1)).join(', ');
      console.error(
        `  ${name} ${scenario.name}: ${thousands(windows)} thousand a request (with compilation and major GCs: ${thousands(totals)})`,
      );
      if (CACHE_SIM) {
        const perRequest = (one: (typeof counted)[number]) =>
          SIMULATED.map((event) => `${event} ${((one.events[event] ?? 0) / requests).toFixed(0)}`).join(', ');
        for (const one of counted) console.error(`    a request, whole window: ${perRequest(one)}`);
      }
    }
    return figures;
  } finally {
    agent?.destroy();
    child.kill();
    await new Promise((resolve) =>
      child.exitCode !== null || child.signalCode !== null ? resolve(null) : child.once('exit', resolve),
    );
    // BENCH_CALLGRIND_KEEP=1 keeps the dumps, for callgrind_annotate.
    if (process.env.BENCH_CALLGRIND_KEEP)
      console.error(`  dumps kept in ${dir}, JIT code named in /tmp/perf-${child.pid}.map`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

const results: Record<string, Record<string, number>> = {};
console.error(
  `instructions: ${WARMUP} warm-up requests, then ${WINDOWS} windows of ${REQUESTS} requests, the least counts`,
);
for (const name of CONTENDERS) results[name] = await countContender(name);

const columns = CONTENDERS;
const lines = [
  `| thousand instructions a request | ${columns.join(' | ')} |`,
  `|---|${columns.map(() => '---').join('|')}|`,
  ...SCENARIOS.map(
    (scenario) =>
      `| \`${scenario.name}\` | ${columns.map((name) => (results[name]![scenario.name] === undefined ? '—' : (results[name]![scenario.name]! / 1000).toFixed(1))).join(' | ')} |`,
  ),
];
console.log(lines.join('\n'));
writeFileSync(
  path.join(here, 'instructions.json'),
  JSON.stringify(
    {
      date: new Date().toISOString(),
      node: process.version,
      warmup: WARMUP,
      requests: REQUESTS,
      windows: WINDOWS,
      results,
    },
    null,
    2,
  ),
);
