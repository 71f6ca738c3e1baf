/**
 * The portal server of `portal.ts` with the OpenTelemetry SDK registered as a host would: every
 * span recorded and batched to an exporter (one that drops them, so no I/O is measured), the
 * AsyncLocalStorage context manager, W3C propagation, and a meter provider whose reader collects
 * every 10 s (the telemetry scenario's "with the SDK").
 */
import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import {
  InMemoryMetricExporter,
  AggregationTemporality,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';

const dropping: SpanExporter = {
  export: (_spans: ReadableSpan[], done: (result: ExportResult) => void) => done({ code: 0 }),
  shutdown: async () => {},
};
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] }));
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
metrics.setGlobalMeterProvider(
  new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 10_000 })] }),
);
setInterval(() => exporter.reset(), 10_000).unref();
await import('./portal.js');
