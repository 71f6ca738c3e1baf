/**
 * The portal inside a Fastify 5 app. Fastify owns routing and body parsing, so the portal gets a
 * scope of its own under `/v1`: there, no content-type parser reads the body (the portal streams
 * uploads itself), and one catch-all route hands the raw request and response over, after
 * `reply.hijack()` tells Fastify the answer is not its to send.
 *
 *   npm run build && node dist/examples/fastify.js   # prints a generated key; or set PORTAL_API_KEYS
 */
import { pathToFileURL } from 'node:url';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { createPortal, type Portal, type PortalOptions } from 'customer-portal';
import { exampleApiKeys } from './api-keys.js';

/** A Fastify app with the portal under its `basePath` (`/v1`) and one route of its own (`GET /health`). */
export async function createFastifyApp(options: PortalOptions = {}): Promise<{ app: FastifyInstance; portal: Portal }> {
  const portal = await createPortal(options);
  // A client that trickles its headers (slowloris) or its upload is cut off instead of holding a socket
  // forever (see docs/embedding.md). Fastify sets keepAliveTimeout and requestTimeout from its own
  // options; headersTimeout and how often Node checks both go to http.createServer through `http`.
  const app = Fastify({
    keepAliveTimeout: 5_000,
    requestTimeout: 60_000,
    http: { headersTimeout: 10_000, connectionsCheckingInterval: 1_000 },
  });

  await app.register(
    async (api) => {
      // In this scope only: accept every content type and leave the body stream unread.
      api.removeAllContentTypeParsers();
      api.addContentTypeParser('*', (_request, _payload, done) => done(null));
      const serve = (request: FastifyRequest, reply: FastifyReply) => {
        reply.hijack();
        portal.handler(request.raw, reply.raw);
      };
      api.all('/', serve);
      api.all('/*', serve);
    },
    // Fastify hands the portal the whole URL, so the scope's prefix is the portal's basePath.
    { prefix: (options.basePath ?? '/v1').replace(/\/+$/, '') },
  );

  app.get('/health', async () => ({ ok: true }));
  // app.close() closes the portal too: its worker, its sweep, its adapters.
  app.addHook('onClose', async () => portal.close());
  return { app, portal };
}

async function main(): Promise<void> {
  const { app } = await createFastifyApp({ auth: { apiKeys: exampleApiKeys() } });
  const address = await app.listen({ port: Number(process.env.PORT ?? 3000), host: process.env.HOST ?? '127.0.0.1' });
  console.log(`Fastify app on ${address} (API under /v1, GET /health)`);
  const stop = () => void app.close();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
