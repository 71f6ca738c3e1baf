/**
 * The standalone server's probes, served before the API and outside its keys:
 * - `GET /healthz`: 200 while the process serves requests (liveness);
 * - `GET /readyz`: 200 with `portal.ready()`'s checks, or 503 with them while a check fails, while
 *   the portal is still opening, and once the server is stopping (readiness);
 * - `GET /metrics`, given a metrics endpoint (`METRICS=1`): the Prometheus text.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Portal } from '../src/index.js';
import type { MetricsEndpoint } from './metrics.js';

export interface Probes {
  /** Answers a probe's request and returns `true`; `false` for any other request. */
  serve(req: IncomingMessage, res: ServerResponse): boolean;
  /** From now on `/readyz` answers 503: the server is draining. */
  stopping(): void;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', 'Content-Length': Buffer.byteLength(json) });
  res.end(res.req.method === 'HEAD' ? undefined : json);
}

export function createProbes(portal: () => Portal | undefined, metrics?: MetricsEndpoint): Probes {
  let draining = false;
  return {
    serve(req, res) {
      const path = (req.url ?? '').split('?')[0];
      if (path !== '/healthz' && path !== '/readyz' && (path !== '/metrics' || metrics === undefined)) return false;
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('Allow', 'GET, HEAD');
        send(res, 405, { message: `${path} answers GET and HEAD` });
        return true;
      }
      if (path === '/healthz') {
        send(res, 200, { ok: true });
        return true;
      }
      if (path === '/metrics') {
        metrics!.serve(req, res);
        return true;
      }
      const open = portal();
      if (draining || open === undefined) {
        send(res, 503, { ok: false, message: draining ? 'stopping' : 'starting' });
        return true;
      }
      open.ready().then(
        (readiness) => send(res, readiness.ok ? 200 : 503, readiness),
        (error: unknown) => send(res, 503, { ok: false, message: error instanceof Error ? error.message : String(error) }),
      );
      return true;
    },
    stopping() {
      draining = true;
    },
  };
}
