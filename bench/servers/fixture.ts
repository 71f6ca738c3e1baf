/**
 * What every bench server holds and answers, so that each sends the portal's bytes: one key, 1,000
 * webhooks, one directory of 1,000 entries, the contract's headers and the catalogue's messages.
 */
import * as crypto from 'node:crypto';
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { getHeapSpaceStatistics } from 'node:v8';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';

export const KEY = 'bench-key-0123456789abcdef';
export const ACCOUNT = 'acct_bench';
export const ENTRY_COUNT = 1000;
/** Requests cycle through this many webhook ids, so that no contender answers one record from a warm cache line. */
export const WEBHOOK_COUNT = 1000;
export const CREATED_AT = '2026-11-21T09:05:07+00:00';
/** The `pg.Pool` size of both contenders on the PostgreSQL path. */
export const POOL_SIZE = 10;

/** SHA-256 as the portal takes it: the one-shot `crypto.hash` where Node has it. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'buffer') => Buffer }).hash;
const sha256 = oneShot
  ? (text: string) => oneShot('sha256', text, 'buffer')
  : (text: string) => createHash('sha256').update(text).digest();
const keyDigest = sha256(KEY);

/** The baselines' key check: the same SHA-256 + timingSafeEqual the portal does, minus the map. */
export function keyMatches(header: string): boolean {
  return header.startsWith('Bearer ') && timingSafeEqual(sha256(header.slice(7)), keyDigest);
}

/** An id of the portal's shape (prefix, `_`, 22 base-62 characters), numbered. */
const benchId = (prefix: string, n: number, word = 'bench') =>
  `${prefix}_${word}${String(n).padStart(22 - word.length, '0')}`;

export interface BenchWebhook {
  id: string;
  type: string;
  url: string;
  secret: string;
  createdAt: string;
}

/** The bench's webhooks, as the API shows them (the portal's storage holds them with `accountId`). */
export const webhooks: BenchWebhook[] = Array.from({ length: WEBHOOK_COUNT }, (_, i) => ({
  id: benchId('wbh', i),
  type: 'customer-created',
  url: `https://receiver.example/hooks/${i}`,
  secret: 'whsec_' + createHash('sha256').update(`secret ${i}`).digest('base64'),
  createdAt: CREATED_AT,
}));
/** Ids of the same shape that name no webhook: the 404 scenario cycles through them. */
export const missingIds = Array.from({ length: WEBHOOK_COUNT }, (_, i) => benchId('wbh', i, 'missing'));
/** The first webhook, for single requests (the response check, the memory scenario). */
export const webhook = webhooks[0]!;

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
export const messageSchema = { type: 'object', properties: { message: { type: 'string' } } };
export const entrySchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    type: { type: 'string' },
    name: { type: 'string' },
    size: { type: 'integer' },
    mime: { type: 'string' },
    fileShareId: { type: ['string', 'null'] },
    createdAt: { type: 'string' },
  },
};
export const listingSchema = { type: 'object', properties: { data: { type: 'array', items: entrySchema } } };

export const directoryId = benchId('fsd', 1);

/** The entries of the bench directory, in listing order, as the API shows them. */
export function entries() {
  return Array.from({ length: ENTRY_COUNT }, (_, i) => ({
    id: benchId('fsf', i),
    type: 'file',
    name: `document-${String(i).padStart(4, '0')}.pdf`,
    size: 1000 + i,
    mime: 'application/pdf',
    fileShareId: null as string | null,
    createdAt: CREATED_AT,
  }));
}

/** The records a portal's storage holds for the bench: the directory, its entries, the webhooks. */
export function storageRecords() {
  return {
    directory: {
      id: directoryId,
      accountId: ACCOUNT,
      directoryId: null,
      type: 'directory' as const,
      name: 'Bench',
      size: 0,
      mime: 'inode/directory',
      fileShareId: null,
      createdAt: CREATED_AT,
    },
    entries: entries().map((entry) => ({ ...entry, accountId: ACCOUNT, directoryId, type: 'file' as const })),
    webhooks: webhooks.map((one) => ({ ...one, accountId: ACCOUNT })),
  };
}

/** The catalogue's answers the baselines give, word for word (`src/errors.ts`). */
export const REALM = 'Bearer realm="customer-portal"';
export const MESSAGES = {
  missing: 'Missing Authorization header: send "Authorization: Bearer <API key>".',
  invalid: 'The API key is not valid.',
  webhookNotFound: (id: string) => `No webhook ${id} in this account.`,
  directoryNotFound: (id: string) => `No directory ${id} in this account.`,
};
export const INVALID_REALM = `${REALM}, error="invalid_token"`;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,200}$/;

/** The request's own `X-Request-Id` when it is of the contract's shape, otherwise a new one: as the portal does. */
export function requestIdOf(req: IncomingMessage): string {
  const header = req.headers['x-request-id'];
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID();
}

export const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The bare baseline's reply, as the portal writes its own: the contract's headers (request id,
 * nosniff, no-store) and the content headers in one flat list, the form `writeHead` takes without
 * copying the headers into a table first.
 */
export function sendJson(
  res: ServerResponse,
  status: number,
  requestId: string,
  payload: string,
  name?: string,
  value?: string,
) {
  const head = [
    'X-Request-Id',
    requestId,
    'X-Content-Type-Options',
    'nosniff',
    'Cache-Control',
    'no-store',
    'Content-Type',
    JSON_TYPE,
    'Content-Length',
    String(Buffer.byteLength(payload)),
  ];
  if (name !== undefined) head.push(name, value!);
  res.writeHead(status, head);
  res.end(payload);
}

/** Tells the parent where to send load: one line `READY {json}` on stdout. */
export function announce(server: Server, extra: Record<string, unknown> = {}) {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`READY ${JSON.stringify({ port, ...extra })}\n`);
  answerStats();
}

/**
 * Answers the parent's questions over IPC, outside the measured requests: `rss` (a collected heap's
 * RSS, memory scenario) and `cpu` (CPU time spent so far, in µs: per-request CPU cost stays readable
 * on a busy machine).
 */
export function answerStats() {
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
    if (message === 'cpu') {
      const { user, system } = process.cpuUsage();
      process.send?.({ cpu: user + system });
    }
  });
}
