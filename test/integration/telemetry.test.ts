import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { context, metrics, propagation, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { MeterProvider, MetricReader, type DataPoint, type Histogram } from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type MemoryResponse, memoryStorage, memoryTransport } from '../../adapters/memory/index.js';
import type { Storage } from '../../src/ports.js';
import { redactedUrl } from '../../src/shared/telemetry.js';
import { KEY_A, startPortal } from '../helpers/server.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { NEVER, waitFor } from '../helpers/webhooks.js';
import { hidingPackages } from '../helpers/missing-packages.js';

/** A reader the test collects from when it wants, as OpenTelemetry's own tests do. */
class TestReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

let spans = new InMemorySpanExporter();
let reader = new TestReader();
const contextManager = new AsyncLocalStorageContextManager().enable();

/** The SDK registered globally for one test, and every global taken back after it. */
async function withSdk(body: () => Promise<void>) {
  // A provider's shutdown shuts its exporter and reader for good: each test has its own.
  spans = new InMemorySpanExporter();
  reader = new TestReader();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const meterProvider = new MeterProvider({ readers: [reader] });
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  try {
    await body();
  } finally {
    trace.disable();
    metrics.disable();
    context.disable();
    propagation.disable();
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
  }
}

/** Every data point of the metric `name` in the reader's next collection. */
async function points(name: string): Promise<DataPoint<unknown>[]> {
  const { resourceMetrics } = await reader.collect();
  return resourceMetrics.scopeMetrics.flatMap((scope) =>
    scope.metrics
      .filter((metric) => metric.descriptor.name === name)
      .flatMap((metric) => metric.dataPoints as DataPoint<unknown>[]),
  );
}

const finished = () => spans.getFinishedSpans();
const byName = (name: string) => finished().filter((span) => span.name === name);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

test("a server span per request: the route template, the caller's trace as parent, the status; never a key or a signature", () =>
  withSdk(async () => {
    const app = await startPortal({ signingKeys: [SIGNING_KEY_1], webhooks: { worker: false } });
    try {
      const created = await app.api('/webhooks', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'customer-created', url: 'https://hooks.example/in' }),
      });
      const hook = (await created.json()) as { id: string; secret: string };
      const traceId = '0af7651916cd43dd8448eb211c80319c';
      const callerSpan = 'b7ad6b7169203331';
      const read = await app.api(`/webhooks/${hook.id}`, {
        headers: { traceparent: `00-${traceId}-${callerSpan}-01` },
      });
      assert.is(read.status, 200);
      await read.arrayBuffer();
      const attachment = await app.portal.tickets.putAttachment('acct_a', {
        name: 'a.txt',
        mime: 'text/plain',
        body: 'bytes',
      });
      const link = await app.portal.tickets.downloadLink(
        'acct_a',
        { ...attachment, attachmentId: attachment.id },
        `${app.url}/v1`,
      );
      const signature = new URL(link.link).searchParams.get('signature')!;
      assert.is((await fetch(link.link)).status, 200);
      assert.is((await app.api('/nowhere')).status, 404);
      // A server span ends with its response's 'close', which may come after the client has the answer.
      await waitFor(
        () =>
          byName('GET /v1/webhooks/:webhookId').length > 0 &&
          byName('GET /v1/downloads/:id').length > 0 &&
          byName('GET').length > 0,
        'the three server spans to end',
      );

      const [span] = byName('GET /v1/webhooks/:webhookId');
      assert.ok(
        span,
        `a span named by the route; got ${finished()
          .map((s) => s.name)
          .join(', ')}`,
      );
      assert.is(span!.kind, SpanKind.SERVER);
      assert.is(span!.spanContext().traceId, traceId, "in the caller's trace");
      assert.is(parentOf(span!), callerSpan);
      assert.equal(
        {
          method: span!.attributes['http.request.method'],
          route: span!.attributes['http.route'],
          path: span!.attributes['url.path'],
          status: span!.attributes['http.response.status_code'],
        },
        { method: 'GET', route: '/v1/webhooks/:webhookId', path: `/v1/webhooks/${hook.id}`, status: 200 },
      );
      const download = byName('GET /v1/downloads/:id')[0];
      assert.ok(download, 'the signed download route has its span');
      assert.not.match(String(download!.attributes['url.path']), 'signature');
      const unmatched = byName('GET').find((s) => s.attributes['url.path'] === '/v1/nowhere');
      assert.ok(unmatched, 'an unmatched path: a span named by its method alone');
      assert.is(unmatched!.attributes['http.route'], undefined);
      assert.is(unmatched!.attributes['http.response.status_code'], 404);
      const everything = JSON.stringify(finished().map((s) => s.attributes));
      for (const secret of [KEY_A, signature, hook.secret])
        assert.not.ok(everything.includes(secret), 'no secret in any span');

      const durations = await points('http.server.request.duration');
      const routed = durations.find(
        (point) =>
          point.attributes['http.route'] === '/v1/webhooks/:webhookId' &&
          point.attributes['http.request.method'] === 'GET',
      );
      assert.ok(routed, 'a duration by route');
      assert.is(routed!.attributes['http.response.status_code'], 200);
      assert.is((routed!.value as Histogram).count, 1);
    } finally {
      await app.close();
    }
  }));

