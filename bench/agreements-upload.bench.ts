/**
 * POST /agreements against baselines, each server in its own process, the load from this one.
 *
 *   node dist/bench/agreements-upload.bench.js [--rounds 5] [--requests 30] [--samples 7]
 *                                              [--durable-rounds 5] [--seconds 4] [--warmup 2]
 *
 * Baselines: a Fastify app (the target) and a bare node:http server that only parse the same body
 * with busboy and SHA-256-hash each file. Portal: `createPortal` on memory storage and a blob store
 * that reads every byte and keeps none, so all do the same work on the bytes and the difference is
 * the portal's own cost (auth, validation, the signature check, streaming through the blob-store
 * contract, the record). Another server, the portal on a storage that keeps no record, shows the
 * memory adapter's share; another, the bare server holding live objects until its heap is the
 * portal's, shows the share of the heap's size (reported only; see `compareSpeed`).
 *
 * Prints, for uploads of 5 × 1 MiB documents: MB/s (10^6 bytes of request body per second of wall
 * time) and MB per CPU-second of the server (steadier on a shared machine), medians of rounds in
 * rotating order. Then the peak RSS growth over idle of each server while 32 uploads of 5 MiB run
 * at once, median over fresh servers (Linux: VmHWM after resetting it through
 * /proc/<pid>/clear_refs; elsewhere the server samples its own RSS). Idle is the RSS after two
 * uploads and a forced GC.
 *
 * Durable bytes: the portal on `fsBlobs`, and on `sqlBlobs` over PostgreSQL where it answers (the
 * reason printed where not), against a bare server that fsyncs each file before the answer; each
 * round runs for `--seconds`, after `--warmup` seconds of each server.
 */
import type { ChildProcess } from 'node:child_process';
import { pinned, spawnNode } from './support/cores.js';
import { createHash } from 'node:crypto';
import { close, createWriteStream, fsync, mkdtempSync, readFileSync, rename, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { Busboy } from '@fastify/busboy';
import type { BlobStore } from '../src/index.js';
import { median } from './support/median.js';

/**
 * `portal-norecords`: the portal on a storage whose `insertAgreement` keeps nothing, to tell the
 * memory adapter's share apart. `bare-durable` and `portal-fs`: the same with durable bytes, a temp
 * file fsynced and renamed into place before the answer, and the portal on `fsBlobs`. `portal-sql`:
 * the portal on `sqlBlobs` over a `pg.Pool` of 10 (PostgreSQL commits each blob before the answer).
 */
type Kind =
  | 'bare'
  | 'bare-ballast'
  | 'fastify'
  | 'portal'
  | 'portal-norecords'
  | 'bare-durable'
  | 'portal-fs'
  | 'portal-sql';
const KEY = 'bench-key-0123456789abcdef';
const MiB = 1024 * 1024;

// ---------------------------------------------------------------- servers (child processes)

/**
 * The durable floor, written as a Node engineer would: busboy, each file hashed with SHA-256 on its
 * way into a temp file, fsynced, renamed into place; the answer once every file is durable.
 */
function durableHandler(dir: string): http.RequestListener {
  let next = 0;
  return (req, res) => {
    const busboy = Busboy({ headers: req.headers as never });
    const stored: Promise<void>[] = [];
    busboy.on('file', (_name, stream) => {
      const id = `${process.pid}-${next++}`;
      const temp = path.join(dir, `${id}.tmp`);
      const out = createWriteStream(temp, { autoClose: false });
      const hash = createHash('sha256');
      stream.on('data', (chunk: Buffer) => hash.update(chunk));
      stream.pipe(out);
      stored.push(
        new Promise<void>((resolve, reject) => {
          out.on('error', reject);
          out.on('finish', () => {
            hash.digest('hex');
            const { fd } = out as unknown as { fd: number };
            fsync(fd, (syncError) => {
              if (syncError) return reject(syncError);
              close(fd, () => rename(temp, path.join(dir, id), (error) => (error ? reject(error) : resolve())));
            });
          });
        }),
      );
    });
    busboy.on('field', () => {});
    busboy.on('finish', () => {
      Promise.all(stored).then(
        () => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}'),
        (error) => res.writeHead(500).end(String(error)),
      );
    });
    req.pipe(busboy);
  };
}

