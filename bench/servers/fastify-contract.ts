/**
 * The `onRequest` hook both Fastify baselines use: the headers the contract puts on every response,
 * as the portal and the bare baseline send them, and the key check. A callback hook (not async: no
 * promise per request).
 */
import type { onRequestHookHandler } from 'fastify';
import { INVALID_REALM, MESSAGES, REALM, keyMatches } from './fixture.js';

export const contractHook: onRequestHookHandler = (request, reply, done) => {
  reply.headers({ 'x-request-id': request.id, 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' });
  const authorization = request.headers.authorization;
  if (authorization === undefined) {
    reply.code(401).header('www-authenticate', REALM).send({ message: MESSAGES.missing });
    return;
  }
  if (!keyMatches(authorization)) {
    reply.code(401).header('www-authenticate', INVALID_REALM).send({ message: MESSAGES.invalid });
    return;
  }
  done();
};