test('spans made while a request is served are children of its span', () =>
  withSdk(async () => {
    const storage = memoryStorage();
    const tracer = trace.getTracer('a-database-driver');
    // A store whose reads make a span, as an instrumented driver does.
    const traced: Storage = {
      ...storage,
      listWebhooks: (accountId) =>
        tracer.startActiveSpan('SELECT webhooks', async (span) => {
          try {
            return await storage.listWebhooks(accountId);
          } finally {
            span.end();
          }
        }),
    };
    const app = await startPortal({ storage: traced, signingKeys: [SIGNING_KEY_1], webhooks: { worker: false } });
    try {
      assert.is((await app.api('/webhooks')).status, 200);
      await waitFor(() => byName('GET /v1/webhooks').length > 0, 'the server span to end');
      const [server] = byName('GET /v1/webhooks');
      const [driver] = byName('SELECT webhooks');
      assert.ok(server && driver);
      assert.is(parentOf(driver!), server!.spanContext().spanId);
    } finally {
      await app.close();
    }
  }));

test('a client span per webhook call, its URL without query values, status and attempt; call durations and delivery outcomes', () =>
  withSdk(async () => {
    let answer: MemoryResponse = 503;
    const transport = memoryTransport({ respond: () => answer });
    const app = await startPortal({ transport, signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } });
    try {
      const hook = await app.portal.webhooks.create('acct_a', {
        type: 'customer-created',
        url: 'https://hooks.example/in?token=receiver-secret-123',
      });
      await app.portal.events.publish('acct_a', 'customer-created', { customer: { id: 'cus_1' } });
      await app.portal.worker!.tick();
      const [delivery] = (await app.portal.webhooks.deliveries('acct_a', hook.id))!;
      answer = 200;
      await app.portal.webhooks.redeliver('acct_a', delivery!.id, hook.id);
      await app.portal.worker!.tick();

      const calls = byName('POST').filter((span) => span.kind === SpanKind.CLIENT);
      assert.is(calls.length, 2);
      const [failed, succeeded] = calls;
      assert.equal(
        [
          failed!.attributes['url.full'],
          failed!.attributes['http.response.status_code'],
          failed!.attributes['customer_portal.delivery.attempt'],
          failed!.attributes['error.type'],
        ],
        ['https://hooks.example/REDACTED', 503, 1, '503'],
      );
      assert.is(failed!.status.code, SpanStatusCode.ERROR);
      assert.equal(
        [
          succeeded!.attributes['http.response.status_code'],
          succeeded!.attributes['customer_portal.delivery.attempt'],
          succeeded!.attributes['http.request.resend_count'],
        ],
        [200, 2, 1],
      );
      assert.is(succeeded!.attributes['customer_portal.webhook.id'], hook.id);
      assert.is(succeeded!.attributes['server.address'], 'hooks.example');
      assert.not.match(JSON.stringify(calls.map((span) => span.attributes)), 'receiver-secret-123');

      // A receiver that asks to wait: the delivery is held, not retrying.
      answer = { statusCode: 429, headers: { 'retry-after': '30' } };
      await app.portal.events.publish('acct_a', 'customer-created', { customer: { id: 'cus_2' } });
      await app.portal.worker!.tick();

      const durations = await points('customer_portal.webhook.call.duration');
      const outcomes = Object.fromEntries(
        durations.map((point) => [String(point.attributes.outcome), (point.value as Histogram).count]),
      );
      assert.ok(
        durations.every((point) => Object.keys(point.attributes).join() === 'outcome'),
        'by outcome alone: no label a tenant chooses',
      );
      assert.equal(outcomes, { failure: 2, success: 1 });
      const deliveries = await points('customer_portal.deliveries');
      assert.equal(Object.fromEntries(deliveries.map((point) => [String(point.attributes.outcome), point.value])), {
        retrying: 1,
        delivered: 1,
        held: 1,
      });
    } finally {
      await app.close();
    }
  }));

