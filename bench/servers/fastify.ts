/**
 * The same endpoint in Fastify 5, in its fastest idiomatic form: the request id as Fastify's own
 * (`genReqId`), one callback `onRequest` hook (not async: no promise per request) for the contract's
 * headers and the key check, a sync handler, and response schemas (its compiled serializer).
 */
import Fastify from 'fastify';
import { MESSAGES, announce, messageSchema, requestIdOf, webhookSchema, webhooks } from './fixture.js';
import { contractHook } from './fastify-contract.js';

const byId = new Map(webhooks.map((one) => [one.id, one]));
const app = Fastify({ logger: false, requestIdHeader: false, genReqId: requestIdOf });
app.addHook('onRequest', contractHook);
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
