/**
 * Load: mixed traffic (reads, uploads, downloads, event publishing) against the child server on the
 * filesystem adapters for a bounded time, with the webhook receiver failing every fifth call. Prints
 * error rate, p99 latency and the server's RSS over time; checks RSS growth after warm-up and that
 * every event is delivered by the end.
 *
 * Memory is weighed at the end of warm-up and once the load's backlog of deliveries has gone out,
 * each time right after a full collection in the server, as RSS less the JS heap's free space:
 * between collections the heap holds up to tens of MB of garbage, and which side of a collection a
 * single sample falls on would otherwise decide the check.
 */
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { MULTIPART, documentBytes, multipart, validParts } from '../test/helpers/agreements.js';
import { KEY_A } from '../test/helpers/server.js';
import { killChild, publish, startChild } from './faults.js';
import { startSink } from './sink.js';
import { secretsUsed } from './target.js';
import { check, count, row, sleep } from './tally.js';

const AUTH = { authorization: `Bearer ${KEY_A}` };

function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

interface Memory {
  rss: number;
  heapTotal: number;
  heapUsed: number;
}

/**
 * RSS less the free space the JS heap keeps committed after a full collection. V8 gives emptied
 * pages back to the system slowly: right after a burst, a process holding nothing more can show
 * 100 MB more RSS than before it (the same code at two runs in a row: -6 % and +44 % beyond the
 * records' allowance). What a leak holds, in the heap or outside it, still counts.
 */
const held = (memory: Memory) => memory.rss - (memory.heapTotal - memory.heapUsed);

/** The server's memory right after a full collection. */
async function collected(url: string): Promise<Memory> {
  return (await (await fetch(`${url}/_test/memory`, { method: 'POST' })).json()) as Memory;
}

