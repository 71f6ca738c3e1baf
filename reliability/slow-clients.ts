/**
 * Slow clients against the standalone server (`npm start`): a slowloris that never finishes its
 * headers is cut off by `headersTimeout` (10 s), a trickled upload by `requestTimeout` (60 s), and
 * other clients are served all the while. The aborted upload leaves no blob behind.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MULTIPART, documentBytes, multipart, validParts } from '../test/helpers/agreements.js';
import { logLine, startNode } from '../test/helpers/process.js';
import { KEY_A } from '../test/helpers/server.js';
import { capturedLogs } from './target.js';
import { check, count, row, sleep } from './tally.js';

const script = path.resolve(fileURLToPath(import.meta.url), '../../examples/standalone.js');

/** A socket that writes `bytes` one chunk at a time, every `everyMs`; resolves when the server closes it. */
function trickle(url: string, head: string, body: Buffer, chunk: number, everyMs: number) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {});
  const opened = Date.now();
  let answer = '';
  socket.on('data', (data: Buffer) => (answer += data.toString('latin1')));
  const all = Buffer.concat([Buffer.from(head), body]);
  let sent = 0;
  const timer = setInterval(() => {
    if (sent >= all.length || socket.destroyed) return clearInterval(timer);
    socket.write(all.subarray(sent, sent + chunk));
    sent += chunk;
  }, everyMs);
  const closed = new Promise<{ afterMs: number; answer: string; sent: number }>((resolve) =>
    socket.once('close', () => {
      clearInterval(timer);
      resolve({ afterMs: Date.now() - opened, answer, sent });
    }),
  );
  return { closed, destroy: () => socket.destroy() };
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...filesUnder(full));
    else out.push(full);
  }
  return out;
}

export async function slowClients(): Promise<void> {
  const into = row('slow clients', 'slowloris x5 and a trickled upload vs the standalone server');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'portal-slow-'));
  const server = startNode(script, { PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, PORTAL_API_KEYS: KEY_A });
  server.child.stderr!.on('data', (chunk: Buffer) =>
    capturedLogs.push(...chunk.toString().split('\n').filter(Boolean)),
  );
  try {
    const url = String(
      logLine(await server.waitFor((line) => logLine(line)?.msg === 'listening', 20_000))!.url,
    ).replace(/\/v1$/, '');
    const { hostname, port } = new URL(url);
    // Slowloris: a header line every 2 s, never the blank line that ends them.
    const loris = Array.from({ length: 5 }, () => {
      const head =
        `GET /v1/files HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${KEY_A}\r\n` +
        Array.from({ length: 100 }, (_, i) => `X-Slow-${i}: ${i}\r\n`).join('');
      return trickle(url, head, Buffer.alloc(0), 14, 2000);
    });
    // A slow upload: complete headers, then 1 kB a second of a 300 kB body.
    const body = multipart(
      validParts().map((p) => (p.name === 'documents' ? { ...p, bytes: documentBytes(300_000, 9) } : p)),
    );
    const head = `POST /v1/agreements HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${KEY_A}\r\nContent-Type: ${MULTIPART}\r\nContent-Length: ${body.length}\r\n\r\n`;
    const upload = trickle(url, head, body, 1000, 1000);

    // Meanwhile, an ordinary client: every read answered, and quickly.
    let serving = true;
    let served = 0;
    let slowest = 0;
    const reader = (async () => {
      while (serving) {
        const started = Date.now();
        try {
          const res = await fetch(`${url}/v1/files`, {
            headers: { authorization: `Bearer ${KEY_A}` },
            signal: AbortSignal.timeout(5000),
          });
          if (res.status === 200) served++;
          else count(into, res.status >= 500 ? '5xx' : 'wrong', `a read while slow clients held on: ${res.status}`);
          await res.arrayBuffer();
        } catch (error) {
          count(into, 'hung', `a read while slow clients held on: ${(error as Error).message}`);
        }
        slowest = Math.max(slowest, Date.now() - started);
        await sleep(500);
      }
    })();

    const bound = (ms: number) => sleep(ms).then(() => null);
    for (const [i, one] of loris.entries()) {
      const closed = await Promise.race([one.closed, bound(20_000)]);
      if (closed === null) {
        count(into, 'hung', `slowloris ${i} still connected after 20 s`);
        one.destroy();
      } else
        check(
          into,
          closed.afterMs >= 9_000 && closed.afterMs <= 16_000,
          `slowloris ${i} cut off after ${closed.afterMs} ms (headersTimeout 10 s)`,
        );
      if (closed !== null && i === 0)
        into.notes.push(
          `slowloris cut off after ${(closed.afterMs / 1000).toFixed(1)} s (headersTimeout 10 s, checked every second)`,
        );
    }
    const cut = await Promise.race([upload.closed, bound(75_000)]);
    if (cut === null) {
      count(into, 'hung', 'the trickled upload was still connected after 75 s');
      upload.destroy();
    } else {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(cut.answer)?.[1] ?? 0);
      check(
        into,
        cut.afterMs >= 59_000 && cut.afterMs <= 64_000 && (status === 408 || status === 0),
        `the trickled upload was cut off after ${cut.afterMs} ms with ${status} (requestTimeout 60 s)`,
      );
      into.notes.push(
        `trickled upload cut off after ${(cut.afterMs / 1000).toFixed(1)} s with ${status || 'no status'}, ${Math.round(cut.sent / 1000)} of ${Math.round(body.length / 1000)} kB sent`,
      );
    }
    serving = false;
    await reader;
    check(into, served > 50 && slowest < 2000, `ordinary reads meanwhile: ${served} answered, slowest ${slowest} ms`);
    into.notes.push(`${served} ordinary reads answered 200 meanwhile, the slowest in ${slowest} ms`);
    // The cut-off upload leaves no blob: its temporary file is removed when the request aborts.
    await sleep(500);
    const blobsDir = path.join(dataDir, 'blobs');
    const left = filesUnder(blobsDir).filter((file) => !file.endsWith('.lock'));
    check(into, left.length === 0, `the cut-off upload left ${left.length} blob file(s): ${left.join(', ')}`, 'lost');
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
    capturedLogs.push(...server.lines);
    rmSync(dataDir, { recursive: true, force: true });
  }
}
