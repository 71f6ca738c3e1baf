/**
 * The receiver of `webhook-fleet.bench.js`, in its own process: answers every POST with 204 and
 * keeps, for each call, its `webhook-id` and the lag from the publish (`data.sentAt` in the body,
 * epoch milliseconds) to the receipt. Driven over IPC: `{ cmd: 'reset' }`, `{ cmd: 'stats' }`, and
 * `{ cmd: 'window' }` (the calls since the last window, for the horizon bench's figures over time).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Epoch milliseconds with a fraction: one clock for every process on this machine. */
const now = () => performance.timeOrigin + performance.now();

let seen = new Set<string>();
let calls = 0;
let lags: number[] = [];
let first = Infinity;
let last = 0;
let refused = 0;
/** The lags of the calls received since the last `window` command. */
let windowLags: number[] = [];

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const at = now();
    const id = req.headers['webhook-id'];
    let sentAt: unknown;
    try {
      sentAt = JSON.parse(Buffer.concat(chunks).toString('utf8'))?.data?.sentAt;
    } catch {
      sentAt = undefined;
    }
    if (typeof id !== 'string' || typeof sentAt !== 'number' || typeof req.headers['webhook-signature'] !== 'string') {
      refused++;
      res.writeHead(400).end();
      return;
    }
    calls++;
    if (seen.has(id)) {
      res.writeHead(204).end();
      return;
    }
    seen.add(id);
    lags.push(at - sentAt);
    windowLags.push(at - sentAt);
    if (at < first) first = at;
    if (at > last) last = at;
    res.writeHead(204).end();
  });
});
server.keepAliveTimeout = 30_000;

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;

process.on('message', (message: { cmd: string }) => {
  if (message.cmd === 'stop') {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  } else if (message.cmd === 'reset') {
    seen = new Set();
    calls = 0;
    lags = [];
    first = Infinity;
    last = 0;
    refused = 0;
    process.send!({ reset: true });
  } else if (message.cmd === 'window') {
    // The calls that arrived since the last window: their count and lags, for a figure over time.
    const sorted = windowLags.sort((a, b) => a - b);
    windowLags = [];
    process.send!({
      distinct: seen.size,
      calls: sorted.length,
      p50: percentile(sorted, 0.5),
      p99: percentile(sorted, 0.99),
    });
  } else if (message.cmd === 'stats') {
    const sorted = [...lags].sort((a, b) => a - b);
    process.send!({
      distinct: seen.size,
      calls,
      duplicates: calls - seen.size,
      refused,
      first,
      last,
      p50: percentile(sorted, 0.5),
      p99: percentile(sorted, 0.99),
      max: sorted.length === 0 ? NaN : sorted[sorted.length - 1],
    });
  }
});
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  process.send!({ ready: true, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` });
});
