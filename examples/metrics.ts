/**
 * `METRICS=1`: the portal's OpenTelemetry metrics in the Prometheus text format at `GET /metrics`,
 * through OpenTelemetry's own SDK and Prometheus exporter. Registered as the global meter provider
 * before the portal is made, which is when the portal makes its instruments.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface MetricsEndpoint {
  /** Answers `GET /metrics`. */
  serve(req: IncomingMessage, res: ServerResponse): void;
  close(): Promise<void>;
}

const PACKAGES = ['@opentelemetry/api', '@opentelemetry/sdk-metrics', '@opentelemetry/exporter-prometheus', '@opentelemetry/resources'];

export async function prometheusMetrics(): Promise<MetricsEndpoint> {
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
    serve: (req, res) => exporter.getMetricsRequestHandler(req, res),
    close: () => provider.shutdown(),
  };
}
