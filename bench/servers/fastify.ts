/**
 * The same endpoint in Fastify 5, in its fastest idiomatic form: the request id as Fastify's own
 * (`genReqId`), one callback `onRequest` hook (not async: no promise per request) for the contract's
 * headers and the key check, a sync handler, and response schemas (its compiled serializer).
 */
import Fastify from 'fastify';
import {
  INVALID_REALM,
  MESSAGES,
  REALM,
  announce,
  keyMatches,
  messageSchema,
  requestIdOf,
  webhookSchema,
  webhooks,
} from './fixture.js';

const byId = new Map(webhooks.map((one) => [one.id, one]));
const app = Fastify({ logger: false, requestIdHeader: false, genReqId: requestIdOf });
app.addHook('onRequest', (request, reply, done) => {
  // The headers the contract puts on every response, as the portal and the bare baseline send them.
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
});
app.get<{ Params: { id: string } }>(
  '/v1/webhooks/:id',
  { schema: { response: { 200: webhookSchema, 401: messageSchema, 404: messageSchema } } },
  (request, reply) => {
    const found = byId.get(request.params.id);
    if (found === undefined) reply.code(404).send({ message: MESSAGES.webhookNotFound(request.params.id) });
    else reply.send(found);
  },
);
await app.listen({ port: 0, host: '127.0.0.1' });
announce(app.server);
