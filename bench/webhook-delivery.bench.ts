/**
 * Webhook delivery throughput: the worker (claim, sign, send over the HTTP transport, record) against
 * a bare loop that POSTs the same signed bodies with the same concurrency over a keep-alive agent,
 * both to one keep-alive receiver on 127.0.0.1, in the same run. Target: the worker at ≥ 0.5× the loop.
 *
 *   node dist/bench/webhook-delivery.bench.js [events=5000] [concurrency=32] [rounds=5]
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { httpTransport } from '../adapters/http-transport/index.js';
import { memoryStorage } from '../adapters/memory/index.js';
import { createPortal, type WebhookCall, type WebhookTransport } from '../src/index.js';
import { newEvent } from './support/records.js';

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
    newEvent('default', 'customer-created', { customer: { id: `cus_${i}`, name: 'Ada Lovelace', email: 'ada@example.com' } }, now),
  );
  await storage.publishEvents(batch);
  const started = performance.now();
  await portal.worker!.tick();
  const seconds = (performance.now() - started) / 1000;
  const log = (await portal.webhooks.deliveries('default', webhook.id))!;
  const delivered = log.filter((delivery) => delivery.status === 'succeeded').length;
  if (delivered !== events) throw new Error(`only ${delivered} of ${events} delivered`);
  if (calls.length !== events) throw new Error(`${calls.length} calls made for ${events} deliveries`);
  await portal.close();
  return { perSecond: events / seconds, calls };
}

/** The bare loop: `concurrency` workers POSTing prepared calls over one keep-alive agent. */
async function bareLoop(calls: WebhookCall[]): Promise<number> {
  const agent = new http.Agent({ keepAlive: true });
  let next = 0;
  const post = (call: WebhookCall) =>
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
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < calls.length) await post(calls[next++]!);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return calls.length / seconds;
}

const receiver = await startReceiver();
// One pair first, unreported, so that neither side is measured while the JIT is still compiling it.
await bareLoop((await engine(receiver.url)).calls);
const results: { engine: number; bare: number; ratio: number }[] = [];
// Each round runs both back to back, so a neighbour's load on a shared machine hits the pair alike; the median ratio is reported.
for (let round = 0; round < rounds; round++) {
  const { perSecond, calls } = await engine(receiver.url);
  const bare = await bareLoop(calls);
  results.push({ engine: perSecond, bare, ratio: perSecond / bare });
  console.log(`round ${round + 1}: worker ${perSecond.toFixed(0)} deliveries/s, bare loop ${bare.toFixed(0)} POSTs/s, ratio ${(perSecond / bare).toFixed(2)}`);
}
await receiver.close();

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const ratio = median(results.map((r) => r.ratio));
console.log(`\nwebhook delivery, ${events} events, concurrency ${concurrency}, ${rounds} rounds (Node ${process.version})`);
console.log(`  worker (claim, sign, send, record): ${median(results.map((r) => r.engine)).toFixed(0)} deliveries/s (median)`);
console.log(`  bare keep-alive POST loop:          ${median(results.map((r) => r.bare)).toFixed(0)} POSTs/s (median)`);
console.log(`  ratio: ${ratio.toFixed(2)}× (median of rounds; target ≥ 0.50×) ${ratio >= 0.5 ? 'met' : 'NOT met'}`);
const row = {
  scenario: `webhook delivery (concurrency ${concurrency})`,
  figure: median(results.map((r) => r.engine)), unit: 'calls/s',
  baselineName: 'bare POST loop', baseline: median(results.map((r) => r.bare)),
  ratio, target: '≥ 0.5×', holds: ratio >= 0.5,
};
console.log(`BENCH ${JSON.stringify(row)}`);