function bareHandler(req: http.IncomingMessage, res: http.ServerResponse): void {
  hashParts(req, () => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{}');
  });
}

/** The baselines' work on the bytes: busboy parses the body, and each file is SHA-256-hashed. */
function hashParts(req: http.IncomingMessage, finish: () => void): void {
  const busboy = Busboy({ headers: req.headers as never });
  busboy.on('file', (_name, stream) => {
    const hash = createHash('sha256');
    stream.on('data', (chunk: Buffer) => hash.update(chunk));
    stream.on('end', () => hash.digest('hex'));
  });
  busboy.on('field', () => {});
  busboy.on('finish', finish);
  req.pipe(busboy);
}

/**
 * The same work in a Fastify 5 app, as a Fastify user writes a streamed upload without a plugin:
 * the body left unparsed, the raw request piped into busboy. An application around the handler is
 * what every host of the portal has; see `compareSpeed` for what its heap changes.
 */
async function fastifyHandler(): Promise<http.RequestListener> {
  const { default: Fastify } = await import('fastify');
  const app = Fastify({ logger: false });
  app.addContentTypeParser('multipart/form-data', (_request, _payload, done) => done(null));
  app.post('/v1/agreements', (request, reply) => {
    hashParts(request.raw, () => void reply.code(200).send({}));
  });
  await app.ready();
  return (req, res) => app.routing(req, res);
}

/**
 * Reads every byte and keeps none, as the baseline does with them: the portal's side of the
 * comparison without a store's own I/O. (The portal hands `put` a Readable.)
 */
function sinkBlobs(): BlobStore {
  return {
    put(_key, body) {
      return new Promise((resolve, reject) => {
        const stream = body as Readable;
        let size = 0;
        stream.on('data', (chunk: Buffer) => (size += chunk.length));
        stream.on('end', () => resolve({ size }));
        stream.on('error', reject);
      });
    },
    async get() {
      return null;
    },
    async stat() {
      return null;
    },
    async delete() {
      return false;
    },
    async *listBefore() {},
  };
}

