/**
 * A hostile webhook receiver against the portal: account A points a webhook at a receiver that
 * answers every call with an endless stream (interim `103` heads, unrequested `100 Continue`s, or
 * one chunk whose extension never ends) and sends 8 `POST /webhooks/{id}/test` calls every 500 ms
 * for 3 s; account B meanwhile reads `GET /v1/webhooks` one request at a time. Printed per kind:
 * the bytes the portal read from the receiver, the portal's CPU over the 3 s, and B's p50/p99
 * against the same reads with no flood.
 *
 * The portal runs in its own process (core 0 where `taskset` exists) on memory storage with the
 * default `httpTransport` (`allowPrivateNetworks`, `timeoutMs` 3000); the receiver in another (core 1),
 * and B's client here (core 1).
 *
 *   npm run build:bench && node dist/bench/hostile-receiver.bench.js
 */
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { spawnNode } from './support/cores.js';
import { REPORTED, emit } from './support/row.js';
import { BENCH_SIGNING_KEYS } from './support/signing-keys.js';

const KEY_A = 'hostile-bench-key-of-account-a';
const KEY_B = 'hostile-bench-key-of-account-b';
const WINDOW_MS = 3000;
const BURST = 8;
const BURST_EVERY_MS = 500;

const FLOODS = {
  'interim 103': { head: '', piece: 'HTTP/1.1 103 Early Hints\r\n\r\n' },
  'interim 100': { head: '', piece: 'HTTP/1.1 100 Continue\r\n\r\n' },
  'chunk extension': { head: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;', piece: 'x' },
} as const;
type Kind = keyof typeof FLOODS;

const here = fileURLToPath(import.meta.url);

/** `--portal`: the portal, reporting its CPU time and the bytes it read from the receiver on request. */
async function servePortal(receiverPort: number) {
  const { createPortal } = await import('../src/index.js');
  const sockets: net.Socket[] = [];
  const connect = net.connect;
  // Counts what the transport's sockets to the receiver read; undici opens them with net.connect.
  net.connect = ((...args: unknown[]) => {
    const socket = (connect as (...a: unknown[]) => net.Socket)(...args);
    if (Number((args[0] as { port?: number | string }).port) === receiverPort) sockets.push(socket);
    return socket;
  }) as typeof net.connect;
  const portal = await createPortal({
    auth: { apiKeys: { [KEY_A]: 'acct_a', [KEY_B]: 'acct_b' } },
    signingKeys: BENCH_SIGNING_KEYS,
    webhooks: { allowPrivateNetworks: true, timeoutMs: WINDOW_MS },
  });
  const server = http.createServer(portal.handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.on('message', async (message: string) => {
    if (message === 'stats') {
      const cpu = process.cpuUsage();
      const bytesRead = sockets.reduce((sum, socket) => sum + socket.bytesRead, 0);
      return process.send!({ cpuMs: (cpu.user + cpu.system) / 1000, bytesRead });
    }
    await portal.close();
    process.exit(0);
  });
  process.send!({ port: (server.address() as net.AddressInfo).port });
}

/** `--receiver`: answers each request on `/<kind>` with that flood until the portal closes the connection. */
async function serveReceiver() {
  const server = net.createServer((socket) => {
    socket.on('error', () => {});
    socket.once('data', (chunk) => {
      const kind = decodeURIComponent(/^POST \/([^ ]+)/.exec(chunk.toString('latin1'))?.[1] ?? '') as Kind;
      const { head, piece } = FLOODS[kind] ?? FLOODS['interim 103'];
      socket.write(head);
      const block = Buffer.from(piece.repeat(Math.ceil(16384 / piece.length)), 'latin1');
      const more = () => {
        while (!socket.destroyed && socket.writable) if (!socket.write(block)) return void socket.once('drain', more);
      };
      more();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send!({ port: (server.address() as net.AddressInfo).port });
}

function start(args: string[], core: number): Promise<{ child: ChildProcess; port: number }> {
  const child = spawnNode(core, [here, ...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (message: { port: number }) => resolve({ child, port: message.port }));
    child.once('exit', (code) => reject(new Error(`${args[0]} exited with ${code}`)));
  });
}

const ask = (child: ChildProcess) =>
  new Promise<{ cpuMs: number; bytesRead: number }>((resolve) => {
    child.once('message', resolve);
    child.send('stats');
  });

const agent = new http.Agent({ keepAlive: true });

function request(
  port: number,
  method: string,
  path: string,
  key: string,
  body?: object,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        port,
        host: '127.0.0.1',
        method,
        path,
        agent,
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      },
      (res) => {
        let text = '';
        res
          .setEncoding('utf8')
          .on('data', (chunk) => (text += chunk))
          .on('end', () => resolve({ status: res.statusCode!, body: text }));
      },
    );
    req.on('error', reject).end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** B's reads, one at a time, for `ms`: their latencies in ms. */
async function reads(port: number, ms: number): Promise<number[]> {
  const latencies: number[] = [];
  const until = performance.now() + ms;
  while (performance.now() < until) {
    const started = performance.now();
    await request(port, 'GET', '/v1/webhooks', KEY_B);
    latencies.push(performance.now() - started);
  }
  return latencies;
}

const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))] ?? NaN;

async function main() {
  const receiver = await start(['--receiver'], 1);
  const portal = await start(['--portal', String(receiver.port)], 0);
  try {
    await request(portal.port, 'POST', '/v1/webhooks', KEY_B, {
      url: 'http://127.0.0.1:9/b',
      type: 'customer-created',
    });
    await reads(portal.port, 1000); // warm-up
    const idleStart = await ask(portal.child);
    const idle = await reads(portal.port, WINDOW_MS);
    const idleCpu = ((await ask(portal.child)).cpuMs - idleStart.cpuMs) / 1000;
    console.log(
      `hostile receiver: B's GET /v1/webhooks with no flood: p50 ${percentile(idle, 0.5).toFixed(2)} ms, p99 ${percentile(idle, 0.99).toFixed(2)} ms; ` +
        `the portal used ${idleCpu.toFixed(2)} s of CPU in ${WINDOW_MS / 1000} s`,
    );
    for (const kind of Object.keys(FLOODS) as Kind[]) {
      const created = await request(portal.port, 'POST', '/v1/webhooks', KEY_A, {
        url: `http://127.0.0.1:${receiver.port}/${encodeURIComponent(kind)}`,
        type: 'customer-created',
      });
      if (created.status !== 201) throw new Error(`creating the webhook answered ${created.status}: ${created.body}`);
      const { id } = JSON.parse(created.body) as { id: string };
      const before = await ask(portal.child);
      let calls = 0;
      const burst = () => {
        for (let i = 0; i < BURST; i++)
          void request(portal.port, 'POST', `/v1/webhooks/${id}/test`, KEY_A).then(
            ({ status }) => status === 202 && calls++,
          );
      };
      const bursts = setInterval(burst, BURST_EVERY_MS);
      burst();
      const during = await reads(portal.port, WINDOW_MS);
      clearInterval(bursts);
      const after = await ask(portal.child);
      await request(portal.port, 'DELETE', `/v1/webhooks/${id}`, KEY_A);
      const megabytes = (after.bytesRead - before.bytesRead) / 1e6;
      const cpuSeconds = (after.cpuMs - before.cpuMs) / 1000;
      const p50 = percentile(during, 0.5);
      console.log(
        `hostile receiver (${kind}): ${calls} test calls accepted; the portal read ${megabytes.toFixed(2)} MB from the receiver and used ` +
          `${cpuSeconds.toFixed(2)} s of CPU in ${WINDOW_MS / 1000} s; B's GET p50 ${p50.toFixed(2)} ms, p99 ${percentile(during, 0.99).toFixed(2)} ms`,
      );
      const idleP50 = percentile(idle, 0.5);
      emit({
        scenario: `hostile receiver (${kind}): another tenant's GET p50`,
        figure: p50,
        unit: 'ms',
        baselineName: 'no flood',
        baseline: idleP50,
        ratio: p50 / idleP50,
        target: REPORTED,
        holds: true,
      });
    }
  } finally {
    portal.child.send('close');
    receiver.child.kill();
    agent.destroy();
  }
}

if (process.argv[2] === '--portal') void servePortal(Number(process.argv[3]));
else if (process.argv[2] === '--receiver') void serveReceiver();
else await main();
