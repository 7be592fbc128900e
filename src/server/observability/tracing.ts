import {
  context as otelContext,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
  type TextMapGetter,
  type Tracer,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";

/**
 * Tracing (docs/operations.md, "Tracing"): a W3C `traceparent` sent by a runtime continues through
 * contextd into the engine call and the engine's HostService callbacks. With
 * `tracing.otlp_endpoint` set, contextd records a span per RPC and per engine call and exports them
 * over OTLP/HTTP; without it nothing is recorded or exported (the tracer is OpenTelemetry's no-op),
 * and an incoming `traceparent` is still handed on to engines unchanged, so a trace stays connected
 * across contextd.
 *
 * The provider is not registered globally: contextd is a library too (tests run several servers in
 * one process), so each server owns its tracer.
 */
export interface TracingSettings {
  otlpEndpoint?: string;
  serviceName: string;
}

export interface Tracing {
  readonly enabled: boolean;
  readonly tracer: Tracer;
  /** The trace context a call's metadata carries (W3C traceparent / tracestate). */
  extract(carrier: Record<string, string | undefined>): Context;
  /** `traceparent` / `tracestate` for an outgoing call made under `ctx`. */
  inject(ctx: Context): Record<string, string>;
  shutdown(): Promise<void>;
}

const W3C = new W3CTraceContextPropagator();
const getter: TextMapGetter<Record<string, string | undefined>> = {
  keys: (c) => Object.keys(c),
  get: (c, k) => c[k],
};

export function createTracing(settings: TracingSettings): Tracing {
  if (!settings.otlpEndpoint) {
    return {
      enabled: false,
      tracer: trace.getTracer("contextd"),
      extract: () => ROOT_CONTEXT,
      inject: () => ({}),
      shutdown: async () => {},
    };
  }
  const url = settings.otlpEndpoint.replace(/\/+$/, "").endsWith("/v1/traces")
    ? settings.otlpEndpoint
    : `${settings.otlpEndpoint.replace(/\/+$/, "")}/v1/traces`;
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": settings.serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }), { scheduledDelayMillis: 500 })],
  });
  return {
    enabled: true,
    tracer: provider.getTracer("contextd"),
    extract: (carrier) => W3C.extract(ROOT_CONTEXT, carrier, getter),
    inject: (ctx) => {
      const out: Record<string, string> = {};
      W3C.inject(ctx, out, { set: (c, k, v) => (c[k] = v) });
      return out;
    },
    shutdown: () => provider.shutdown(),
  };
}

/** Runs `fn` in a span; the span records the error of a rejection and ends either way. */
export async function inSpan<T>(
  tracing: Tracing,
  parent: Context,
  name: string,
  kind: SpanKind,
  attributes: Record<string, string | number | boolean>,
  fn: (span: Span, ctx: Context) => Promise<T>,
): Promise<T> {
  const span = tracing.tracer.startSpan(name, { kind, attributes }, parent);
  const ctx = trace.setSpan(parent, span);
  try {
    return await otelContext.with(ctx, () => fn(span, ctx));
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
    throw err;
  } finally {
    span.end();
  }
}

export { propagation, SpanKind };