async function serve(kind: Kind): Promise<void> {
  let handler: http.RequestListener = bareHandler;
  /** Where the durable contenders write: gigabytes a run, removed when the server exits. */
  let written: string | undefined;
  const scratch = (prefix: string) => (written = mkdtempSync(path.join(process.env.BENCH_DIR ?? os.tmpdir(), prefix)));
  let closePortal = async () => {};
  let dropTables = async () => {};
  if (kind === 'bare-durable') {
    handler = durableHandler(scratch('bench-durable-'));
  } else if (kind === 'fastify') {
    handler = await fastifyHandler();
  } else if (kind.startsWith('portal')) {
    // Loaded here, not at the top, and each kind only what it runs on: a process's heap size sets
    // what each of its collections costs, so the bare servers hold none of the portal's modules,
    // and the portals on memory storage none of the pg driver.
    const { memoryStorage } = await import('../adapters/memory/index.js');
    const { createPortal } = await import('../src/index.js');
    const { BENCH_SIGNING_KEYS } = await import('./support/signing-keys.js');
    const storage = memoryStorage();
    if (kind === 'portal-norecords') storage.insertAgreement = async () => {};
    let blobs: BlobStore = sinkBlobs();
    if (kind === 'portal-fs') {
      const { fsBlobs } = await import('../adapters/fs/index.js');
      blobs = fsBlobs({ dir: scratch('bench-fsblobs-') });
    }
    if (kind === 'portal-sql') {
      const { sqlBlobs } = await import('../adapters/sql/index.js');
      const { connectPostgres, dropSchema } = await import('../test/helpers/sql.js');
      const postgres = await connectPostgres({ max: 10 });
      if (!postgres.pool) throw new Error(postgres.reason);
      const pool = postgres.pool;
      const schema = `bench_upload_${process.pid}`;
      blobs = sqlBlobs({ client: pool, schema });
      dropTables = async () => {
        await dropSchema(pool, schema);
        await pool.end();
      };
    }
    const portal = await createPortal({
      auth: { apiKeys: { [KEY]: 'acct_bench' } },
      signingKeys: BENCH_SIGNING_KEYS,
      storage,
      blobs,
    });
    handler = portal.handler;
    closePortal = () => portal.close();
  }
  const server = http.createServer(handler);
  // The fallback where /proc is missing: the server samples its own RSS between 'idle' and 'peak'.
  let peak = 0;
  let sampler: NodeJS.Timeout | undefined;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
  /** `bare-ballast`'s live objects: as many as bring its heap to the portal's (see `compareSpeed`). */
  const ballast: { id: number; name: string; tags: number[] }[] = [];
  process.on('message', async (message: { cmd: string; bytes?: number }) => {
    if (message.cmd === 'heap') {
      process.send!({ value: heapAfterGc() });
    } else if (message.cmd === 'ballast') {
      while (heapAfterGc() < message.bytes!) {
        for (let i = 0; i < 2_000; i++)
          ballast.push({ id: ballast.length, name: `entry ${ballast.length}`, tags: [ballast.length] });
      }
      process.send!({ value: heapAfterGc() });
    } else if (message.cmd === 'idle') {
      for (let i = 0; i < 3; i++) {
        collect();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      peak = process.memoryUsage.rss();
      sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5);
      process.send!({ value: peak });
    } else if (message.cmd === 'cpu') {
      // CPU seconds this process has used: the server's own cost, whatever else runs on the machine.
      const { user, system } = process.cpuUsage();
      process.send!({ value: (user + system) / 1e6 });
    } else if (message.cmd === 'peak') {
      clearInterval(sampler);
      process.send!({ value: peak });
    } else if (message.cmd === 'exit') {
      server.close();
      await closePortal();
      await dropTables();
      if (written !== undefined) rmSync(written, { recursive: true, force: true });
      process.exit(0);
    }
  });
}

// ---------------------------------------------------------------- load (this process)

const BOUNDARY = 'bench-boundary-q8Zr3';

