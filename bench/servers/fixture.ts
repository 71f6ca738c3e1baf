/** What every bench server holds: one key, one webhook, one directory of 1,000 entries. */
import * as crypto from 'node:crypto';
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { getHeapSpaceStatistics } from 'node:v8';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';

export const KEY = 'bench-key-0123456789abcdef';
export const ACCOUNT = 'acct_bench';
export const ENTRY_COUNT = 1000;

/** SHA-256 as the portal takes it: the one-shot `crypto.hash` where Node has it. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'buffer') => Buffer }).hash;
const sha256 = oneShot ? (text: string) => oneShot('sha256', text, 'buffer') : (text: string) => createHash('sha256').update(text).digest();
const keyDigest = sha256(KEY);

/** The baselines' key check: the same SHA-256 + timingSafeEqual the portal does, minus the map. */
export function keyMatches(header: string | undefined): boolean {
  if (header === undefined || !header.startsWith('Bearer ')) return false;
  return timingSafeEqual(sha256(header.slice(7)), keyDigest);
}

export const webhook = {
  id: 'wbh_benchWebhook000000000001',
  type: 'customer-created',
  url: 'https://receiver.example/hook',
  secret: 'whsec_' + Buffer.alloc(32, 9).toString('base64'),
  createdAt: '2026-11-21T09:05:07+00:00',
};

export const webhookSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    type: { type: 'string' },
    url: { type: 'string' },
    secret: { type: 'string' },
    createdAt: { type: 'string' },
  },
};

/** The entries of the bench directory, in listing order: what the bare baseline serializes. */
export function entries(directoryId: string) {
  return Array.from({ length: ENTRY_COUNT }, (_, i) => ({
    id: `fsf_bench${String(i).padStart(17, '0')}`,
    type: 'file',
    name: `document-${String(i).padStart(4, '0')}.pdf`,
    size: 1000 + i,
    mime: 'application/pdf',
    fileShareId: null,
    createdAt: '2026-11-21T09:05:07+00:00',
    directoryId,
  })).map(({ directoryId: _d, ...entry }) => entry);
}

export const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The baselines' reply: the same bytes the portal sends, including the headers the contract puts on
 * every response (a request id, nosniff, no-store), so that both sides hand the client the same work.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'X-Request-Id': randomUUID(),
    'X-Content-Type-Options': 'nosniff',
    'Cache-Control': 'no-store',
    'Content-Type': JSON_TYPE,
    'Content-Length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}

/** Tells the parent where to send load: one line `READY {json}` on stdout. */
export function announce(server: Server, extra: Record<string, unknown> = {}) {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`READY ${JSON.stringify({ port, ...extra })}\n`);
  // The parent asks for a collected heap and the RSS over IPC (memory scenario).
  process.on('message', (message) => {
    if (message === 'rss') {
      (globalThis as { gc?: () => void }).gc?.();
      // The young generation is empty after a full GC, but V8 keeps its pages: how many depends
      // on how much has survived scavenges so far, not on what the process still holds.
      const young = getHeapSpaceStatistics()
        .filter((space) => space.space_name === 'new_space' || space.space_name === 'new_large_object_space')
        .reduce((sum, space) => sum + space.physical_space_size, 0);
      process.send?.({ rss: process.memoryUsage().rss, young });
    }
    // CPU time spent so far, in µs: per-request CPU cost stays readable on a busy machine.
    if (message === 'cpu') {
      const { user, system } = process.cpuUsage();
      process.send?.({ cpu: user + system });
    }
  });
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;