export async function load(seconds: number, concurrency: number): Promise<void> {
  const into = row('load', `requests: ${seconds} s mixed traffic, ${concurrency} clients, receiver failing 20 %`);
  const dir = mkdtempSync(path.join(tmpdir(), 'portal-load-'));
  const sink = await startSink();
  sink.mode = { fail: (n) => n % 5 === 0 };
  // `--expose-gc`: the memory checks weigh RSS after a full collection, not wherever the last one left it.
  // MALLOC_ARENA_MAX: glibc gives each libuv worker thread (fs, crypto) an arena of its own, and
  // keeps what they freed; the check weighs what the process holds, not those caches.
  const child = await startChild(dir, '0', { NODE_OPTIONS: '--expose-gc', MALLOC_ARENA_MAX: '2' });
  try {
    for (const type of ['customer-created', 'agreement-created']) {
      const res = await fetch(`${child.url}/v1/webhooks`, {
        method: 'POST',
        headers: { ...AUTH, 'content-type': 'application/json' },
        body: JSON.stringify({ type, url: sink.url }),
      });
      secretsUsed.add(((await res.json()) as { secret: string }).secret);
    }
    const attachmentBytes = documentBytes(100_000, 3);
    const attachment = (await (
      await fetch(`${child.url}/_test/attachment`, { method: 'POST', body: attachmentBytes })
    ).json()) as {
      id: string;
      ticketId: string;
      messageId: string;
    };
    const uploadBody = multipart(
      validParts().map((p) => (p.name === 'documents' ? { ...p, bytes: documentBytes(30_000, 5) } : p)),
    );

    const published = new Set<string>();
    /** Records stored after warm-up: an event and a delivery a publish, an agreement besides for an upload. */
    let recordsAfterWarmUp = 0;
    // Warm-up is the first half: on a busy machine the heap is still reaching its working size at a third.
    let warm: Memory | undefined;
    const stored = (records: number) => {
      if (warm) recordsAfterWarmUp += records;
    };
    const warmUp = sleep((seconds * 1000) / 2).then(async () => (warm = await collected(child.url)));
    const agreements = new Set<string>();
    const latencies: number[] = [];
    const kinds = { read: 0, upload: 0, download: 0, publish: 0 };
    let errors = 0;
    const rss: { at: number; bytes: number }[] = [];
    const started = Date.now();
    const end = started + seconds * 1000;
    const sampler = setInterval(() => rss.push({ at: (Date.now() - started) / 1000, bytes: rssOf(child.pid) }), 1000);

    const timed = async (kind: keyof typeof kinds, run: (signal: AbortSignal) => Promise<boolean>) => {
      const t0 = performance.now();
      kinds[kind]++;
      let outcome: 'correct' | '5xx' | 'hung' | 'wrong' = 'correct';
      let detail: string = kind;
      try {
        if (!(await run(AbortSignal.timeout(15_000)))) outcome = 'wrong';
      } catch (error) {
        const text = error instanceof Error ? `${error.name} ${error.message}` : String(error);
        outcome = /5\d\d/.test(text) ? '5xx' : /Timeout|abort/i.test(text) ? 'hung' : 'wrong';
        detail = `${kind}: ${text}`;
      }
      latencies.push(performance.now() - t0);
      if (outcome !== 'correct') errors++;
      count(into, outcome, detail);
    };
    const ok = (res: Response) => {
      if (res.status >= 500) throw new Error(`answered ${res.status}`);
      return res.ok;
    };

    let turn = 0;
    const client = async () => {
      while (Date.now() < end) {
        const pick = turn++ % 20;
        if (pick < 8) {
          await timed('read', async (signal) =>
            ok(await fetch(`${child.url}/v1/${pick % 2 ? 'files' : 'webhooks'}`, { headers: AUTH, signal })),
          );
        } else if (pick < 11) {
          await timed('upload', async (signal) => {
            const res = await fetch(`${child.url}/v1/agreements`, {
              method: 'POST',
              headers: { ...AUTH, 'content-type': MULTIPART },
              body: uploadBody,
              signal,
            });
            if (!ok(res)) return false;
            agreements.add(((await res.json()) as { id: string }).id);
            stored(3);
            return true;
          });
        } else if (pick < 15) {
          await timed('download', async (signal) => {
            const linkRes = await fetch(
              `${child.url}/v1/tickets/${attachment.ticketId}/message/${attachment.messageId}/attachment/${attachment.id}/download`,
              {
                headers: AUTH,
                signal,
              },
            );
            if (!ok(linkRes)) return false;
            const { link } = (await linkRes.json()) as { link: string };
            const bytes = await fetch(link, { signal });
            return ok(bytes) && Buffer.from(await bytes.arrayBuffer()).equals(attachmentBytes);
          });
        } else {
          await timed('publish', async () => {
            const id = await publish(child, { n: turn });
            if (id !== null) published.add(id);
            if (id !== null) stored(2);
            return id !== null;
          });
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, client));
    clearInterval(sampler);
    await warmUp;

    // Every event reaches the receiver in the end: retries every 1-2 s, one call in five failing.
    const drainStart = Date.now();
    const delivered = () =>
      [...published].every((id) => sink.delivered.has(id)) && [...agreements].every((id) => sink.deliveredData.has(id));
    while (!delivered() && Date.now() - drainStart < 45_000) await sleep(200);
    // Weighed once the backlog has gone out: the deliveries still waiting when the load stops are
    // work in hand, and how many there are depends on how fast the machine is, not on a leak.
    const loaded = await collected(child.url);
    const events = row('load', 'events published under load, delivered by the end');
    for (const id of published) check(events, sink.delivered.has(id), `event ${id} never delivered`, 'lost');
    for (const id of agreements)
      check(events, sink.deliveredData.has(id), `agreement-created for ${id} never delivered`, 'lost');
    const memory = row('load', 'server RSS growth after warm-up, beyond the records index, under 10 %');

    const total = latencies.length;
    const sorted = [...latencies].sort((x, y) => x - y);
    const p = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
    const base = held(warm!);
    const growth = (held(loaded) - base) / base;
    // The fs adapter indexes every record in memory by design (README: about 42 MiB of heap a 100,000
    // records, ~440 B each); what the records written since warm-up take is allowed at 1 KiB each.
    const allowance = recordsAfterWarmUp * 1024;
    const leakGrowth = (held(loaded) - base - allowance) / base;
    const heapPerRecord = (loaded.heapUsed - warm!.heapUsed) / Math.max(1, recordsAfterWarmUp);
    const mb = (bytes: number) => (bytes / 1048576).toFixed(0);
    const series = rss
      .filter((_, i) => i % 5 === 0 || i === rss.length - 1)
      .map((s) => `${s.at.toFixed(0)}s ${mb(s.bytes)}`);
    into.notes.push(
      `${total} requests (${kinds.read} reads, ${kinds.upload} uploads, ${kinds.download} downloads, ${kinds.publish} publishes), ` +
        `${(total / seconds).toFixed(0)}/s; error rate ${((100 * errors) / Math.max(1, total)).toFixed(2)} %; ` +
        `latency p50 ${p(0.5).toFixed(0)} ms, p99 ${p(0.99).toFixed(0)} ms, max ${p(1).toFixed(0)} ms`,
    );
    memory.notes.push(
      `server RSS (MB) over time: ${series.join(', ')}; growth after warm-up ${(growth * 100).toFixed(1)} %, ` +
        `${(leakGrowth * 100).toFixed(1)} % beyond the index of the ${recordsAfterWarmUp} records written since (limit 10 %); ` +
        `after a full collection: RSS ${mb(warm!.rss)} MB at the end of warm-up, ${mb(loaded.rss)} MB once the backlog was delivered; ` +
        `less the JS heap's free space ${mb(base)} MB and ${mb(held(loaded))} MB, ` +
        `live heap ${mb(warm!.heapUsed)} MB to ${mb(loaded.heapUsed)} MB (${heapPerRecord.toFixed(0)} B a record)`,
    );
    events.notes.push(
      `${published.size + agreements.size} events (${published.size} published, ${agreements.size} agreement-created) delivered ` +
        `in ${((Date.now() - drainStart) / 1000).toFixed(1)} s after the load; receiver saw ${sink.calls} calls, one in five answered 500`,
    );
    check(
      memory,
      leakGrowth < 0.1,
      `RSS less the JS heap's free space grew ${(growth * 100).toFixed(1)} % after warm-up (${mb(base)} MB to ${mb(held(loaded))} MB), ${(leakGrowth * 100).toFixed(1)} % beyond the records' index`,
    );
    // Then 10 s of reads and downloads only: nothing is stored, so any lasting growth is a leak.
    const readOnly = row('load', 'server RSS growth over 10 s of reads and downloads under 10 %');
    const readStart = await collected(child.url);
    const readEnd = Date.now() + 10_000;
    const readRss: number[] = [rssOf(child.pid)];
    const readSampler = setInterval(() => readRss.push(rssOf(child.pid)), 1000);
    let readRequests = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async (_, n) => {
        while (Date.now() < readEnd) {
          readRequests++;
          if (n % 2 === 0) await (await fetch(`${child.url}/v1/files`, { headers: AUTH })).arrayBuffer();
          else {
            const linkRes = await fetch(
              `${child.url}/v1/tickets/${attachment.ticketId}/message/${attachment.messageId}/attachment/${attachment.id}/download`,
              {
                headers: AUTH,
              },
            );
            const { link } = (await linkRes.json()) as { link: string };
            await (await fetch(link)).arrayBuffer();
          }
        }
      }),
    );
    clearInterval(readSampler);
    const readDone = await collected(child.url);
    // Weighed as the check above weighs it: the JS heap's free space after the collection is room V8
    // keeps for the next allocations, not something the reads left behind.
    const readGrowth = (held(readDone) - held(readStart)) / held(readStart);
    readOnly.notes.push(
      `reads and downloads only: ${readRequests} requests; RSS (MB) ${readRss.map(mb).join(', ')}; ` +
        `after a full collection RSS ${mb(readStart.rss)} MB before, ${mb(readDone.rss)} MB after; less the JS heap's free space ` +
        `${mb(held(readStart))} MB and ${mb(held(readDone))} MB: growth ${(readGrowth * 100).toFixed(1)} %`,
    );
    check(
      readOnly,
      readGrowth < 0.1,
      `RSS less the JS heap's free space grew ${(readGrowth * 100).toFixed(1)} % over reads and downloads alone`,
    );
    for (const signature of sink.signatures) secretsUsed.add(signature);
  } finally {
    await killChild(child, 'SIGTERM').catch(() => {});
    await sink.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
