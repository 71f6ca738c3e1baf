import type { IncomingMessage } from 'node:http';
import { HttpError, badRequest } from '../errors.js';

/** A JSON request body is small: webhook records and the like. */
const JSON_LIMIT = 64 * 1024;

/**
 * Reads and parses a JSON request body of at most 64 KiB. 415 for another content type, 413 past the
 * limit (decided from `Content-Length` before reading when it is declared), 400 when it is not JSON.
 */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') {
    throw new HttpError(415, 'The request body must be JSON: send "Content-Type: application/json".');
  }
  const declared = Number(req.headers['content-length']);
  if (declared > JSON_LIMIT) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > JSON_LIMIT) throw tooLarge();
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') throw badRequest('The request body is empty; a JSON object was expected.');
  try {
    return JSON.parse(text);
  } catch {
    throw badRequest('The request body is not valid JSON.');
  }
}

// The rest of the body is not read: the connection is closed rather than drained.
const tooLarge = () =>
  new HttpError(413, `The request body is larger than ${JSON_LIMIT / 1024} KiB.`, { Connection: 'close' });
