/**
 * `npm run bench`: every benchmark of the project, one table. Servers run in their own processes
 * pinned to core 0, load comes from this process pinned to core 1 (where `taskset` exists);
 * contenders are interleaved round by round after a warm-up, and the median round is reported.
 * Targets are ratios against a baseline measured in the same run, because this machine is shared.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { pinned, readyLine, spawnNode } from './support/cores.js';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { KEY, directoryId, missingIds, webhooks } from './servers/fixture.js';
import { renderChart } from './chart.js';
import { REPORTED, type Row } from './support/row.js';
import { checkSameAnswers } from './support/answers.js';
import { loadCheckRow, wrkPath, wrkRound } from './support/wrk.js';
import { median } from './support/median.js';

const here = path.dirname(fileURLToPath(import.meta.url));
// Many short rounds: on a shared host the speed of a core drifts over seconds, and the median of
// nine interleaved one-second rounds moves far less between runs than that of three of three seconds.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 1);
const CONNECTIONS = 32;
/**
 * Requests in flight on each connection, one pass of every HTTP scenario per value. `1` (one request
 * at a time, how real clients and load balancers talk) carries the targets; `10` (as Fastify's own
 * benchmarks load servers, `autocannon -p 10`) is reported beside them: a fast server answers more
 * of them a second than one autocannon process on one core can send one at a time.
 * `BENCH_PIPELINING=1` for the targets alone.
 */
const PIPELINING = (process.env.BENCH_PIPELINING ?? '1,10').split(',').map(Number);
const TARGETED_PIPELINING = 1;
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const MEMORY_REQUESTS = Number(process.env.BENCH_MEMORY_REQUESTS ?? 1_000_000);
/**
 * What loads the targeted rows (one request in flight a connection): wrk where it is installed,
 * else autocannon from this process (`BENCH_LOAD=autocannon` forces it), which on one core of its
 * own answers how fast autocannon sends more than how fast the servers answer.
 */
const LOAD = process.env.BENCH_LOAD === 'autocannon' || wrkPath === null ? 'autocannon' : 'wrk';
/**
 * `run.js --scenarios 404 401` (`npm run bench:scenario -- 404 401`): only the HTTP scenarios whose
 * names contain one of these, and no other part: `BENCH_ONLY=http BENCH_SCENARIOS=404,401` in one word.
 */
const NAMED = process.argv[2] === '--scenarios' ? process.argv.slice(3) : undefined;
/** `BENCH_ONLY=http,memory,others` runs a part of the bench (all three by default). */
const ONLY = new Set((NAMED ? 'http' : (process.env.BENCH_ONLY ?? 'http,memory,others')).split(','));
/** `BENCH_SCENARIOS=404,401` runs only the HTTP scenarios whose names contain one of these. */
const SCENARIO_FILTER = NAMED ?? process.env.BENCH_SCENARIOS?.split(',');

export type { Row } from './support/row.js';

interface Server {
  name: string;
  child: ChildProcess;
  port: number;
  info: Record<string, string>;
}

