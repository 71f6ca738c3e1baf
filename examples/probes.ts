/**
 * The standalone server's probes, served before the API and outside its keys:
 * - `GET /healthz`: 200 while the process serves requests (liveness);
 * - `GET /readyz`: 200 with whether each of `portal.ready()`'s checks passed, or 503 while one fails,
 *   while the portal is still opening, and once the server is stopping (readiness). The answer says
 *   no more than that (no driver error, no queue figure: anyone who reaches the port may ask); the
 *   causes go to the log when readiness changes. One check runs at a time, its answer kept a second;
 * - `GET /metrics`, given a metrics endpoint (`METRICS=1`): the Prometheus text.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger, Portal, Readiness } from 'customer-portal';
import type { MetricsEndpoint } from './metrics.js';

export interface Probes {
  /** Answers a probe's request and returns `true`; `false` for any other request. */
  serve(req: IncomingMessage, res: ServerResponse): boolean;
  /** From now on `/readyz` answers 503: the server is draining. */
  stopping(): void;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Cache-Control': 'no-store',
    'Content-Length': Buffer.byteLength(json),
  });
  res.end(res.req.method === 'HEAD' ? undefined : json);
}

/** How long a readiness answer is served again: a balancer polling often costs the stores one read a second. */
const READY_KEPT_MS = 1_000;

export function createProbes(portal: () => Portal | undefined, logger: Logger, metrics?: MetricsEndpoint): Probes {
  let draining = false;
  let kept: { at: number; readiness: Readiness } | undefined;
  let asking: Promise<Readiness> | undefined;
  let wasReady: boolean | undefined;

  /** The portal's readiness, read at most once a second; a change is logged with its causes. */
  function readiness(open: Portal): Promise<Readiness> {
    if (kept !== undefined && Date.now() - kept.at < READY_KEPT_MS) return Promise.resolve(kept.readiness);
    asking ??= open
      .ready()
      .then((answer) => {
        kept = { at: Date.now(), readiness: answer };
        if (answer.ok !== wasReady) {
          if (answer.ok) logger.info({ checks: answer.checks }, 'ready');
          else logger.warn({ checks: answer.checks }, 'not ready: a check failed');
        }
        wasReady = answer.ok;
        return answer;
      })
      .finally(() => (asking = undefined));
    return asking;
  }
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
      readiness(open).then(
        ({ ok, checks }) =>
          send(res, ok ? 200 : 503, {
            ok,
            checks: {
              storage: { ok: checks.storage.ok },
              blobs: { ok: checks.blobs.ok },
              worker: { ok: checks.worker.ok, running: checks.worker.running },
            },
          }),
        () => send(res, 503, { ok: false, message: 'the readiness check failed' }),
      );
      return true;
    },
    stopping() {
      draining = true;
    },
  };
}
