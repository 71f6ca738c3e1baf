/**
 * The receiver of `ordering.bench.js`, in its own process: fails `FAIL_SHARE` of the calls at random
 * (a 500), answers the rest 204, and checks each key's order from the call bodies (`data.key`,
 * `data.n`, the n-th event of its key): a call of n while n − 1 has not been answered 2xx yet, or of n
 * after a later one was, is an inversion; two calls of one key at once, an overlap. `delivered`
 * counts the events answered 2xx, each once. Driven over IPC:
 * `{ cmd: 'reset' }`, `{ cmd: 'stats' }`, `{ cmd: 'stop' }`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const FAIL_SHARE = Number(process.env.BENCH_ORDERING_FAIL_SHARE ?? 0.05);

interface KeyState {
  /** The events of the key answered 2xx, by their place `n`. */
  answered: Set<number>;
  /** The latest place answered 2xx. */
  latest: number;
  inFlight: number;
}

let keys = new Map<string, KeyState>();
let delivered = 0;
let calls = 0;
let failedOnPurpose = 0;
let inversions = 0;
let overlaps = 0;
let duplicates = 0;
let first = Infinity;
let last = 0;

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const at = performance.timeOrigin + performance.now();
    const { key, n } = JSON.parse(Buffer.concat(chunks).toString('utf8')).data as { key: string; n: number };
    calls++;
    if (at < first) first = at;
    let state = keys.get(key);
    if (state === undefined) keys.set(key, (state = { answered: new Set(), latest: -1, inFlight: 0 }));
    // Out of order: the one before it not answered yet, or a later one answered already (a repeat
    // of an event answered before is a duplicate, not an inversion).
    if (!state.answered.has(n) && ((n > 0 && !state.answered.has(n - 1)) || n < state.latest)) inversions++;
    if (state.inFlight > 0) overlaps++;
    state.inFlight++;
    const fail = Math.random() < FAIL_SHARE;
    // Answered on the next turn of the loop: a call that overlaps another of its key is seen.
    setImmediate(() => {
      state.inFlight--;
      if (fail) {
        failedOnPurpose++;
        res.writeHead(500).end();
        return;
      }
      if (state.answered.has(n)) duplicates++;
      else {
        state.answered.add(n);
        state.latest = Math.max(state.latest, n);
        delivered++;
        last = performance.timeOrigin + performance.now();
      }
      res.writeHead(204).end();
    });
  });
});
server.keepAliveTimeout = 30_000;

process.on('message', (message: { cmd: string }) => {
  if (message.cmd === 'stop') {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  } else if (message.cmd === 'reset') {
    keys = new Map();
    delivered = calls = failedOnPurpose = inversions = overlaps = duplicates = 0;
    first = Infinity;
    last = 0;
    process.send!({ reset: true });
  } else if (message.cmd === 'stats') {
    process.send!({ delivered, calls, failedOnPurpose, inversions, overlaps, duplicates, first, last });
  }
});
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  process.send!({ ready: true, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` });
});
