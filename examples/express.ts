/**
 * The portal inside an Express 5 app: `app.use(portal.handler)` serves everything under `/v1`, and
 * for any other path the handler calls `next()`, so the app's own routes answer as usual.
 *
 *   npm run build && node dist/examples/express.js   # prints a generated key; or set PORTAL_API_KEYS
 */
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import express from 'express';
import { createPortal, type Portal, type PortalOptions } from 'customer-portal';
import { exampleApiKeys } from './api-keys.js';

/** An Express app with the portal mounted and one route of its own (`GET /health`). */
export async function createExpressApp(options: PortalOptions = {}): Promise<{ app: express.Express; portal: Portal }> {
  const portal = await createPortal(options);
  const app = express();
  // First, and before any body parser: the portal reads its own request bodies (uploads are streamed).
  app.use(portal.handler);
  app.use(express.json()); // the app's own routes may parse bodies; /v1 requests never get this far
  app.get('/health', (_req, res) => {
    res.json({ ok: true });
  });
  return { app, portal };
}

/**
 * Listens with the timeouts a server facing the internet needs (see docs/embedding.md): a client that
 * trickles its headers (slowloris) or its upload is cut off instead of holding a socket forever.
 * `app.listen()` would use Node's defaults, which cut off neither within a minute.
 */
export function serveExpressApp(app: express.Express, port: number, host: string): Promise<Server> {
  // Node checks headersTimeout and requestTimeout every connectionsCheckingInterval (default 30 s).
  const server = http.createServer({ connectionsCheckingInterval: 1_000 }, app);
  server.headersTimeout = 10_000; // the request line and headers, from the first byte
  server.requestTimeout = 60_000; // the whole request, body included (answered 408)
  server.keepAliveTimeout = 5_000; // an idle keep-alive connection
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

async function main(): Promise<void> {
  const { app, portal } = await createExpressApp({ auth: { apiKeys: exampleApiKeys() } });
  const server = await serveExpressApp(app, Number(process.env.PORT ?? 3000), process.env.HOST ?? '127.0.0.1');
  const { address, port } = server.address() as AddressInfo;
  console.log(`Express app on http://${address}:${port} (API under /v1, GET /health)`);
  const stop = () => server.close(() => void portal.close());
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
