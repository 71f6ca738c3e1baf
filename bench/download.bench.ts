/**
 * Downloading a 5 MiB attachment through a signed link, against a bare
 * `fs.createReadStream(file).pipe(res)` server streaming the same bytes, in one run.
 *
 *   npm run build && node dist/bench/download.bench.js
 *   (BENCH_ROUNDS=5 BENCH_SECONDS=2 BENCH_CONCURRENCY=4 by default)
 *
 * Two portals are measured: one on the memory blob store (the default) and one on `fsBlobs`, which
 * reads a file from disk as the bare server does (through its reader, into two buffers used again,
 * where bare's stream makes a new one a chunk): that pair isolates what the portal adds
 * (routing, signature check, record lookup, headers). Each server runs in its own process, on core 0
 * where `taskset` exists, so that no server shares its heap, its garbage collections or its event
 * loop with another; the load comes from a separate process (`download-client.js`) on core 1. Rounds
 * rotate the servers' order and the median of each is reported, with the server's CPU time a MiB
 * beside it (steadier on a shared host). Target: each portal ≥ 0.8× the bare server's throughput.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BlobStore } from '../src/index.js';
import { pinned, readyLine, spawnNode } from './support/cores.js';
import { REPORTED, emit } from './support/row.js';
import { median } from './support/median.js';

const SIZE = 5 * 1024 * 1024;
const MIB = SIZE / 1024 / 1024;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 4);
const CLIENT = fileURLToPath(new URL('./download-client.js', import.meta.url));
const HERE = fileURLToPath(import.meta.url);

type Kind = 'bare' | 'memory' | 'fs';
const NAMES: Record<Kind, string> = {
  bare: 'bare fs.createReadStream(file).pipe(res)',
  memory: 'portal link, memory blob store',
  fs: 'portal link, fsBlobs',
};

/** The bytes every server sends: the same 5 MiB, not all zeros. */
function fiveMiB(): Buffer {
  const bytes = Buffer.alloc(SIZE);
  for (let i = 0; i < SIZE; i++) bytes[i] = (i * 31 + (i >> 11)) & 0xff;
  return bytes;
}

// ---------------------------------------------------------------- servers (child processes)

/** Serves one contender from this process; prints `READY {url}` and answers `cpu` over IPC. */
async function serve(kind: Kind, dir: string): Promise<void> {
  const bytes = fiveMiB();
  let handler: http.RequestListener;
  let path = '/';
  let close = async () => {};
  if (kind === 'bare') {
    const file = join(dir, 'bare.bin');
    await writeFile(file, bytes);
    handler = (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': SIZE });
      createReadStream(file).pipe(res);
    };
  } else {
    // Loaded here, not at the top: the bare server's process holds none of the portal's modules
    // in its heap, whose size sets what each of its collections costs.
    const { fsBlobs } = await import('../adapters/fs/index.js');
    const { createPortal } = await import('../src/index.js');
    const { SIGNING_KEY_1 } = await import('../test/helpers/download.js');
    const blobs: BlobStore | undefined = kind === 'fs' ? fsBlobs({ dir: join(dir, 'fs-blobs') }) : undefined;
    const portal = await createPortal({
      auth: { apiKeys: { 'bench-key-0123456789abcdef': 'acct_bench' } },
      signingKeys: [SIGNING_KEY_1],
      webhooks: { worker: false },
      ...(blobs && { blobs }),
    });
    const attachment = await portal.tickets.putAttachment('acct_bench', {
      name: 'five-mib.bin',
      mime: 'application/octet-stream',
      body: bytes,
    });
    const { link } = await portal.tickets.downloadLink(
      'acct_bench',
      { ticketId: attachment.ticketId, messageId: attachment.messageId, attachmentId: attachment.id },
      'http://bench.invalid/v1',
    );
    path = link.slice('http://bench.invalid'.length);
    handler = portal.handler;
    close = () => portal.close();
  }
  const server = http.createServer(handler).listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    process.stdout.write(`READY ${JSON.stringify({ url: `http://127.0.0.1:${port}${path}` })}\n`);
  });
  process.on('message', async (message: string) => {
    if (message === 'cpu') {
      const { user, system } = process.cpuUsage();
      process.send!({ cpu: user + system });
    } else if (message === 'exit') {
      server.closeAllConnections();
      server.close();
      await close();
      process.exit(0);
    }
  });
}

