/**
 * The load side of `download.bench.ts`, run in its own process so that the client's work does not
 * share an event loop with the servers it measures.
 *   node dist/bench/download-client.js <url> <seconds> <concurrency>
 * Downloads `url` over and over from `concurrency` keep-alive connections for `seconds`, checks
 * every response is a 200 of exactly Content-Length bytes, and prints `{bytes, requests, ms}`.
 */
import http from 'node:http';

const [url, secondsArg = '2', concurrencyArg = '4'] = process.argv.slice(2);
if (url === undefined) {
  console.error('usage: download-client.js <url> <seconds> <concurrency>');
  process.exit(2);
}
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(concurrencyArg) });

function download(): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(url!, { agent }, (res) => {
        let received = 0;
        res.on('data', (chunk: Buffer) => (received += chunk.length));
        res.on('end', () => {
          if (res.statusCode !== 200 || received !== Number(res.headers['content-length'])) {
            reject(new Error(`status ${res.statusCode}, ${received} of ${res.headers['content-length']} bytes`));
          } else resolve(received);
        });
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

const started = performance.now();
const until = started + Number(secondsArg) * 1000;
let bytes = 0;
let requests = 0;
async function worker() {
  while (performance.now() < until) {
    // Awaited first: \`bytes += await …\` would read \`bytes\` before the await and lose the other workers' sums.
    const received = await download();
    bytes += received;
    requests++;
  }
}
await Promise.all(Array.from({ length: Number(concurrencyArg) }, worker));
const ms = performance.now() - started;
agent.destroy();
process.stdout.write(JSON.stringify({ bytes, requests, ms }) + '\n');
