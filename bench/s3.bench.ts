/**
 * The S3 blob adapter against bare SDK code on the same moto_server, in one run:
 *
 * - upload: `POST /agreements` with 5 × 1 MiB documents through the portal (busboy, hashing,
 *   `s3Blobs` spooling each part), against a bare node:http server that pipes each busboy file
 *   stream into an `@aws-sdk/lib-storage` `Upload`; target ≥ 0.8× its throughput;
 * - download: a 5 MiB attachment through the portal's link (streamed, no redirect), against a bare
 *   server piping `GetObject`'s body into the response; target ≥ 0.8×;
 * - the peak RSS of this process while 32 uploads of 5 × 1 MiB go through the portal at once.
 *
 *   npm run build:bench && node dist/bench/s3.bench.js     (BENCH_ROUNDS=5 by default)
 *
 * Prints one `BENCH {json}` line per row for run.js; skips, saying why, without moto_server.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Busboy } from '@fastify/busboy';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { s3Blobs } from '../adapters/s3/index.js';
import { createPortal } from '../src/index.js';
import { validFormData } from '../test/helpers/agreements.js';
import { SIGNING_KEY_1 } from '../test/helpers/download.js';
import { startMoto } from '../test/helpers/moto.js';
import { listen, type Running } from '../test/helpers/server.js';
import { median } from './support/median.js';

const MiB = 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/** Requests per round of each upload contender, one after the other. */
const UPLOADS_PER_ROUND = 8;
const DOWNLOADS_PER_ROUND = 8;
const CONCURRENT_UPLOADS = 32;

const documentBytes = Buffer.alloc(MiB);
for (let i = 0; i < MiB; i++) documentBytes[i] = (i * 31 + (i >> 9)) & 0xff;
const form = () =>
  validFormData({ documents: Array.from({ length: 5 }, (_, n) => ({ name: `doc-${n}.pdf`, bytes: documentBytes })) });

async function startPortalServer(client: S3Client, bucket: string) {
  const portal = await createPortal({
    auth: { apiKeys: { 'bench-key-0123456789': 'acct_bench' } },
    signingKeys: [SIGNING_KEY_1],
    blobs: s3Blobs({ client, bucket, prefix: 'portal/' }),
    webhooks: { worker: false },
  });
  const running = await listen(portal.handler);
  return { portal, url: `${running.url}/v1`, close: () => running.close().then(() => portal.close()) };
}

/** The bare upload: busboy's file streams straight into lib-storage's Upload, nothing else. */
function startBareUpload(client: S3Client, bucket: string): Promise<Running> {
  let count = 0;
  return listen((req, res) => {
    const uploads: Promise<unknown>[] = [];
    const busboy = new Busboy({ headers: req.headers as { 'content-type': string } });
    busboy.on('file', (_field, stream) => {
      uploads.push(
        new Upload({ client, params: { Bucket: bucket, Key: `bare/${process.pid}-${++count}`, Body: stream } }).done(),
      );
    });
    busboy.on('finish', () => {
      Promise.all(uploads).then(
        () => res.writeHead(201).end(),
        (error: Error) => res.writeHead(500).end(error.message),
      );
    });
    req.pipe(busboy);
  });
}

// `s3.bench.js --serve portal|bare <endpoint> <bucket>`: one upload server alone in this process,
// which reports its peak RSS when asked over IPC: the figure for 32 uploads at once, client apart.
if (process.argv[2] === '--serve') {
  const [kind, endpoint, bucket] = process.argv.slice(3) as [string, string, string];
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const server = kind === 'portal' ? await startPortalServer(client, bucket) : await startBareUpload(client, bucket);
  const url = kind === 'portal' ? `${server.url}/agreements` : server.url;
  global.gc?.();
  const base = process.memoryUsage().rss;
  let peak = base;
  setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
  process.on('message', () => process.send!({ base, peak }, () => process.exit(0)));
  process.send!({ url });
} else {
  await main();
}

