/**
 * The SQL adapter against the memory adapter, in one run:
 *   npm run build && node dist/bench/sql.bench.js
 *   (BENCH_ROUNDS=3 BENCH_SECONDS=2 BENCH_CONCURRENCY=16 by default)
 *
 * Storage level (in this process, `BENCH_CONCURRENCY` calls in flight): `getWebhook` calls/s and
 * `publishEvents` events/s (one event per call, one subscribed webhook, so one delivery each),
 * on memory, PostgreSQL (a `pg.Pool` of 10 on 127.0.0.1:5432, skipped with a reason when it does
 * not answer) and PGlite. HTTP level: `GET /v1/webhooks/{id}` req/s on a portal in its own process
 * per storage, load from this process (autocannon, 32 connections). Rounds are interleaved and the
 * median is reported with its ratio to memory. There is no target: a database round trip costs
 * what it costs; the figures say how much, on this machine, in this run.
 *
 * The PostgreSQL path against its peer (targets ≥ 1×): `GET /v1/webhooks/{id}` (1,000 ids cycled)
 * and `GET /v1/files` (1,000 entries) of the portal on `sqlStorage` over a `pg.Pool` of 10, against
 * Fastify routes doing the same parameterized SELECTs on a `pg.Pool` of 10 over the same tables
 * (`servers/fastify-pg.ts`), each server in its own process (on core 0 with `taskset`), 32
 * connections one request at a time, loaded by `wrk` (autocannon where it is missing, saying so);
 * requests/s, the server's CPU time a request and the PostgreSQL server's (every `postgres`
 * process, from /proc), median of `BENCH_ROUNDS` (5) interleaved rounds of `BENCH_SECONDS` (2).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readyLine, spawnNode } from './support/cores.js';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import autocannon from 'autocannon';
import type pg from 'pg';
import { memoryStorage } from '../adapters/memory/index.js';
import { sqlStorage } from '../adapters/sql/index.js';
import type { Storage } from '../src/index.js';
import { webhookRecord } from '../test/conformance/fixtures.js';
import { connectPostgres, dropSchema } from '../test/helpers/sql.js';
import { newEvent } from './support/records.js';
import { checkSameAnswers } from './support/answers.js';
import { KEY, directoryId, storageRecords, webhooks } from './servers/fixture.js';
import { median } from './support/median.js';
import { postgresCpu } from './support/proc-cpu.js';
import { loadCheckRow, wrkPath, wrkRound } from './support/wrk.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const SCHEMA = `portal_bench_${process.pid}`;
const SERVER = fileURLToPath(new URL('./sql-server.js', import.meta.url));

/** Calls `operation` from `CONCURRENCY` loops for `SECONDS`; resolves completed calls per second. */
async function rate(operation: () => Promise<unknown>): Promise<number> {
  const deadline = performance.now() + SECONDS * 1000;
  let done = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < deadline) {
        await operation();
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

interface Contender {
  name: string;
  storage: Storage;
  webhookId: string;
}

async function contender(name: string, storage: Storage): Promise<Contender> {
  await storage.open?.();
  const webhook = webhookRecord({ accountId: 'acct_bench' });
  await storage.insertWebhook(webhook);
  return { name, storage, webhookId: webhook.id };
}

interface Server {
  name: string;
  child: ChildProcess;
  url: string;
  key: string;
}

async function startServer(name: string, kind: string): Promise<Server> {
  const child = spawn(process.execPath, [SERVER, kind, SCHEMA], { stdio: ['ignore', 'pipe', 'inherit'] });
  const info = (await readyLine(name, child)) as { port: number; webhookId: string; key: string };
  return { name, child, url: `http://127.0.0.1:${info.port}/v1/webhooks/${info.webhookId}`, key: info.key };
}

async function requestsPerSecond(server: Server, seconds: number): Promise<number> {
  const result = await autocannon({
    url: server.url,
    headers: { authorization: `Bearer ${server.key}` },
    connections: 32,
    duration: seconds,
  });
  if (result.errors > 0 || result.non2xx > 0)
    throw new Error(`${server.name}: ${result.errors} errors, ${result.non2xx} non-2xx answers`);
  return result.requests.total / seconds;
}

/** Interleaved rounds after one warm-up each; resolves the runs of every contender. */
async function measure<T extends { name: string }>(
  contenders: T[],
  run: (contender: T, seconds: number) => Promise<number>,
) {
  for (const one of contenders) await run(one, 1);
  const runs = new Map<string, number[]>(contenders.map((one) => [one.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]!);
    for (const one of order) runs.get(one.name)!.push(await run(one, SECONDS));
  }
  return runs;
}

function report(scenario: string, unit: string, runs: Map<string, number[]>) {
  const baseline = median(runs.get('memory')!);
  console.log(`${scenario} (${unit}, median of ${ROUNDS})`);
  for (const [name, values] of runs) {
    const figure = median(values);
    console.log(
      `  ${name.padEnd(12)} ${Math.round(figure).toLocaleString('en').padStart(10)}  ratio to memory ${(figure / baseline).toFixed(3)}×` +
        `  (runs: ${values.map((value) => Math.round(value)).join(', ')})`,
    );
    if (name === 'memory') continue;
    // One row per SQL contender for `npm run bench`; reported, with no pass/fail target.
    const row = {
      scenario: `${scenario}, ${name}`,
      figure,
      unit,
      baselineName: 'memory',
      baseline,
      ratio: figure / baseline,
      target: 'none (reported)',
      holds: true,
    };
    console.log(`BENCH ${JSON.stringify(row)}`);
  }
}

interface Peer {
  name: string;
  child: ChildProcess;
  port: number;
}

/** A server of `servers/` on the PostgreSQL path, on core 0 where `taskset` exists, answering `cpu` over IPC. */
async function startPeer(name: string, script: string, schema: string): Promise<Peer> {
  const args = [fileURLToPath(new URL(`./servers/${script}.js`, import.meta.url)), schema];
  const child = spawnNode(0, args, { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  return { name, child, port: (await readyLine(name, child)).port as number };
}

function askCpu(peer: Peer): Promise<number> {
  return new Promise((resolve) => {
    peer.child.once('message', (message: { cpu: number }) => resolve(message.cpu));
    peer.child.send('cpu');
  });
}

/** The load of one round: answers and seconds, failures, and wrk's share of its core (null under autocannon). */
async function loadRound(peer: Peer, paths: string[], seconds: number) {
  const headers = { authorization: `Bearer ${KEY}` };
  if (wrkPath !== null) {
    const round = await wrkRound(peer.port, paths, headers, seconds, 32);
    return {
      answered: round.answered,
      seconds: round.seconds,
      failed: round.errors + round.non2xx,
      loadCpuShare: round.loadCpuShare as number | null,
    };
  }
  const requests = paths.map((path) => ({ method: 'GET' as const, path }));
  const result = await autocannon({
    url: `http://127.0.0.1:${peer.port}`,
    headers,
    requests,
    connections: 32,
    duration: seconds,
  });
  return { answered: result.requests.total, seconds, failed: result.errors + result.non2xx, loadCpuShare: null };
}

/**
 * Requests/s, and the CPU µs a request of the server and of the PostgreSQL server, over one round
 * of `seconds`, the load cycling through `paths`.
 */
async function peerRound(peer: Peer, paths: string[], seconds: number) {
  const before = await askCpu(peer);
  const database = postgresCpu();
  const round = await loadRound(peer, paths, seconds);
  const cpu = (await askCpu(peer)) - before;
  const databaseSeconds = database?.seconds() ?? Number.NaN;
  if (round.failed > 0) throw new Error(`${peer.name} ${paths[0]}: ${round.failed} failed requests or non-2xx answers`);
  return {
    perSecond: round.answered / round.seconds,
    cpu: cpu / round.answered,
    databaseCpu: (databaseSeconds * 1e6) / round.answered,
    loadCpuShare: round.loadCpuShare,
  };
}

const PEER_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const PEER_SECONDS = Number(process.env.BENCH_SECONDS ?? 2);

/** The PostgreSQL path: the portal against Fastify + pg on the same tables (see the top of this file). */
async function postgresPeers(pool: pg.Pool): Promise<void> {
  const schema = `${SCHEMA}_peers`;
  const storage = sqlStorage({ client: pool, schema });
  await storage.open?.();
  const records = storageRecords();
  await storage.insertFileEntry(records.directory);
  for (const entry of records.entries) await storage.insertFileEntry(entry);
  for (const webhook of records.webhooks) await storage.insertWebhook(webhook);
  await pool.query(`ANALYZE "${schema}"."portal_webhooks", "${schema}"."portal_file_entries"`);
  const peers: Peer[] = [];
  try {
    peers.push(await startPeer('portal', 'portal-sql', schema), await startPeer('Fastify + pg', 'fastify-pg', schema));
    const scenarios = [
      { name: 'PostgreSQL GET /v1/webhooks/{id}', paths: webhooks.map((one) => `/v1/webhooks/${one.id}`) },
      { name: 'PostgreSQL GET /v1/files (1,000 entries)', paths: [`/v1/files?directoryId=${directoryId}`] },
    ];
    const loader = wrkPath === null ? 'autocannon (wrk is not installed)' : 'wrk';
    console.log(
      `PostgreSQL path: ${PEER_ROUNDS} rounds of ${PEER_SECONDS} s, 32 connections, one request at a time each, loaded by ${loader}, pg.Pool of 10 each`,
    );
    for (const scenario of scenarios) {
      const urls = new Map(peers.map((peer) => [peer.name, `http://127.0.0.1:${peer.port}${scenario.paths[0]}`]));
      await checkSameAnswers(scenario.name, urls, { authorization: `Bearer ${KEY}` });
      for (const peer of peers) await peerRound(peer, scenario.paths, 1);
      const rates = new Map<string, number[]>(peers.map((peer) => [peer.name, []]));
      const cpus = new Map<string, number[]>(peers.map((peer) => [peer.name, []]));
      const databaseCpus = new Map<string, number[]>(peers.map((peer) => [peer.name, []]));
      const loadShares = new Map<string, number[]>(peers.map((peer) => [peer.name, []]));
      for (let round = 0; round < PEER_ROUNDS; round++) {
        for (const peer of round % 2 === 0 ? peers : [...peers].reverse()) {
          const measured = await peerRound(peer, scenario.paths, PEER_SECONDS);
          rates.get(peer.name)!.push(measured.perSecond);
          cpus.get(peer.name)!.push(measured.cpu);
          databaseCpus.get(peer.name)!.push(measured.databaseCpu);
          if (measured.loadCpuShare !== null) loadShares.get(peer.name)!.push(measured.loadCpuShare);
        }
      }
      const [portal, fastify] = peers.map((peer) => ({
        rate: median(rates.get(peer.name)!),
        cpu: median(cpus.get(peer.name)!),
        databaseCpu: median(databaseCpus.get(peer.name)!),
      }));
      const us = (value: number) => `${value.toFixed(1)} µs`;
      console.log(
        `  ${scenario.name}: portal ${Math.round(portal!.rate)} req/s, ${us(portal!.cpu)} server and ${us(portal!.databaseCpu)} PostgreSQL CPU a request;` +
          ` Fastify + pg ${Math.round(fastify!.rate)} req/s, ${us(fastify!.cpu)} and ${us(fastify!.databaseCpu)}` +
          `  (runs: ${peers.map((peer) => rates.get(peer.name)!.map(Math.round).join('/')).join(' against ')})`,
      );
      const ratio = portal!.rate / fastify!.rate;
      const row = {
        scenario: scenario.name,
        figure: portal!.rate,
        unit: 'req/s',
        baselineName: 'Fastify + pg',
        baseline: fastify!.rate,
        ratio,
        target: '≥ 1×',
        holds: ratio >= 1,
      };
      const cpuRow = {
        scenario: `${scenario.name}, server CPU a request`,
        figure: portal!.cpu,
        unit: 'µs',
        baselineName: 'Fastify + pg',
        baseline: fastify!.cpu,
        ratio: fastify!.cpu / portal!.cpu,
        target: 'none (reported)',
        holds: true,
      };
      console.log(`BENCH ${JSON.stringify(row)}`);
      console.log(`BENCH ${JSON.stringify(cpuRow)}`);
      if (!Number.isNaN(portal!.databaseCpu)) {
        const databaseRow = {
          ...cpuRow,
          scenario: `${scenario.name}, PostgreSQL CPU a request`,
          figure: portal!.databaseCpu,
          baseline: fastify!.databaseCpu,
          ratio: fastify!.databaseCpu / portal!.databaseCpu,
        };
        console.log(`BENCH ${JSON.stringify(databaseRow)}`);
      }
      const faster = portal!.rate >= fastify!.rate ? peers[0]! : peers[1]!;
      const shares = loadShares.get(faster.name)!;
      if (shares.length > 0) console.log(`BENCH ${JSON.stringify(loadCheckRow(scenario.name, faster.name, shares))}`);
    }
  } finally {
    for (const peer of peers) {
      peer.child.kill();
      await new Promise((resolve) => (peer.child.exitCode !== null ? resolve(null) : peer.child.once('exit', resolve)));
    }
    await storage.close?.();
    await dropSchema(pool, schema);
  }
}

/** `node dist/bench/sql.bench.js peers`: only the PostgreSQL path against Fastify + pg. */
const PEERS_ONLY = process.argv[2] === 'peers';
const postgres = await connectPostgres({ max: 10 });
if (!postgres.pool) console.error(`sql.bench: PostgreSQL skipped: ${postgres.reason}`);
const pglite = await PGlite.create();
const contenders = [await contender('memory', memoryStorage())];
if (postgres.pool)
  contenders.push(await contender('PostgreSQL', sqlStorage({ client: postgres.pool, schema: SCHEMA })));
contenders.push(await contender('PGlite', sqlStorage({ client: pglite, schema: SCHEMA })));

const servers: Server[] = [];
try {
  if (!PEERS_ONLY) {
    console.log(`sql.bench: ${ROUNDS} rounds of ${SECONDS} s, ${CONCURRENCY} calls in flight (storage level)`);
    report(
      'storage getWebhook',
      'calls/s',
      await measure(contenders, (one) => rate(() => one.storage.getWebhook('acct_bench', one.webhookId))),
    );
    report(
      'storage publishEvents, 1 event and 1 delivery per call',
      'events/s',
      await measure(contenders, (one) =>
        rate(() => one.storage.publishEvents([newEvent('acct_bench', 'customer-created', { n: 1 }, new Date())])),
      ),
    );

    servers.push(await startServer('memory', 'memory'));
    if (postgres.pool) servers.push(await startServer('PostgreSQL', 'postgres'));
    servers.push(await startServer('PGlite', 'pglite'));
    report('HTTP GET /v1/webhooks/{id}, 32 connections', 'req/s', await measure(servers, requestsPerSecond));
  }
  if (postgres.pool) await postgresPeers(postgres.pool);
  else console.error(`sql.bench: the PostgreSQL path against Fastify + pg skipped: ${postgres.reason}`);
} finally {
  for (const server of servers) {
    server.child.kill();
    await new Promise((resolve) =>
      server.child.exitCode !== null ? resolve(null) : server.child.once('exit', resolve),
    );
  }
  for (const one of contenders) await one.storage.close?.();
  if (postgres.pool) {
    await dropSchema(postgres.pool, SCHEMA);
    await postgres.pool.end();
  }
  await pglite.close();
}
