/**
 * OpenTelemetry, through `@opentelemetry/api` when it is installed (an optional peer): the spans
 * and measurements the portal makes, named once here. Without the package every method is a no-op
 * the rooms call at no cost; with it and no SDK registered, the API's own no-op tracer and meter
 * answer. The SDK, exporters and providers are the host's: the portal only uses the global API.
 */
import type * as Otel from '@opentelemetry/api';
import type { IncomingMessage } from 'node:http';
import { VERSION } from './version.js';

/** How a webhook call went: a 2xx, another status, no answer in time, or no answer at all. */
export type CallOutcome = 'success' | 'failure' | 'timeout' | 'error';
/** What a recorded attempt did to its delivery. */
export type DeliveryOutcome = 'delivered' | 'retrying' | 'held' | 'exhausted' | 'redelivered' | 'not-recorded';

/** The delivery queue as the gauges report it: how many wait, and how long the earliest has. */
export interface QueueState {
  waiting: number;
  lagMs: number;
}

/** One request's span and duration; `end` once its answer is out, with `null` for a client gone first. */
export interface RequestTelemetry {
  /** Runs `work` with the request's span active, so spans made inside (a driver's) are its children. */
  within<T>(work: () => T): T;
  end(status: number | null): void;
}

export interface CallTelemetry {
  end(outcome: CallOutcome, statusCode: number | null, error: string | null, durationMs: number): void;
}

export interface CallInfo {
  url: string;
  /** 1 for the first attempt. */
  attempt: number;
  webhookId: string;
  deliveryId: string;
  eventType: string;
}

export interface Telemetry {
  /** Whether `@opentelemetry/api` is there: without it the rest are no-ops. */
  readonly enabled: boolean;
  /**
   * `route`: the template matched, base path included (`/v1/webhooks/:webhookId`), or `null`.
   * `null` when nothing would record it (no SDK): the handler then serves as without telemetry.
   */
  request(req: IncomingMessage, route: string | null): RequestTelemetry | null;
  call(info: CallInfo): CallTelemetry;
  delivery(outcome: DeliveryOutcome): void;
  /** A call a worker held back: its webhook's rate limit, or its calls in flight at their limit. */
  limited(limit: 'rate' | 'in-flight'): void;
  removed(kind: 'events' | 'deliveries', count: number): void;
  /** Reports the queue gauges from `read` at each collection; returns the function that stops it. */
  observeQueue(read: () => Promise<QueueState | null>): () => void;
}

const NO_CALL: CallTelemetry = { end: () => {} };

/** What the portal does without `@opentelemetry/api`. */
export const noTelemetry: Telemetry = {
  enabled: false,
  request: () => null,
  call: () => NO_CALL,
  delivery: () => {},
  limited: () => {},
  removed: () => {},
  observeQueue: () => () => {},
};

const SCOPE = 'customer-portal';
/** The port of a webhook URL that names none, by scheme: HTTP's, and each destination's broker's. */
const DEFAULT_PORTS: Record<string, number> = {
  'https:': 443,
  'amqp:': 5672,
  'amqps:': 5671,
  'nats:': 4222,
  'mqtt:': 1883,
  'mqtts:': 8883,
  'redis:': 6379,
  'rediss:': 6379,
  'sqs:': 443,
};
/** The buckets OpenTelemetry's HTTP conventions advise for durations in seconds. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

/**
 * `url.full` of a webhook call: the receiver's origin and `/REDACTED`. Receivers carry their own
 * secrets in the path (Slack's and Discord's incoming webhooks) and in the query (`?token=…`), so
 * neither is recorded; the webhook id on the span tells which URL it was.
 */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    // A broker's URL (`amqp://user:pass@host/vhost`) has no origin; its host stands in, its credentials never.
    const origin = parsed.origin === 'null' ? `${parsed.protocol}//${parsed.host}` : parsed.origin;
    return parsed.pathname === '/' && parsed.search === '' ? `${origin}/` : `${origin}/REDACTED`;
  } catch {
    return 'invalid';
  }
}

