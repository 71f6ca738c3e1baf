import type { IncomingMessage } from 'node:http';
import { parseIdempotencyKey, type IdempotentOutcome } from '../domain/idempotency.js';
import type { Reply } from './reply.js';

/** The request's `Idempotency-Key`, or `undefined` without one; a malformed key is a 400. */
export const idempotencyKeyOf = (req: IncomingMessage): string | undefined =>
  parseIdempotencyKey(req.headers['idempotency-key']);

/** The answer of a create made with a key, as first given: a replay says so in `Idempotent-Replayed: true`. */
export function idempotentReply({ answer, replayed }: IdempotentOutcome): Reply {
  const headers: Record<string, string> = {};
  if (answer.location !== null) headers.Location = answer.location;
  if (replayed) headers['Idempotent-Replayed'] = 'true';
  return { status: answer.status, json: answer.body, headers };
}