function uploadBody(documents: number, size: number): Buffer {
  const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(2000, 7)]);
  const text: [string, string][] = [
    ['name', 'Benchmark agreement'],
    ['signerName', 'Ann Owner'],
    ['signerSignatureData', 'data:image/png;base64,' + png.toString('base64')],
    ['signers', JSON.stringify({ firstName: 'Bo', lastName: 'Lee', email: 'bo@example.com', shouldIdentify: false })],
  ];
  const chunks: Buffer[] = [];
  for (const [name, value] of text) {
    chunks.push(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  }
  for (let i = 0; i < documents; i++) {
    const bytes = Buffer.alloc(size);
    for (let j = 0; j < size; j += 4096) bytes[j] = (i + j) & 0xff;
    chunks.push(
      Buffer.from(
        `--${BOUNDARY}\r\nContent-Disposition: form-data; name="documents"; filename="doc${i}.pdf"\r\nContent-Type: application/pdf\r\n\r\n`,
      ),
    );
    chunks.push(bytes, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(chunks);
}

interface Server {
  kind: Kind;
  child: ChildProcess;
  port: number;
  ask(cmd: string, bytes?: number): Promise<number>;
}

/** A full collection, where the process runs with `--expose-gc` (every server here does). */
const collect = () => (globalThis as { gc?: () => void }).gc?.();

/** The JS heap in use once collected: what each mark-compact of the process has to mark. */
function heapAfterGc(): number {
  collect();
  collect();
  return process.memoryUsage().heapUsed;
}

async function start(kind: Kind): Promise<Server> {
  const args = ['--expose-gc', fileURLToPath(import.meta.url), '--serve', kind];
  const stdio: ['ignore', 'inherit', 'inherit', 'ipc'] = ['ignore', 'inherit', 'inherit', 'ipc'];
  const child = spawnNode(0, args, { stdio });
  const port = await new Promise<number>((resolve) =>
    child.once('message', (message: { port: number }) => resolve(message.port)),
  );
  const ask = (cmd: string, bytes?: number) =>
    new Promise<number>((resolve) => {
      child.once('message', (message: { value: number }) => resolve(message.value));
      child.send({ cmd, bytes });
    });
  return { kind, child, port, ask };
}

function post(server: Server, agent: http.Agent, body: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: server.port,
        path: '/v1/agreements',
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${KEY}`,
          'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
          'content-length': body.length,
        },
      },
      (res) => {
        const expected = server.kind.startsWith('portal') ? 201 : 200;
        let text = '';
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () =>
          res.statusCode === expected ? resolve() : reject(new Error(`${server.kind}: ${res.statusCode} ${text}`)),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** MB/s of request body over wall time, and MB per CPU-second of the server. */
interface Load {
  wall: number;
  cpu: number;
}

/**
 * Sends uploads, `concurrency` at a time, until `requests` were sent or, given `{ seconds }`, until
 * that time has passed: the clients take no new upload then and the load ends with the last answer.
 */
async function load(
  server: Server,
  body: Buffer,
  until: number | { seconds: number },
  concurrency: number,
): Promise<Load> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  let started = 0;
  let answered = 0;
  const cpuBefore = await server.ask('cpu');
  const start = process.hrtime.bigint();
  const end = typeof until === 'number' ? 0n : start + BigInt(Math.round(until.seconds * 1e9));
  const more = typeof until === 'number' ? () => started < until : () => process.hrtime.bigint() < end;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (more()) {
        started++;
        await post(server, agent, body);
        answered++;
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const cpuSeconds = (await server.ask('cpu')) - cpuBefore;
  agent.destroy();
  const megabytes = (body.length * answered) / 1e6;
  return { wall: megabytes / seconds, cpu: megabytes / cpuSeconds };
}

/** Peak RSS of the process: VmHWM, reset first through clear_refs, where Linux offers it. */
function procPeak(pid: number) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
  } catch {
    return null;
  }
}

/** A fresh server, warmed by two uploads one after the other, then `concurrency` uploads at once. */
async function rssGrowth(kind: Kind, body: Buffer, concurrency: number) {
  const server = await start(kind);
  try {
    return await measureGrowth(server, body, concurrency);
  } finally {
    server.child.send({ cmd: 'exit' });
  }
}

async function measureGrowth(server: Server, body: Buffer, concurrency: number) {
  await load(server, body, 2, 1);
  const idle = await server.ask('idle');
  const readPeak = procPeak(server.child.pid!);
  await load(server, body, concurrency, concurrency);
  const sampled = await server.ask('peak');
  const peak = readPeak?.() ?? sampled;
  return { idle, peak, growth: peak - idle, source: readPeak ? 'VmHWM' : 'sampled' };
}

/**
 * One row for `npm run bench` (bench/run.ts collects `BENCH {row}` lines into its table); `target`
 * null: a figure the issue sets no target for, reported only. `ratio` defaults to figure over baseline.
 */
function row(
  scenario: string,
  figure: number,
  unit: string,
  baselineName: string,
  baseline: number,
  target: number | null,
  bound: 'at least' | 'at most',
  ratio = figure / baseline,
) {
  const holds = target === null || (bound === 'at least' ? ratio >= target : ratio <= target);
  const text = target === null ? 'none (reported)' : `${bound === 'at least' ? '≥' : '≤'} ${target}×`;
  console.log(
    'BENCH ' + JSON.stringify({ scenario, figure, unit, baselineName, baseline, ratio, target: text, holds }),
  );
}

const mib = (bytes: number) => (bytes / MiB).toFixed(1);
const option = (name: string, fallback: number) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? fallback : Number(process.argv[at + 1]);
};

/**
 * Warms each server, then `rounds` rounds of `requests` uploads each, in an order that rotates each
 * round so that load from elsewhere on the machine falls on all alike; MB/s and MB per CPU-second by kind.
 */
async function measureRounds(servers: Server[], body: Buffer, rounds: number, requests: number, concurrency: number) {
  for (const server of servers) await load(server, body, 8, concurrency);
  const wall: Record<string, number[]> = {};
  const cpu: Record<string, number[]> = {};
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < servers.length; i++) {
      const server = servers[(i + round) % servers.length]!;
      const result = await load(server, body, requests, concurrency);
      (wall[server.kind] ??= []).push(result.wall);
      (cpu[server.kind] ??= []).push(result.cpu);
    }
  }
  return { wall, cpu };
}

/**
 * The uploads against the same work in a Fastify app (the target), and, reported only, against the
 * bare `node:http` server and `bare-ballast`: the bare server holding as many more live objects as
 * bring its collected heap to the portal's after its warm-up.
 *
 * The bare server's heap (6.7 MiB) is under V8's 8 MiB threshold for incremental marking, so the
 * uploads' allocations never start a marking cycle there; any process whose old generation is over
 * it (an empty Express app's is 8.9 MiB, an empty Fastify app's 10.8) marks and compacts about twice
 * as often under the same uploads (docs/performance.md, "Uploads and V8's marking threshold"). The
 * Fastify app is the fastest form in a process an application lives in; the ballast row shows how
 * much of the gap to bare is the heap's size rather than work on the bytes.
 */
async function compareSpeed(body: Buffer, rounds: number, requests: number, concurrency: number): Promise<void> {
  const kinds = ['bare', 'fastify', 'portal', 'portal-norecords', 'bare-ballast'] as const;
  const servers = await Promise.all(kinds.map(start));
  const portal = servers[kinds.indexOf('portal')]!;
  try {
    await load(portal, body, 8, concurrency);
    const portalHeap = await portal.ask('heap');
    const fastifyHeap = await servers[kinds.indexOf('fastify')]!.ask('heap');
    const ballastHeap = await servers[kinds.indexOf('bare-ballast')]!.ask('ballast', portalHeap);
    const { wall, cpu } = await measureRounds(servers, body, rounds, requests, concurrency);
    const list = (values: number[]) => values.map((value) => value.toFixed(0)).join(', ');
    console.log(
      `Upload of 5 × 1 MiB documents (${body.length} bytes a request), ${requests} requests × ${rounds} rounds, ${concurrency} at a time; medians`,
    );
    for (const kind of kinds) {
      const label = {
        bare: 'bare busboy + sha256',
        fastify: 'Fastify, busboy + sha256',
        portal: 'portal',
        'portal-norecords': 'portal, no records kept',
        'bare-ballast': 'bare, heap as the portal',
      }[kind];
      console.log(
        `  ${label.padEnd(24)} ${median(wall[kind]!).toFixed(1)} MB/s   ${median(cpu[kind]!).toFixed(1)} MB per server CPU-second   (rounds: ${list(wall[kind]!)} | ${list(cpu[kind]!)})`,
      );
    }
    console.log(
      `  collected heap after warm-up: portal ${mib(portalHeap)} MiB, Fastify ${mib(fastifyHeap)} MiB, bare with ballast ${mib(ballastHeap)} MiB`,
    );
    for (const [kind, against] of [
      ['portal', 'fastify'],
      ['portal-norecords', 'fastify'],
      ['portal', 'bare'],
      ['bare-ballast', 'bare'],
    ] as const) {
      const byWall = median(wall[kind]!) / median(wall[against]!);
      const byCpu = median(cpu[kind]!) / median(cpu[against]!);
      const target = kind === 'portal' && against === 'fastify' ? '   (target >= 0.80)' : '';
      console.log(
        `  ratio ${kind} / ${against}: ${byWall.toFixed(2)} in MB/s, ${byCpu.toFixed(2)} per CPU-second${target}`,
      );
    }
    const scenario = 'POST /v1/agreements, 5 × 1 MiB';
    const fastify = 'Fastify, busboy + sha256';
    const bare = 'bare busboy + sha256';
    row(scenario, median(wall.portal!), 'MB/s', fastify, median(wall.fastify!), 0.8, 'at least');
    row(scenario, median(wall.portal!), 'MB/s', bare, median(wall.bare!), null, 'at least');
    row(
      `${scenario}, per server CPU-second`,
      median(cpu.portal!),
      'MB',
      fastify,
      median(cpu.fastify!),
      null,
      'at least',
    );
    row(`${scenario}, per server CPU-second`, median(cpu.portal!), 'MB', bare, median(cpu.bare!), null, 'at least');
    const ballast = `${bare}, heap as the portal`;
    row(
      `${scenario}, against bare with the portal's heap`,
      median(wall.portal!),
      'MB/s',
      ballast,
      median(wall['bare-ballast']!),
      null,
      'at least',
    );
  } finally {
    for (const server of servers) server.child.send({ cmd: 'exit' });
  }
}