function telemetryOf(api: typeof Otel): Telemetry {
  const { trace, metrics, context, propagation, SpanKind, SpanStatusCode, ValueType, ProxyTracerProvider } = api;
  const tracer = trace.getTracer(SCOPE, VERSION);
  const meter = metrics.getMeter(SCOPE, VERSION);
  // With the API and no SDK, every span and measurement would be dropped: a request then costs
  // nothing more, where building them cost 8 % of GET /v1/webhooks/{id} (bench row "telemetry").
  // A meter is fixed when made; a tracer provider may be registered later, so it is asked each time.
  const measuring = meter.constructor !== api.createNoopMeter().constructor;
  const noTracerProvider = new ProxyTracerProvider().getDelegate().constructor;
  const tracing = () => {
    const provider = trace.getTracerProvider();
    return !(provider instanceof ProxyTracerProvider) || provider.getDelegate().constructor !== noTracerProvider;
  };
  const requestDuration = meter.createHistogram('http.server.request.duration', {
    description: 'Duration of HTTP server requests.',
    unit: 's',
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  });
  const callDuration = meter.createHistogram('customer_portal.webhook.call.duration', {
    description: 'Duration of webhook calls, from the request sent to the answer, by outcome.',
    unit: 's',
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  });
  const deliveries = meter.createCounter('customer_portal.deliveries', {
    description: 'Attempts recorded, by what they did to their delivery.',
    unit: '{attempt}',
    valueType: ValueType.INT,
  });
  const limitedCalls = meter.createCounter('customer_portal.deliveries.limited', {
    description:
      "Calls a worker held back before starting them, by the limit: the webhook's rate limit, or its calls in flight.",
    unit: '{call}',
    valueType: ValueType.INT,
  });
  const removals = meter.createCounter('customer_portal.retention.removed', {
    description: 'Records retention removed, by kind.',
    unit: '{record}',
    valueType: ValueType.INT,
  });
  const depth = meter.createObservableGauge('customer_portal.webhook.queue.depth', {
    description:
      'Deliveries due and not taken by a worker, counted up to 10,000 (the store is shared: every instance reports the same queue).',
    unit: '{delivery}',
    valueType: ValueType.INT,
  });
  const oldest = meter.createObservableGauge('customer_portal.webhook.queue.oldest_age', {
    description: 'How long the earliest waiting delivery has been due (0 when none waits).',
    unit: 's',
  });

  return {
    enabled: true,
    request(req, route) {
      if (!measuring && !tracing()) return null;
      const method = req.method ?? 'GET';
      // Under a host's own HTTP instrumentation its server span is active: ours is a child of it.
      // Otherwise the caller's trace context (traceparent) is the parent.
      const active = trace.getSpan(context.active());
      const parent = active === undefined ? propagation.extract(context.active(), req.headers) : context.active();
      const attributes: Otel.Attributes = {
        'http.request.method': method,
        'url.path': (req.url ?? '/').split('?')[0]!,
        'url.scheme': (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http',
        'network.protocol.version': req.httpVersion,
      };
      if (route !== null) attributes['http.route'] = route;
      const span = tracer.startSpan(
        route === null ? method : `${method} ${route}`,
        { kind: active === undefined ? SpanKind.SERVER : SpanKind.INTERNAL, attributes },
        parent,
      );
      const started = performance.now();
      const spanContext = trace.setSpan(parent, span);
      return {
        within: (work) => context.with(spanContext, work),
        end(status) {
          const measured: Otel.Attributes = { 'http.request.method': method };
          if (route !== null) measured['http.route'] = route;
          if (status === null) {
            span.setAttribute('error.type', 'aborted');
            measured['error.type'] = 'aborted';
          } else {
            span.setAttribute('http.response.status_code', status);
            measured['http.response.status_code'] = status;
            if (status >= 500) {
              span.setStatus({ code: SpanStatusCode.ERROR });
              span.setAttribute('error.type', String(status));
              measured['error.type'] = String(status);
            }
          }
          requestDuration.record((performance.now() - started) / 1000, measured);
          span.end();
        },
      };
    },
    call(info) {
      if (!measuring && !tracing()) return NO_CALL;
      let host = '';
      let port = 0;
      let broker: string | null = null;
      try {
        const parsed = new URL(info.url);
        host = parsed.hostname;
        port = Number(parsed.port) || (DEFAULT_PORTS[parsed.protocol] ?? 80);
        // A destination beyond HTTP publishes to a broker: a messaging span, not an HTTP one.
        if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') broker = parsed.protocol.slice(0, -1);
      } catch {
        // A URL that does not parse is refused by the transport; the span says so.
      }
      const span = tracer.startSpan(
        broker === null ? 'POST' : 'publish',
        {
          kind: broker === null ? SpanKind.CLIENT : SpanKind.PRODUCER,
          attributes: {
            ...(broker === null
              ? { 'http.request.method': 'POST' }
              : { 'messaging.system': broker, 'messaging.operation.type': 'send' }),
            'url.full': redactedUrl(info.url),
            'server.address': host,
            'server.port': port,
            'customer_portal.webhook.id': info.webhookId,
            'customer_portal.delivery.id': info.deliveryId,
            'customer_portal.delivery.attempt': info.attempt,
            'customer_portal.event.type': info.eventType,
            ...(info.attempt > 1 ? { 'http.request.resend_count': info.attempt - 1 } : {}),
          },
        },
        context.active(),
      );
      return {
        end(outcome, statusCode, error, durationMs) {
          if (statusCode !== null) span.setAttribute('http.response.status_code', statusCode);
          if (outcome !== 'success') {
            const type = statusCode !== null ? String(statusCode) : outcome;
            span.setAttribute('error.type', type);
            span.setStatus({ code: SpanStatusCode.ERROR, ...(error === null ? {} : { message: error }) });
          }
          // By outcome only: the receiver's host is the tenant's to choose, so as a label it would let
          // one account make series without bound; it is on the span.
          callDuration.record(durationMs / 1000, { outcome });
          span.end();
        },
      };
    },
    delivery(outcome) {
      deliveries.add(1, { outcome });
    },
    limited(limit) {
      limitedCalls.add(1, { limit });
    },
    removed(kind, count) {
      if (count > 0) removals.add(count, { kind });
    },
    observeQueue(read) {
      const observe: Otel.BatchObservableCallback = async (result) => {
        const queue = await read().catch(() => null);
        if (queue === null) return;
        result.observe(depth, queue.waiting);
        result.observe(oldest, queue.lagMs / 1000);
      };
      meter.addBatchObservableCallback(observe, [depth, oldest]);
      return () => meter.removeBatchObservableCallback(observe, [depth, oldest]);
    },
  };
}

let imported: Promise<typeof Otel | null> | undefined;

/**
 * A portal's telemetry: on when `@opentelemetry/api` can be imported (once a process), a no-op
 * otherwise. Its instruments are made here, from the meter provider registered now: the API has no
 * stand-in for a meter provider registered later, so the host registers its SDK before `createPortal`.
 */
export async function loadTelemetry(): Promise<Telemetry> {
  imported ??= import('@opentelemetry/api').then(
    (api) => api,
    () => null,
  );
  const api = await imported;
  return api === null ? noTelemetry : telemetryOf(api);
}
