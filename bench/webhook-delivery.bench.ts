/**
 * Webhook delivery throughput: the worker (claim, sign, send over the HTTP transport, record) against
 * a bare loop that POSTs the same signed bodies with the same concurrency over a keep-alive agent,
 * both to one keep-alive receiver on 127.0.0.1, in the same run. Target: the worker at ≥ 0.5× the loop.
 *
 * Then the HTTP transport alone: the CPU a call of `httpTransport().send` against undici used
 * plainly (`Pool.request`, the body dumped) and `http.request` over a keep-alive agent
 * (`scheduling: 'lifo'`, as Node's docs suggest for a client of one receiver), replaying the same
 * signed calls, `concurrency` at once, to a receiver in another process, so that only the client's
 * CPU is counted. Targets: the transport within 1.2× of plain undici (its guard, bounds and
 * per-account pools cost little), and at most half of `http.request`.
 *
 *   node dist/bench/webhook-delivery.bench.js [events=5000] [concurrency=32] [rounds=5]
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import { createInterface } from 'node:readline';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { httpTransport } from '../adapters/http-transport/index.js';
import { memoryStorage } from '../adapters/memory/index.js';
import { createPortal, type WebhookCall, type WebhookTransport } from '../src/index.js';
import { newEvent } from './support/records.js';
import { median } from './support/median.js';

const [events = 5000, concurrency = 32, rounds = 5] = process.argv.slice(2).map(Number);

async function startReceiver() {
  let received = 0;
  const server = http.createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      received++;
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    get received() {
      return received;
    },
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

/** The worker: a fresh outbox of `events` due deliveries, drained by `tick()`. Resolves deliveries per second. */
async function engine(url: string): Promise<{ perSecond: number; calls: WebhookCall[] }> {
  const storage = memoryStorage();
  // The HTTP transport the portal would build by default, keeping each call it is handed: the bare
  // loop replays exactly those (same URLs, bodies and signed headers). The push costs nanoseconds a call.
  const calls: WebhookCall[] = [];
  const inner = httpTransport({ allowPrivateNetworks: true });
  const transport: WebhookTransport = {
    send: (call, options) => (calls.push(call), inner.send(call, options)),
    close: async () => inner.close?.(),
  };
  const portal = await createPortal({
    auth: { apiKeys: ['bench-key-0123456789abcdef'] },
    storage,
    transport,
    // One account, as the bare loop has: its share of the worker is the whole of it, so both run
    // `concurrency` calls at once (the default share, a quarter, would compare 8 calls with 32).
    webhooks: { tick: '0 0 0 1 1 *', concurrency, concurrencyPerAccount: concurrency },
  });
  const webhook = await portal.webhooks.create('default', { type: 'customer-created', url });
  const now = new Date();
  const batch = Array.from({ length: events }, (_, i) =>
    newEvent(
      'default',
      'customer-created',
      { customer: { id: `cus_${i}`, name: 'Ada Lovelace', email: 'ada@example.com' } },
      now,
    ),
  );
  await storage.publishEvents(batch);
  const started = performance.now();
  await portal.worker!.tick();
  const seconds = (performance.now() - started) / 1000;
  // The delivery log is paged (50 by default, 500 at most): walk every page of the succeeded ones.
  let delivered = 0;
  for (let cursor: string | undefined; ; ) {
    const page = (await portal.webhooks.deliveries('default', webhook.id, {
      status: 'succeeded',
      limit: 500,
      cursor,
    }))!;
    delivered += page.length;
    if (page.nextCursor === null) break;
    cursor = page.nextCursor;
  }
  if (delivered !== events) throw new Error(`only ${delivered} of ${events} delivered`);
  if (calls.length !== events) throw new Error(`${calls.length} calls made for ${events} deliveries`);
  await portal.close();
  return { perSecond: events / seconds, calls };
}