/** Fresh server pairs, measured alternately; GC timing makes a single measurement noisy, so the medians count. */
async function compareMemory(body: Buffer, concurrency: number, samples: number): Promise<void> {
  const growth: Record<'bare' | 'portal', number[]> = { bare: [], portal: [] };
  let source = '';
  for (let sample = 0; sample < samples; sample++) {
    for (const kind of sample % 2 === 0 ? (['bare', 'portal'] as const) : (['portal', 'bare'] as const)) {
      const result = await rssGrowth(kind, body, concurrency);
      growth[kind].push(result.growth);
      source = result.source;
    }
  }
  const bare = median(growth.bare);
  const portal = median(growth.portal);
  console.log(
    `Peak RSS growth over idle, ${concurrency} concurrent uploads of 5 MiB, median of ${samples} fresh servers each (${source})`,
  );
  console.log(`  bare     ${mib(bare)} MiB   (samples: ${growth.bare.map(mib).join(', ')})`);
  console.log(`  portal   ${mib(portal)} MiB   (samples: ${growth.portal.map(mib).join(', ')})`);
  console.log(`  ratio portal / bare    ${(portal / bare).toFixed(2)}   (target <= 1.25)`);
  console.log(`  portal under 80 MiB (half of ${concurrency} × 5 MiB held): ${portal < 80 * MiB ? 'yes' : 'NO'}`);
  const scenario = `POST /v1/agreements, peak RSS growth, ${concurrency} × 5 MiB at once`;
  row(scenario, portal / MiB, 'MiB', 'bare busboy + sha256', bare / MiB, 1.25, 'at most');
  row(scenario, portal / MiB, 'MiB', `half of ${concurrency} × 5 MiB held`, 80, 1, 'at most');
}