async function main() {
  const started = await startMoto();
  if (started.moto === undefined) {
    console.log(`SKIP s3.bench: ${started.reason}`);
    return;
  }
  const { moto } = started;
  const bucket = await moto.bucket();
  const servers: { close(): Promise<void> }[] = [];

  try {
    const portalServer = await startPortalServer(moto.client, bucket);
    const portal = portalServer.portal;
    servers.push(portalServer);
    const bareUpload = await startBareUpload(moto.client, bucket);
    servers.push(bareUpload);

    const post = async (url: string) => {
      const res = await fetch(url, {
        method: 'POST',
        body: form(),
        headers: { authorization: 'Bearer bench-key-0123456789' },
      });
      await res.arrayBuffer();
      if (res.status !== 201) throw new Error(`${url}: ${res.status}`);
    };
    /** MiB/s of documents over `count` uploads one after the other. */
    const uploadRate = async (url: string, count: number) => {
      const start = performance.now();
      for (let n = 0; n < count; n++) await post(url);
      return (count * 5) / ((performance.now() - start) / 1000);
    };

    // The bare download: GetObject's body piped into the response.
    const attachment = await portal.tickets.putAttachment('acct_bench', {
      name: 'five.bin',
      mime: 'application/octet-stream',
      body: Buffer.concat(Array(5).fill(documentBytes)),
    });
    const { link } = await portal.tickets.downloadLink(
      'acct_bench',
      { ticketId: attachment.ticketId, messageId: attachment.messageId, attachmentId: attachment.id },
      portalServer.url,
    );
    const bareDownload = await listen(async (_req, res) => {
      const object = await moto.client.send(new GetObjectCommand({ Bucket: bucket, Key: `portal/${attachment.id}` }));
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': object.ContentLength });
      await pipeline(object.Body as Readable, res);
    });
    servers.push(bareDownload);
    const downloadRate = async (url: string, count: number) => {
      const start = performance.now();
      let bytes = 0;
      for (let n = 0; n < count; n++) bytes += (await (await fetch(url)).arrayBuffer()).byteLength;
      return bytes / MiB / ((performance.now() - start) / 1000);
    };

    const contenders = {
      'upload portal': () => uploadRate(`${portalServer.url}/agreements`, UPLOADS_PER_ROUND),
      'upload bare': () => uploadRate(bareUpload.url, UPLOADS_PER_ROUND),
      'download portal': () => downloadRate(link, DOWNLOADS_PER_ROUND),
      'download bare': () => downloadRate(bareDownload.url, DOWNLOADS_PER_ROUND),
    };
    const results = new Map(Object.keys(contenders).map((name) => [name, [] as number[]]));
    for (const run of Object.values(contenders)) await run(); // warm-up, not counted
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, run] of Object.entries(contenders)) results.get(name)!.push(await run());
    }

    // Peak RSS of each upload server, alone in a process of its own, while 32 uploads go at once.
    const peakRss = async (kind: string) => {
      const child = fork(fileURLToPath(import.meta.url), ['--serve', kind, moto.endpoint, bucket], {
        execArgv: ['--expose-gc'],
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      });
      const [{ url }] = (await once(child, 'message')) as [{ url: string }];
      await Promise.all(Array.from({ length: CONCURRENT_UPLOADS }, () => post(url)));
      child.send('report');
      const [{ base, peak }] = (await once(child, 'message')) as [{ base: number; peak: number }];
      return { peak, over: peak - base };
    };
    const portalRss = await peakRss('portal');
    const bareRss = await peakRss('bare');

    console.log(`S3 (moto_server on loopback), ${ROUNDS} rounds; median MiB/s of document bytes`);
    const rows = [
      {
        scenario: 'S3 upload, 5 × 1 MiB agreement',
        portal: 'upload portal',
        bare: 'upload bare',
        baselineName: 'busboy → lib-storage Upload',
      },
      {
        scenario: 'S3 download, 5 MiB through the link',
        portal: 'download portal',
        bare: 'download bare',
        baselineName: 'GetObject pipe',
      },
    ];
    for (const row of rows) {
      const figure = median(results.get(row.portal)!);
      const baseline = median(results.get(row.bare)!);
      const runs = (name: string) =>
        results
          .get(name)!
          .map((value) => value.toFixed(0))
          .join(', ');
      console.log(
        `  ${row.scenario.padEnd(38)} portal ${figure.toFixed(0)} MiB/s (${runs(row.portal)}), ${row.baselineName} ${baseline.toFixed(0)} MiB/s (${runs(row.bare)}): ${(figure / baseline).toFixed(2)}×`,
      );
      const result = {
        scenario: row.scenario,
        figure,
        unit: 'MiB/s',
        baselineName: row.baselineName,
        baseline,
        ratio: figure / baseline,
        target: '≥ 0.8×',
        holds: figure / baseline >= 0.8,
      };
      console.log(`BENCH ${JSON.stringify(result)}`);
    }
    const mib = (bytes: number) => (bytes / MiB).toFixed(0);
    console.log(
      `  peak RSS with ${CONCURRENT_UPLOADS} uploads of 5 × 1 MiB at once: portal ${mib(portalRss.peak)} MiB (+${mib(portalRss.over)}), ` +
        `busboy → lib-storage Upload ${mib(bareRss.peak)} MiB (+${mib(bareRss.over)})`,
    );
    const rss = {
      scenario: `S3 peak RSS, ${CONCURRENT_UPLOADS} uploads at once`,
      figure: portalRss.over / MiB,
      unit: 'MiB',
      baselineName: 'busboy → lib-storage Upload',
      baseline: bareRss.over / MiB,
      ratio: bareRss.over / portalRss.over,
      target: 'report',
      holds: true,
    };
    console.log(`BENCH ${JSON.stringify(rss)}`);
  } finally {
    for (const server of servers) await server.close();
    await moto.stop();
  }
}