test("calls a worker holds back beyond a webhook's calls in flight are counted, each once, by limit", () =>
  withSdk(async () => {
    let answer: MemoryResponse = 503;
    let slow: Promise<void> = Promise.resolve();
    const transport = memoryTransport({
      respond: async () => {
        await slow;
        return answer;
      },
    });
    const app = await startPortal({
      transport,
      signingKeys: [SIGNING_KEY_1],
      webhooks: { tick: NEVER, concurrencyPerAccount: 4, retrySchedule: [3600] },
    });
    try {
      const hook = await app.portal.webhooks.create('acct_a', {
        type: 'customer-created',
        url: 'https://hooks.example/in',
      });
      const publish = (n: number) =>
        app.portal.events.publish('acct_a', 'customer-created', { customer: { id: `cus_${n}` } });
      await publish(1);
      await app.portal.worker!.tick();
      // A 503 halves the account's share of 4 to 2.
      await waitFor(
        async () => (await app.portal.webhooks.health('acct_a', hook.id))!.inFlightLimit === 2,
        'the limit of 2 kept',
      );
      answer = 200;
      let release = () => {};
      slow = new Promise<void>((resolve) => {
        release = resolve;
      });
      for (const n of [2, 3, 4, 5]) await publish(n);
      const ticked = app.portal.worker!.tick();
      await new Promise((resolve) => setTimeout(resolve, 50));
      release();
      await ticked;
      const limited = await points('customer_portal.deliveries.limited');
      assert.equal(
        Object.fromEntries(limited.map((point) => [String(point.attributes.limit), point.value])),
        { 'in-flight': 2 },
        'four leased, two in flight, two held back',
      );
      assert.is(transport.calls.length, 5, 'every one called in the end');
    } finally {
      await app.close();
    }
  }));

test("the queue gauges: deliveries waiting and the age of the earliest, by the portal's clock; retention removals counted", () =>
  withSdk(async () => {
    let now = Date.parse('2026-11-26T10:00:00Z');
    const clock = () => new Date(now);
    const transport = memoryTransport({ respond: () => 200 });
    // Two portals on the same clock: one for the gauges, one for retention.
    const options = {
      clock,
      transport,
      signingKeys: [SIGNING_KEY_1],
      retention: { eventsMs: 60_000, deliveriesMs: 60_000 },
      webhooks: { tick: NEVER },
    };
    const app = await startPortal(options);
    try {
      await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://hooks.example/in' });
      await app.portal.worker!.stop();
      await app.portal.events.publish('acct_a', 'customer-created', { customer: { id: 'cus_1' } });
      now += 4_000;
      await app.portal.events.publish('acct_a', 'customer-created', { customer: { id: 'cus_2' } });
      now += 6_000;
      const [depth] = await points('customer_portal.webhook.queue.depth');
      const [age] = await points('customer_portal.webhook.queue.oldest_age');
      assert.equal([depth?.value, age?.value], [2, 10]);
    } finally {
      await app.close();
    }

    // Retention: two delivered calls, then a tick past their time removes them and their events.
    const second = await startPortal(options);
    try {
      await second.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://hooks.example/in' });
      for (const id of ['cus_1', 'cus_2'])
        await second.portal.events.publish('acct_a', 'customer-created', { customer: { id } });
      await second.portal.worker!.tick();
      now += 120_000;
      await second.portal.worker!.tick();
      const removed = await points('customer_portal.retention.removed');
      assert.equal(Object.fromEntries(removed.map((point) => [String(point.attributes.kind), point.value])), {
        deliveries: 2,
        events: 2,
      });
    } finally {
      await second.close();
    }
  }));

test('redactedUrl: the origin only, never the user info, the path or the query; a URL that does not parse named as such', () => {
  assert.is(
    redactedUrl('https://user:pw@hooks.example:8443/in?token=abc&token=def&x=1#frag'),
    'https://hooks.example:8443/REDACTED',
  );
  assert.is(
    redactedUrl('https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX'),
    'https://hooks.slack.com/REDACTED',
  );
  assert.is(redactedUrl('https://hooks.example'), 'https://hooks.example/');
  assert.is(
    redactedUrl('amqp://user:s3cret@broker.example:5672/vhost?exchange=x'),
    'amqp://broker.example:5672/REDACTED',
    "a broker's URL: its host, never its password",
  );
  assert.is(redactedUrl('not a url'), 'invalid');
});

/** `@opentelemetry/api` fails to resolve in the child, as where it is not installed. */
const CHILD = `${hidingPackages(['@opentelemetry/'])}
const { createPortal } = await import(${JSON.stringify(new URL('../../src/index.js', import.meta.url).href)});
const { loadTelemetry } = await import(${JSON.stringify(new URL('../../src/shared/telemetry.js', import.meta.url).href)});
const http = await import('node:http');
const portal = await createPortal({ auth: { apiKeys: ['key-of-the-child-0123'] }, signingKeys: ['a-signing-key-of-the-child-0123456789'] });
const server = http.createServer(portal.handler).listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const res = await fetch('http://127.0.0.1:' + server.address().port + '/v1/webhooks', { headers: { authorization: 'Bearer key-of-the-child-0123' } });
const ready = await portal.ready();
server.close();
await portal.close();
console.log(JSON.stringify({ status: res.status, enabled: (await loadTelemetry()).enabled, ready: ready.ok }));
`;

test('without @opentelemetry/api installed the portal serves as ever, telemetry off, and nothing is said', async () => {
  const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', CHILD], {
    cwd: fileURLToPath(new URL('../../..', import.meta.url)),
  });
  assert.equal(JSON.parse(stdout.trim().split('\n').at(-1)!), { status: 200, enabled: false, ready: true });
  assert.not.match(stderr, /opentelemetry/i);
});

test.run();
