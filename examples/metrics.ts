/**
 * `METRICS=1`: the portal's OpenTelemetry metrics in the Prometheus text format at `GET /metrics`,
 * through OpenTelemetry's own SDK and Prometheus exporter. Registered as the global meter provider
 * before the portal is made, which is when the portal makes its instruments.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface MetricsEndpoint {
  /** Answers `GET /metrics`: `401` without `Authorization: Bearer <token>` when a token was given. */
  serve(req: IncomingMessage, res: ServerResponse): void;
  close(): Promise<void>;
}

/** Whether `header` is `Bearer <token>`, compared in constant time (through digests of equal length). */
function bearerMatches(header: string | undefined, token: string): boolean {
  const given = /^Bearer (.+)$/i.exec(header ?? '')?.[1] ?? '';
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(given), digest(token));
}

const PACKAGES = [
  '@opentelemetry/api',
  '@opentelemetry/sdk-metrics',
  '@opentelemetry/exporter-prometheus',
  '@opentelemetry/resources',
];

export async function prometheusMetrics(token?: string): Promise<MetricsEndpoint> {
  let modules: [
    typeof import('@opentelemetry/api'),
    typeof import('@opentelemetry/sdk-metrics'),
    typeof import('@opentelemetry/exporter-prometheus'),
    typeof import('@opentelemetry/resources'),
  ];
  try {
    modules = await Promise.all([
      import('@opentelemetry/api'),
      import('@opentelemetry/sdk-metrics'),
      import('@opentelemetry/exporter-prometheus'),
      import('@opentelemetry/resources'),
    ]);
  } catch (error) {
    throw new Error(`METRICS=1 needs ${PACKAGES.join(', ')}: npm install ${PACKAGES.join(' ')}`, { cause: error });
  }
  const [api, { MeterProvider }, { PrometheusExporter }, { resourceFromAttributes }] = modules;
  // The exporter's own server stays off: /metrics is served on the portal's port, beside /healthz.
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const resource = resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME || 'customer-portal' });
  const provider = new MeterProvider({ resource, readers: [exporter] });
  api.metrics.setGlobalMeterProvider(provider);
  return {
    serve(req, res) {
      if (token !== undefined && !bearerMatches(req.headers.authorization, token)) {
        res.writeHead(401, { 'content-type': 'application/json; charset=utf-8', 'www-authenticate': 'Bearer' });
        res.end(JSON.stringify({ message: '/metrics needs Authorization: Bearer <METRICS_TOKEN>' }));
        return;
      }
      exporter.getMetricsRequestHandler(req, res);
    },
    close: () => provider.shutdown(),
  };
}