/** The durable stores measured against the durable floor: their label, row and target. */
const DURABLE_STORES = {
  'portal-fs': { label: 'fsBlobs', scenario: 'POST /v1/agreements, 5 × 1 MiB, fsBlobs (fsynced)', target: 0.85 },
  'portal-sql': {
    label: 'sqlBlobs (PostgreSQL)',
    scenario: 'POST /v1/agreements, 5 × 1 MiB, sqlBlobs on PostgreSQL',
    target: null,
  },
} as const;

/**
 * Durable bytes: the portal on `store` against the durable floor, 8 keep-alive clients, `warmup`
 * seconds of each, then `rounds` rounds of `seconds` each, the two servers in turns whose order
 * alternates. MB/s of request body, server CPU per MB, and peak RSS (VmHWM over the rounds). The
 * ratio is the median of each round's (its two measurements a few seconds apart): the disk's pace
 * moves by a quarter between rounds here, and the pairs cancel that drift.
 */
async function compareDurable(
  store: keyof typeof DURABLE_STORES,
  body: Buffer,
  rounds: number,
  seconds: number,
  warmup: number,
): Promise<void> {
  const concurrency = 8;
  const { label, scenario, target } = DURABLE_STORES[store];
  const kinds = ['bare-durable', store] as const;
  const servers = await Promise.all(kinds.map(start));
  try {
    for (const server of servers) await load(server, body, { seconds: warmup }, concurrency);
    const peaks = servers.map((server) => procPeak(server.child.pid!));
    const results: Load[][] = [[], []];
    for (let round = 0; round < rounds; round++) {
      for (const i of round % 2 === 0 ? [0, 1] : [1, 0])
        results[i]!.push(await load(servers[i]!, body, { seconds }, concurrency));
    }
    const [bare, portal] = results as [Load[], Load[]];
    const wall = median(portal.map((result, round) => result.wall / bare[round]!.wall));
    const cpu = median(portal.map((result, round) => result.cpu / bare[round]!.cpu));
    const rss = peaks.map((peak) => peak?.() ?? NaN);
    const medianOf = (runs: Load[], key: keyof Load) => median(runs.map((run) => run[key]));
    console.log(
      `Durable upload of 5 × 1 MiB documents onto ${label}, ${concurrency} at a time, ${warmup} s of warm-up, ${rounds} rounds of ${seconds} s`,
    );
    for (const [i, kind] of kinds.entries()) {
      const runs = results[i]!;
      const peak = Number.isNaN(rss[i]!) ? 'peak RSS not read (no /proc)' : `peak RSS ${mib(rss[i]!)} MiB`;
      console.log(
        `  ${kind.padEnd(14)} ${medianOf(runs, 'wall').toFixed(1)} MB/s   ${(1000 / medianOf(runs, 'cpu')).toFixed(2)} ms of server CPU per MB   ${peak}   (rounds: ${runs.map((run) => run.wall.toFixed(0)).join(', ')} MB/s)`,
      );
    }
    console.log(`  ratio, median of the rounds' ratios: ${wall.toFixed(2)} in MB/s, ${cpu.toFixed(2)} per CPU-second`);
    const baseline = 'bare busboy + sha256 + fsync + rename';
    // The figures are medians of each server's rounds; the ratio is the paired one above.
    row(scenario, medianOf(portal, 'wall'), 'MB/s', baseline, medianOf(bare, 'wall'), target, 'at least', wall);
    row(
      `${scenario}, per server CPU-second`,
      medianOf(portal, 'cpu'),
      'MB',
      baseline,
      medianOf(bare, 'cpu'),
      null,
      'at least',
      cpu,
    );
    if (!Number.isNaN(rss[0]!))
      row(`${scenario}, peak RSS`, rss[1]! / MiB, 'MiB', baseline, rss[0]! / MiB, null, 'at most');
  } finally {
    for (const server of servers) server.child.send({ cmd: 'exit' });
  }
}

async function main(): Promise<void> {
  if (!pinned) console.log('(taskset not found: server and load processes are not pinned to cores)');
  const rounds = option('--rounds', 5);
  const body = uploadBody(5, MiB);
  if (rounds > 0) await compareSpeed(body, rounds, option('--requests', 30), 4);
  const durable = [option('--durable-rounds', 5), option('--seconds', 4), option('--warmup', 2)] as const;
  if (rounds > 0 && durable[0] > 0) {
    await compareDurable('portal-fs', body, ...durable);
    // On its own: PostgreSQL's writes after a round (WAL, checkpoints) would fall on the next server's.
    const { connectPostgres } = await import('../test/helpers/sql.js');
    const postgres = await connectPostgres({ max: 1 });
    if (postgres.pool) {
      await postgres.pool.end();
      await compareDurable('portal-sql', body, ...durable);
    } else {
      console.log(`Durable upload onto sqlBlobs skipped: ${postgres.reason}`);
    }
  }
  await compareMemory(body, 32, option('--samples', 7));
}

const serveAt = process.argv.indexOf('--serve');
if (serveAt >= 0) await serve(process.argv[serveAt + 1] as Kind);
else await main();
