/** The same endpoint in Fastify 5, with a response schema (its fast serializer) and an onRequest key check. */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import { announce, keyMatches, webhook, webhookSchema } from './fixture.js';

const webhooks = new Map([[webhook.id, webhook]]);
const app = Fastify({ logger: false });
// The headers the contract puts on every response, as the portal and the bare baseline send them.
app.addHook('onRequest', async (_request, reply) => {
  reply.headers({ 'x-request-id': randomUUID(), 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' });
});
app.addHook('onRequest', async (request, reply) => {
  if (!keyMatches(request.headers.authorization)) {
    reply.code(401).header('WWW-Authenticate', 'Bearer realm="customer-portal"').send({ message: 'The API key is not valid.' });
    return reply;
  }
});
app.get<{ Params: { id: string } }>(
  '/v1/webhooks/:id',
  { schema: { response: { 200: webhookSchema, 404: { type: 'object', properties: { message: { type: 'string' } } } } } },
  async (request, reply) => {
    const found = webhooks.get(request.params.id);
    if (!found) return reply.code(404).send({ message: 'No webhook in this account.' });
    return found;
  },
);
await app.listen({ port: 0, host: '127.0.0.1' });
announce(app.server, { webhookId: webhook.id });