async function startServer(name: string): Promise<Server> {
  const script = path.join(here, 'servers', `${name}.js`);
  const args = ['--expose-gc', script];
  const child = spawnNode(0, args, { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const info = (await readyLine(name, child)) as Record<string, string> & { port: number };
  return { name, child, port: info.port, info };
}

async function stopServer(server: Server) {
  server.child.kill();
  await new Promise((resolve) => server.child.once('exit', resolve));
}

/** The server's CPU time so far (user + system), in microseconds. */
function askCpu(server: Server): Promise<number> {
  return new Promise((resolve) => {
    server.child.once('message', (message: { cpu: number }) => resolve(message.cpu));
    server.child.send('cpu');
  });
}

/**
 * One round against `server`: requests a second of wall-clock time, and the server's CPU time a
 * request. The second does not depend on how much of the core the server got: on a shared host
 * whose other tenants take the core now and then, it moves far less than the first.
 * The requests cycle through `paths` on every connection.
 */
async function round(
  server: Server,
  paths: string[],
  headers: Record<string, string>,
  seconds: number,
  expectStatus: number,
  pipelining: number,
) {
  if (LOAD === 'wrk' && pipelining === 1) return wrkLoad(server, paths, headers, seconds, expectStatus);
  const cpuBefore = await askCpu(server);
  const result = await autocannon({
    url: `http://127.0.0.1:${server.port}`,
    headers,
    requests: paths.map((path) => ({ method: 'GET', path })),
    connections: CONNECTIONS,
    pipelining,
    duration: seconds,
  });
  const cpu = (await askCpu(server)) - cpuBefore;
  const answered = result.requests.total;
  const unexpected = expectStatus === 200 ? result.non2xx : answered - result.non2xx;
  if (result.errors > 0 || unexpected > answered * 0.001) {
    throw new Error(
      `${server.name} ${paths[0]}: ${result.errors} errors, ${unexpected} answers other than ${expectStatus}`,
    );
  }
  return { perSecond: answered / seconds, cpuPerRequest: cpu / answered, loadCpuShare: null };
}

/** A round loaded by wrk (see `support/wrk.ts`), with the share of its core wrk itself used. */
async function wrkLoad(
  server: Server,
  paths: string[],
  headers: Record<string, string>,
  seconds: number,
  expectStatus: number,
) {
  const cpuBefore = await askCpu(server);
  const result = await wrkRound(server.port, paths, headers, seconds, CONNECTIONS);
  const cpu = (await askCpu(server)) - cpuBefore;
  const unexpected = expectStatus < 300 ? result.non2xx : result.answered - result.non2xx;
  if (result.errors > 0 || unexpected > result.answered * 0.001) {
    throw new Error(
      `${server.name} ${paths[0]}: ${result.errors} socket errors, ${unexpected} answers other than ${expectStatus}`,
    );
  }
  return {
    perSecond: result.answered / result.seconds,
    cpuPerRequest: cpu / result.answered,
    loadCpuShare: result.loadCpuShare,
  };
}

/** The target of a row that only reports a figure. */

interface Scenario {
  name: string;
  contenders: string[];
  /** The paths the load cycles through (every contender holds the same records, so the same paths). */
  paths: string[];
  headers: Record<string, string>;
  status: number;
  /** Minimum ratio of the portal's figure to each baseline's. */
  targets: Record<string, number>;
  /** Baselines measured and reported beside the portal, with no target. */
  reported?: string[];
}

const AUTH = { authorization: `Bearer ${KEY}` };
const PEERS = ['portal', 'bare', 'fastify', 'express', 'minimal'];
const SCENARIOS: Scenario[] = [
  {
    name: 'GET /v1/webhooks/{id}',
    contenders: PEERS,
    paths: webhooks.map((one) => `/v1/webhooks/${one.id}`),
    headers: AUTH,
    status: 200,
    targets: { bare: 0.9, fastify: 1.0, express: 1.0 },
    reported: ['minimal'],
  },
  {
    name: '401 (no key)',
    contenders: PEERS,
    paths: webhooks.map((one) => `/v1/webhooks/${one.id}`),
    headers: {},
    status: 401,
    targets: { bare: 0.9, fastify: 1.0, express: 1.0 },
    reported: ['minimal'],
  },
  {
    name: '404 (no such webhook)',
    contenders: PEERS,
    paths: missingIds.map((id) => `/v1/webhooks/${id}`),
    headers: AUTH,
    status: 404,
    targets: { bare: 0.9, fastify: 1.0, express: 1.0 },
    reported: ['minimal'],
  },
  {
    // `portal` has @opentelemetry/api installed and no SDK; beside it the same server where the API
    // cannot be resolved, and one with the SDK recording every span and metric.
    name: 'GET /v1/webhooks/{id}, telemetry',
    contenders: ['portal', 'portal-no-otel', 'portal-otel-sdk'],
    paths: webhooks.map((one) => `/v1/webhooks/${one.id}`),
    headers: AUTH,
    status: 200,
    targets: { 'portal-no-otel': 0.95 },
    reported: ['portal-otel-sdk'],
  },
  {
    name: 'GET /v1/files (1,000 entries)',
    contenders: ['portal', 'bare'],
    paths: [`/v1/files?directoryId=${directoryId}`],
    headers: AUTH,
    status: 200,
    targets: { bare: 0.8 },
  },
];

/** `figures[scenario][contender]`: requests/s, median round. */
export type Figures = Record<string, Record<string, number>>;

async function httpScenarios(servers: Map<string, Server>): Promise<{ rows: Row[]; figures: Figures }> {
  const rows: Row[] = [];
  const figures: Figures = {};
  const scenarios = SCENARIOS.filter(
    (scenario) => !SCENARIO_FILTER || SCENARIO_FILTER.some((part) => scenario.name.includes(part)),
  );
  for (const scenario of scenarios) {
    const urls = new Map(
      scenario.contenders.map((name) => [name, `http://127.0.0.1:${servers.get(name)!.port}${scenario.paths[0]}`]),
    );
    await checkSameAnswers(scenario.name, urls, scenario.headers);
  }
  for (const pipelining of PIPELINING) {
    const targeted = pipelining === TARGETED_PIPELINING;
    for (const scenario of scenarios) {
      const label = targeted ? scenario.name : `${scenario.name}, ${pipelining} pipelined`;
      const samples = new Map<string, number[]>(scenario.contenders.map((name) => [name, []]));
      const cpuSamples = new Map<string, number[]>(scenario.contenders.map((name) => [name, []]));
      const loadSamples = new Map<string, number[]>(scenario.contenders.map((name) => [name, []]));
      // Warm-up, not counted: every path compiled by the JIT before any round is measured.
      for (const name of scenario.contenders) {
        await round(servers.get(name)!, scenario.paths, scenario.headers, WARMUP_SECONDS, scenario.status, pipelining);
      }
      for (let turn = 0; turn < ROUNDS; turn++) {
        // Interleaved, and the order rotates each round, so drift on the machine hits every contender alike.
        const order = scenario.contenders.map((_, i) => scenario.contenders[(i + turn) % scenario.contenders.length]!);
        for (const name of order) {
          const measured = await round(
            servers.get(name)!,
            scenario.paths,
            scenario.headers,
            SECONDS,
            scenario.status,
            pipelining,
          );
          samples.get(name)!.push(measured.perSecond);
          cpuSamples.get(name)!.push(measured.cpuPerRequest);
          if (measured.loadCpuShare !== null) loadSamples.get(name)!.push(measured.loadCpuShare);
        }
      }
      const medians = Object.fromEntries([...samples].map(([name, values]) => [name, median(values)]));
      const cpuMedians = Object.fromEntries([...cpuSamples].map(([name, values]) => [name, median(values)]));
      figures[label] = medians;
      const baselines: [string, number | null][] = [
        ...Object.entries(scenario.targets),
        ...(scenario.reported ?? []).map((name): [string, null] => [name, null]),
      ];
      for (const [baselineName, target] of baselines) {
        const ratio = medians.portal! / medians[baselineName]!;
        rows.push({
          scenario: label,
          figure: medians.portal!,
          unit: 'req/s',
          baselineName,
          baseline: medians[baselineName]!,
          ratio,
          target: targeted && target !== null ? `≥ ${target}×` : REPORTED,
          holds: !targeted || target === null || ratio >= target,
        });
      }
      // Reported beside the targets: the server's CPU time a request, the steadier figure (see `round`).
      for (const [baselineName] of baselines) {
        rows.push({
          scenario: `${label}, server CPU a request`,
          figure: cpuMedians.portal!,
          unit: 'µs',
          baselineName,
          baseline: cpuMedians[baselineName]!,
          ratio: cpuMedians[baselineName]! / cpuMedians.portal!,
          target: REPORTED,
          holds: true,
        });
      }
      // The check that the load generator is not the bottleneck: its share of its core while it loads the fastest server.
      const fastest = Object.entries(medians).sort(([, a], [, b]) => b - a)[0]![0];
      const loadShares = loadSamples.get(fastest)!;
      if (loadShares.length > 0) rows.push(loadCheckRow(label, fastest, loadShares));
      console.error(
        `  ${label}: ${Object.entries(medians)
          .map(([n, v]) => `${n} ${Math.round(v)}/s ${cpuMedians[n]!.toFixed(1)} µs`)
          .join(', ')}`,
      );
    }
  }
  return { rows, figures };
}
/**
 * The server's RSS after a full GC, less the pages V8 keeps for its young generation: that space
 * is empty after the GC, and V8 sizes it by the bytes that survived scavenges so far (it doubles,
 * once, after some hundred thousand requests), so it would count as growth what is heap sizing.
 */
function askRss(server: Server): Promise<number> {
  return new Promise((resolve) => {
    server.child.once('message', (message: { rss: number; young: number }) => resolve(message.rss - message.young));
    server.child.send('rss');
  });
}

/** RSS (after a full GC, young generation excluded) after 10,000 requests, then after `MEMORY_REQUESTS`: growth means a leak. */
async function memoryScenario(): Promise<Row> {
  const server = await startServer('portal');
  try {
    const load = {
      url: `http://127.0.0.1:${server.port}`,
      headers: AUTH,
      requests: webhooks.map((one) => ({ method: 'GET' as const, path: `/v1/webhooks/${one.id}` })),
      connections: CONNECTIONS,
      // Pipelined: a million requests in the least time; what is held after them does not depend on it.
      pipelining: 10,
    };
    await autocannon({ ...load, amount: 10_000 });
    const early = await askRss(server);
    await autocannon({ ...load, amount: MEMORY_REQUESTS - 10_000 });
    const late = await askRss(server);
    const ratio = late / early;
    return {
      scenario: `RSS after ${MEMORY_REQUESTS.toLocaleString('en')} GETs (young generation excluded)`,
      figure: late / 2 ** 20,
      unit: 'MiB',
      baselineName: 'after 10,000',
      baseline: early / 2 ** 20,
      ratio,
      target: '≤ 1.10×',
      holds: ratio <= 1.1,
    };
  } finally {
    await stopServer(server);
  }
}

/** Each `*.bench.js` beside this file prints its results as lines `BENCH {row as JSON}`. */
async function otherBenches(): Promise<Row[]> {
  const rows: Row[] = [];
  const scripts = readdirSync(here)
    .filter((file) => file.endsWith('.bench.js'))
    .sort();
  for (const script of scripts) {
    console.error(`  ${script}…`);
    const child = spawn(process.execPath, ['--expose-gc', path.join(here, script)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    for await (const line of createInterface({ input: child.stdout! })) {
      if (line.startsWith('BENCH ')) rows.push(JSON.parse(line.slice(6)));
    }
    const code = await new Promise((resolve) =>
      child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', resolve),
    );
    if (code !== 0) throw new Error(`${script} exited with ${code}`);
  }
  return rows;
}

function format(value: number, unit: string) {
  return `${value >= 100 ? Math.round(value).toLocaleString('en') : value.toFixed(2)} ${unit}`;
}

export function table(rows: Row[]): string {
  const header = ['scenario', 'portal', 'baseline', 'ratio', 'target', 'holds'];
  const body = rows.map((row) => [
    row.scenario,
    format(row.figure, row.unit),
    `${row.baselineName}: ${format(row.baseline, row.unit)}`,
    `${row.ratio.toFixed(2)}×`,
    row.target,
    row.target === REPORTED ? '—' : row.holds ? 'yes' : 'NO',
  ]);
  const lines = [header, header.map(() => '---'), ...body].map((cells) => `| ${cells.join(' | ')} |`);
  return lines.join('\n');
}

async function main() {
  if (NAMED?.length === 0) {
    console.error(
      `usage: npm run bench:scenario -- <part of a name>…  (scenarios: ${SCENARIOS.map((s) => s.name).join('; ')})`,
    );
    process.exitCode = 2;
    return;
  }
  const started = Date.now();
  console.error(
    `bench: ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections, ${PIPELINING.join(' and ')} pipelined (targets at ${TARGETED_PIPELINING}, loaded by ${LOAD}), ${pinned ? 'server on core 0, load on core 1' : 'no taskset: cores not pinned'}, Node ${process.version}`,
  );
  if (LOAD === 'autocannon') {
    console.error(
      wrkPath === null
        ? 'bench: wrk is not installed (Debian: apt install wrk): the targeted rows are loaded by autocannon, whose own core limits the fastest servers'
        : 'bench: BENCH_LOAD=autocannon: the targeted rows are loaded by autocannon',
    );
  }
  let http: Awaited<ReturnType<typeof httpScenarios>> = { rows: [], figures: {} };
  if (ONLY.has('http')) {
    const servers = new Map<string, Server>();
    const chosen = SCENARIOS.filter(
      (scenario) => !SCENARIO_FILTER || SCENARIO_FILTER.some((part) => scenario.name.includes(part)),
    );
    for (const name of new Set(chosen.flatMap((scenario) => scenario.contenders)))
      servers.set(name, await startServer(name));
    try {
      http = await httpScenarios(servers);
    } finally {
      for (const server of servers.values()) await stopServer(server);
    }
  }
  const rows = [
    ...http.rows,
    ...(ONLY.has('memory') ? [await memoryScenario()] : []),
    ...(ONLY.has('others') ? await otherBenches() : []),
  ];
  console.log(table(rows));
  const judged = rows.filter((row) => row.target !== REPORTED);
  const failing = judged.filter((row) => !row.holds);
  console.log(
    `\n${judged.length - failing.length} of ${judged.length} targets hold (${Math.round((Date.now() - started) / 1000)} s).`,
  );
  const results = {
    date: new Date().toISOString(),
    node: process.version,
    rounds: ROUNDS,
    seconds: SECONDS,
    pipelining: PIPELINING,
    load: LOAD,
    rows,
    figures: http.figures,
  };
  writeFileSync(path.join(here, 'results.json'), JSON.stringify(results, null, 2));
  // The chart in the source tree shows every HTTP scenario: a run of a few leaves it as it was.
  const chartTarget = path.resolve(here, '../../bench/chart.svg');
  if (ONLY.has('http') && !SCENARIO_FILTER && existsSync(path.dirname(chartTarget)))
    writeFileSync(chartTarget, renderChart(rows));
  process.exitCode = failing.length === 0 ? 0 : 1;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