// ---------------------------------------------------------------- load (this process)

interface Server {
  kind: Kind;
  child: ChildProcess;
  url: string;
}

async function start(kind: Kind, dir: string): Promise<Server> {
  const child = spawnNode(0, [HERE, '--serve', kind, dir], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  return { kind, child, url: (await readyLine(NAMES[kind], child)).url as string };
}

/** The server's CPU time so far, in µs. */
function cpuOf(server: Server): Promise<number> {
  return new Promise((resolve) => {
    server.child.once('message', (message: { cpu: number }) => resolve(message.cpu));
    server.child.send('cpu');
  });
}

function runClient(url: string): Promise<{ bytes: number; requests: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLIENT, url, String(SECONDS), String(CONCURRENCY)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`client exited with ${code}`)),
    );
  });
}

/** One round against `server`: MiB/s, and the server's CPU µs a MiB sent. */
async function round(server: Server): Promise<{ rate: number; cpu: number }> {
  const before = await cpuOf(server);
  const run = await runClient(server.url);
  const cpu = (await cpuOf(server)) - before;
  const mib = run.bytes / 1024 / 1024;
  return { rate: mib / (run.ms / 1000), cpu: cpu / mib };
}

async function measure(): Promise<void> {
  const dir = await mkdtemp(join(process.env.BENCH_DIR ?? tmpdir(), 'portal-bench-'));
  const servers: Server[] = [];
  try {
    for (const kind of ['bare', 'memory', 'fs'] as const) servers.push(await start(kind, dir));
    const rates = new Map<Kind, number[]>(servers.map((server) => [server.kind, []]));
    const cpus = new Map<Kind, number[]>(servers.map((server) => [server.kind, []]));
    for (const server of servers) await round(server); // warm-up, not counted
    for (let r = 0; r < ROUNDS; r++) {
      // The order rotates each round, so that no server always follows the same one.
      for (let i = 0; i < servers.length; i++) {
        const server = servers[(i + r) % servers.length]!;
        const measured = await round(server);
        rates.get(server.kind)!.push(measured.rate);
        cpus.get(server.kind)!.push(measured.cpu);
      }
    }

    console.log(
      `${MIB} MiB downloads, ${CONCURRENCY} connections from a separate process, ${ROUNDS} rounds of ${SECONDS} s, ` +
        `${pinned ? 'servers on core 0, load on core 1' : 'no taskset: cores not pinned'}; medians`,
    );
    const baseline = { rate: median(rates.get('bare')!), cpu: median(cpus.get('bare')!) };
    for (const server of servers) {
      const rate = median(rates.get(server.kind)!);
      console.log(
        `  ${NAMES[server.kind].padEnd(42)} ${rate.toFixed(0).padStart(6)} MiB/s  ${median(cpus.get(server.kind)!).toFixed(0).padStart(6)} µs CPU a MiB  ` +
          `(runs: ${rates
            .get(server.kind)!
            .map((run) => run.toFixed(0))
            .join(', ')})  ratio ${(rate / baseline.rate).toFixed(2)}×`,
      );
    }
    for (const server of servers.slice(1)) {
      const store = NAMES[server.kind].replace('portal link, ', '');
      const rate = median(rates.get(server.kind)!);
      const cpu = median(cpus.get(server.kind)!);
      emit({
        scenario: `5 MiB download, ${store}`,
        figure: rate,
        unit: 'MiB/s',
        baselineName: 'bare pipe',
        baseline: baseline.rate,
        ratio: rate / baseline.rate,
        target: '≥ 0.8×',
        holds: rate / baseline.rate >= 0.8,
      });
      emit({
        scenario: `5 MiB download, ${store}, server CPU a MiB`,
        figure: cpu,
        unit: 'µs',
        baselineName: 'bare pipe',
        baseline: baseline.cpu,
        ratio: baseline.cpu / cpu,
        target: REPORTED,
        holds: true,
      });
    }
  } finally {
    for (const server of servers) server.child.send('exit');
    await Promise.all(
      servers.map(
        (server) =>
          new Promise((resolve) =>
            server.child.exitCode !== null ? resolve(null) : server.child.once('exit', resolve),
          ),
      ),
    );
    await rm(dir, { recursive: true, force: true });
  }
}

const [flag, kind, dir] = process.argv.slice(2);
if (flag === '--serve') await serve(kind as Kind, dir!);
else await measure();
