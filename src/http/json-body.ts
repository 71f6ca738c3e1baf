import type { IncomingMessage } from 'node:http';
import { PortalError } from '../errors.js';

/** A JSON request body is small: webhook records and the like. */
const JSON_LIMIT = 64 * 1024;

/**
 * Reads and parses a JSON request body of at most `limit` bytes (64 KiB). 415 for another content
 * type, 413 past the limit (decided from `Content-Length` before reading when it is declared), 400
 * when it is not JSON.
 */
export async function readJson(req: IncomingMessage, limit = JSON_LIMIT): Promise<unknown> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') {
    throw new PortalError('JSON_CONTENT_TYPE');
  }
  const text = (await readBody(req, limit, () => tooLarge(limit))).toString('utf8');
  if (text.trim() === '') throw new PortalError('JSON_BODY_EMPTY');
  try {
    return JSON.parse(text);
  } catch {
    throw new PortalError('JSON_BODY_INVALID');
  }
}

const tooLarge = (limit: number) => new PortalError('JSON_BODY_TOO_LARGE', limit);

/**
 * The whole body, at most `limit` bytes: past it, `tooLarge()` is thrown, from `Content-Length`
 * before anything is read when it is declared, else once the bytes read pass it.
 */
export async function readBody(req: IncomingMessage, limit: number, tooLarge: () => Error): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (declared > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * A JSON body that may be left out: `undefined` when the request has none (no `Content-Length`, or
 * `0`, and no `Transfer-Encoding`), whatever its Content-Type; otherwise as `readJson`.
 */
export async function readOptionalJson(req: IncomingMessage, limit = JSON_LIMIT): Promise<unknown> {
  const length = req.headers['content-length'];
  if ((length === undefined || length === '0') && req.headers['transfer-encoding'] === undefined) return undefined;
  return readJson(req, limit);
}
