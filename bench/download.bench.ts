/**
 * Downloading a 5 MiB attachment through a signed link, against a bare
 * `fs.createReadStream(file).pipe(res)` server streaming the same bytes, in one run.
 *
 *   npm run build && node dist/bench/download.bench.js
 *   (BENCH_ROUNDS=5 BENCH_SECONDS=2 BENCH_CONCURRENCY=4 by default)
 *
 * Two portals are measured: one on the memory blob store (the default) and one on a minimal
 * file-backed blob store defined below, which reads the very file the bare server reads: that
 * pair isolates what the portal adds (routing, signature check, record lookup, headers). The load
 * comes from a separate process (`download-client.js`); rounds alternate between the servers and
 * the median of each is reported. Target: each portal ≥ 0.8× the bare server's throughput.
 */
import { spawn } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { type BlobStore, createPortal } from '../src/index.js';
import { listen, type Running } from '../test/helpers/server.js';
import { SIGNING_KEY_1 } from '../test/helpers/download.js';
import { atom } from './support/records.js';

const SIZE = 5 * 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 4);
const CLIENT = fileURLToPath(new URL('./download-client.js', import.meta.url));

/** Just enough of a file blob store for the bench: one file per key, ranges read with createReadStream. */
function benchFileBlobs(dir: string): BlobStore {
  const path = (key: string) => join(dir, key);
  return {
    async put(key, body) {
      await pipeline(body, createWriteStream(path(key)));
      return { size: (await stat(path(key))).size };
    },
    async get(key, range) {
      const info = await stat(path(key)).catch(() => null);
      if (info === null) return null;
      return createReadStream(path(key), range && { start: range.start, end: range.end });
    },
    async stat(key) {
      const info = await stat(path(key)).catch(() => null);
      return info && { key, size: info.size, createdAt: atom(info.mtime) };
    },
    async delete(key) {
      return unlink(path(key)).then(
        () => true,
        () => false,
      );
    },
    async *listBefore() {},
  };
}

function runClient(url: string): Promise<{ bytes: number; requests: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLIENT, url, String(SECONDS), String(CONCURRENCY)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`client exited with ${code}`))));
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const mibPerSecond = (run: { bytes: number; ms: number }) => run.bytes / 1024 / 1024 / (run.ms / 1000);

const dir = await mkdtemp(join(tmpdir(), 'portal-bench-'));
const servers: Running[] = [];
const portals: { close(): Promise<void> }[] = [];
try {
  const bytes = Buffer.alloc(SIZE);
  for (let i = 0; i < SIZE; i++) bytes[i] = (i * 31 + (i >> 11)) & 0xff;
  const file = join(dir, 'bare.bin');
  await writeFile(file, bytes);

  const bare = await listen((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': SIZE });
    createReadStream(file).pipe(res);
  });
  servers.push(bare);

  async function portalLink(blobs: BlobStore | undefined): Promise<string> {
    const portal = await createPortal({
      auth: { apiKeys: { 'bench-key-0123456789abcdef': 'acct_bench' } },
      signingKeys: [SIGNING_KEY_1],
      ...(blobs && { blobs }),
    });
    portals.push(portal);
    const running = await listen(portal.handler);
    servers.push(running);
    const attachment = await portal.tickets.putAttachment('acct_bench', { name: 'five-mib.bin', mime: 'application/octet-stream', body: bytes });
    const { link } = await portal.tickets.downloadLink(
      'acct_bench',
      { ticketId: attachment.ticketId, messageId: attachment.messageId, attachmentId: attachment.id },
      `${running.url}/v1`,
    );
    return link;
  }

  const targets = [
    { name: 'bare fs.createReadStream(file).pipe(res)', url: bare.url },
    { name: 'portal link, memory blob store', url: await portalLink(undefined) },
    { name: 'portal link, file blob store', url: await portalLink(benchFileBlobs(dir)) },
  ];
  const results = new Map(targets.map((target) => [target.name, [] as number[]]));

  for (const target of targets) await runClient(target.url); // warm-up, not counted
  for (let round = 1; round <= ROUNDS; round++) {
    for (const target of targets) results.get(target.name)!.push(mibPerSecond(await runClient(target.url)));
  }

  console.log(`5 MiB downloads, ${CONCURRENCY} connections from a separate process, ${ROUNDS} rounds of ${SECONDS} s; median MiB/s`);
  const baseline = median(results.get(targets[0]!.name)!);
  for (const target of targets) {
    const runs = results.get(target.name)!;
    const ratio = median(runs) / baseline;
    console.log(
      `  ${target.name.padEnd(42)} ${median(runs).toFixed(0).padStart(6)} MiB/s  ` +
        `(runs: ${runs.map((run) => run.toFixed(0)).join(', ')})  ratio ${ratio.toFixed(2)}×`,
    );
  }
  for (const target of targets.slice(1)) {
    const figure = median(results.get(target.name)!);
    const row = {
      scenario: `5 MiB download, ${target.name.replace('portal link, ', '')}`,
      figure,
      unit: 'MiB/s',
      baselineName: 'bare pipe',
      baseline,
      ratio: figure / baseline,
      target: '≥ 0.8×',
      holds: figure / baseline >= 0.8,
    };
    console.log(`BENCH ${JSON.stringify(row)}`);
  }
  const worst = Math.min(...targets.slice(1).map((target) => median(results.get(target.name)!) / baseline));
  console.log(`target ≥ 0.80× of bare: ${worst >= 0.8 ? 'met' : 'NOT met'} (lowest portal ratio ${worst.toFixed(2)}×)`);
} finally {
  for (const server of servers) await server.close();
  for (const portal of portals) await portal.close();
  await rm(dir, { recursive: true, force: true });
}