/** One POST of `call` by `http.request`, resolving when its answer has been read. */
const postWith = (agent: http.Agent) => (call: WebhookCall) =>
  new Promise<void>((resolve, reject) => {
    const req = http.request(call.url, {
      method: 'POST',
      agent,
      headers: { ...call.headers, 'Content-Length': String(Buffer.byteLength(call.body)) },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => (res.statusCode! < 300 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(call.body);
  });

/** `calls` made `concurrency` at a time by `post`: their seconds, and the CPU µs a call of this process. */
async function replay(
  calls: WebhookCall[],
  post: (call: WebhookCall) => Promise<unknown>,
): Promise<{ seconds: number; cpuPerCall: number }> {
  let next = 0;
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < calls.length) await post(calls[next++]!);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return { seconds, cpuPerCall: (used.user + used.system) / calls.length };
}

/** The bare loop: `concurrency` workers POSTing prepared calls over one keep-alive agent. */
async function bareLoop(calls: WebhookCall[]): Promise<number> {
  const agent = new http.Agent({ keepAlive: true });
  const { seconds } = await replay(calls, postWith(agent));
  agent.destroy();
  return calls.length / seconds;
}

/** A receiver answering 204 in a process of its own: its URL and a way to stop it. */
async function startReceiverProcess(): Promise<{ url: string; stop: () => void }> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `
    const server = require('node:http').createServer((req, res) => { req.resume(); req.on('end', () => res.writeHead(204).end()); });
    server.keepAliveTimeout = 30000;
    server.listen(0, '127.0.0.1', () => console.log(server.address().port));
  `,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the receiver exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}/hook`, stop: () => child.kill() };
}

/** The transport's CPU a call against plain undici's and `http.request`'s, rounds alternating; the medians. */
async function transportCost(calls: WebhookCall[]): Promise<{ transport: number; undici: number; bare: number }> {
  const receiver = await startReceiverProcess();
  const replayed = calls.map((call) => ({ ...call, url: receiver.url }));
  const transport = httpTransport({ allowPrivateNetworks: true });
  const agent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  const pool = new Pool(new URL(receiver.url).origin);
  const path = new URL(receiver.url).pathname;
  const viaTransport = (call: WebhookCall) =>
    transport.send(call, { timeoutMs: 15_000 }).then((result) => {
      if (result.statusCode !== 204) throw new Error(`the transport got ${result.statusCode ?? result.error}`);
    });
  const viaUndici = async (call: WebhookCall) => {
    const { statusCode, body } = await pool.request({ path, method: 'POST', headers: call.headers, body: call.body });
    await body.dump();
    if (statusCode !== 204) throw new Error(`undici got ${statusCode}`);
  };
  const costs = { transport: [] as number[], undici: [] as number[], bare: [] as number[] };
  try {
    // The first round of each is a warm-up, not counted.
    for (let round = 0; round <= rounds; round++) {
      const viaAgent = await replay(replayed, postWith(agent));
      const viaPool = await replay(replayed, viaUndici);
      const viaOwn = await replay(replayed, viaTransport);
      if (round === 0) continue;
      costs.bare.push(viaAgent.cpuPerCall);
      costs.undici.push(viaPool.cpuPerCall);
      costs.transport.push(viaOwn.cpuPerCall);
      console.log(
        `transport round ${round}: ${viaOwn.cpuPerCall.toFixed(1)} µs a call, undici Pool.request ${viaPool.cpuPerCall.toFixed(1)} µs, http.request ${viaAgent.cpuPerCall.toFixed(1)} µs`,
      );
    }
  } finally {
    await transport.close!();
    await pool.close();
    agent.destroy();
    receiver.stop();
  }
  return { transport: median(costs.transport), undici: median(costs.undici), bare: median(costs.bare) };
}

const receiver = await startReceiver();
// One pair first, unreported, so that neither side is measured while the JIT is still compiling it.
await bareLoop((await engine(receiver.url)).calls);
const results: { engine: number; bare: number; ratio: number }[] = [];
let signed: WebhookCall[] = [];
// Each round runs both back to back, so a neighbour's load on a shared machine hits the pair alike; the median ratio is reported.
for (let round = 0; round < rounds; round++) {
  const { perSecond, calls } = await engine(receiver.url);
  const bare = await bareLoop(calls);
  signed = calls;
  results.push({ engine: perSecond, bare, ratio: perSecond / bare });
  console.log(
    `round ${round + 1}: worker ${perSecond.toFixed(0)} deliveries/s, bare loop ${bare.toFixed(0)} POSTs/s, ratio ${(perSecond / bare).toFixed(2)}`,
  );
}
await receiver.close();
const cost = await transportCost(signed);

const ratio = median(results.map((r) => r.ratio));
console.log(
  `\nwebhook delivery, ${events} events, concurrency ${concurrency}, ${rounds} rounds (Node ${process.version})`,
);
console.log(
  `  worker (claim, sign, send, record): ${median(results.map((r) => r.engine)).toFixed(0)} deliveries/s (median)`,
);
console.log(`  bare keep-alive POST loop:          ${median(results.map((r) => r.bare)).toFixed(0)} POSTs/s (median)`);
console.log(`  ratio: ${ratio.toFixed(2)}× (median of rounds; target ≥ 0.50×) ${ratio >= 0.5 ? 'met' : 'NOT met'}`);
const row = {
  scenario: `webhook delivery (concurrency ${concurrency})`,
  figure: median(results.map((r) => r.engine)),
  unit: 'calls/s',
  baselineName: 'bare POST loop',
  baseline: median(results.map((r) => r.bare)),
  ratio,
  target: '≥ 0.5×',
  holds: ratio >= 0.5,
};
console.log(`BENCH ${JSON.stringify(row)}`);
console.log(
  `  HTTP transport: ${cost.transport.toFixed(1)} µs of CPU a call, undici Pool.request ${cost.undici.toFixed(1)} µs, http.request with a keep-alive agent ${cost.bare.toFixed(1)} µs (medians)`,
);
for (const [baselineName, baseline, bound] of [
  ['undici Pool.request', cost.undici, 1.2],
  ['http.request, keep-alive agent', cost.bare, 0.5],
] as const) {
  const transportRow = {
    scenario: `webhook transport: CPU a call (concurrency ${concurrency})`,
    figure: cost.transport,
    unit: 'µs',
    baselineName,
    baseline,
    ratio: cost.transport / baseline,
    target: `≤ ${bound}×`,
    holds: cost.transport / baseline <= bound,
  };
  console.log(`BENCH ${JSON.stringify(transportRow)}`);
}
