/**
 * The receiver of `throttling.bench.js`, in its own process: a service of fixed capacity. It takes
 * `capacity` calls a second (a token bucket holding a tenth of a second's worth) and answers 429 with
 * `Retry-After: 1` beyond it; while down it answers every call 503 (no `Retry-After`, as a load
 * balancer with no backend). It keeps, per second since `start`, the calls answered 2xx, 429 and
 * 503, and each delivered `webhook-id` once. Driven over IPC: `{ cmd: 'start', capacity }`,
 * `{ cmd: 'down', ms }`, `{ cmd: 'stats' }`. Each answer comes `latencyMs` (given at start) after the
 * call, as a service doing some work: calls in flight then bound what a sender sends a second.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

let capacity = 1000;
let latencyMs = 0;
let tokens = capacity;
let refilledAt = performance.now();
let startedAt = performance.now();
let downUntil = 0;
let downFrom = 0;
const delivered = new Set<string>();
/** Per second since start: [2xx, 429, 503]. */
let seconds: [number, number, number][] = [];

function take(): boolean {
  const now = performance.now();
  tokens = Math.min(capacity / 10, tokens + ((now - refilledAt) / 1000) * capacity);
  refilledAt = now;
  if (tokens < 1) return false;
  tokens -= 1;
  return true;
}

function count(kind: 0 | 1 | 2): void {
  const second = Math.floor((performance.now() - startedAt) / 1000);
  while (seconds.length <= second) seconds.push([0, 0, 0]);
  seconds[second]![kind]++;
}

const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => setTimeout(answer, latencyMs));
  function answer() {
    const now = performance.now();
    if (now >= downFrom && now < downUntil) {
      count(2);
      res.writeHead(503).end();
      return;
    }
    if (!take()) {
      count(1);
      res.writeHead(429, { 'retry-after': '1' }).end();
      return;
    }
    count(0);
    delivered.add(String(req.headers['webhook-id']));
    res.writeHead(204).end();
  }
});

process.on('message', (message: { cmd: string; capacity?: number; latencyMs?: number; ms?: number }) => {
  if (message.cmd === 'start') {
    capacity = message.capacity ?? capacity;
    latencyMs = message.latencyMs ?? latencyMs;
    tokens = capacity / 10;
    refilledAt = startedAt = performance.now();
    downFrom = downUntil = 0;
    delivered.clear();
    seconds = [];
    process.send!({ started: true });
  } else if (message.cmd === 'down') {
    downFrom = performance.now();
    downUntil = downFrom + (message.ms ?? 0);
    process.send!({ down: Math.round(downFrom - startedAt) });
  } else if (message.cmd === 'stats') {
    process.send!({ delivered: delivered.size, seconds });
  }
});
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  process.send!({ ready: true, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` });
});
