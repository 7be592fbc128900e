import { Metadata, ServerInterceptingCall, status, type ServerInterceptor, type ServerMethodDefinition, type StatusObject } from "@grpc/grpc-js";
import { SpanStatusCode, trace } from "@opentelemetry/api";
import type { Logger } from "pino";
import { Mode } from "../../contract/gen/contextd/v1/types.js";
import { REQUEST_ID_KEY, metadataValue, nextRequestId } from "../../contract/metadata.js";
import { LogBudget } from "../observability/log-budget.js";
import type { ContextdMetrics } from "../observability/metrics.js";
import { SpanKind, type Tracing } from "../observability/tracing.js";
import { loadShedding, type LoadSheddingDeps } from "./load-shedding.js";
import { tenantAdmission, type TenantAdmissionDeps } from "./tenant-admission.js";
import type { CallStep, MethodInfo, Refusal, Step } from "./step.js";

/**
 * The server's middleware chain around every RPC of every service — contextd's three and the
 * standard health and reflection services — as composable steps, each one concept, run in order:
 *
 * 1. request id: the caller's `x-request-id`, else a new one, written into the call's metadata so
 *    that everything after (logs, handlers, engine calls) sees the same id;
 * 2. tracing: a server span continuing the caller's W3C `traceparent`; the call's metadata then
 *    carries the span's own context, so what the handler calls (engines) are its children, and the
 *    answer's engine id, mode and fallback reason become attributes. Not in the chain without
 *    `tracing.otlp_endpoint`;
 * 3. metrics and access log: `grpc_server_handled_total` / `grpc_server_handling_seconds` by
 *    service, method and code, and one log line per call (debug when OK, info when refused — at most
 *    10 a second per method and code, the rest counted in the next line: log-budget.ts);
 * 4. load shedding: over `server.max_concurrent_calls` calls in flight, RESOURCE_EXHAUSTED without
 *    running the handler (load-shedding.ts). After the steps above, so that a shed call is still
 *    counted, logged and traced;
 * 5. tenant admission: over its token's calls in flight (or WatchEngines streams), the same
 *    (tenant-admission.ts).
 *
 * A step refuses a call when its metadata arrives: the call stops counting at once, and is answered
 * when its request message has been read (see `chain`).
 *
 * The steps share one grpc-js server interceptor: an interceptor per step costs a call object and
 * its listeners per step and per call, which measured as several percent of an Assemble
 * (bench/scenarios/observability_overhead.ts). Authorization, the AbortSignal and the error →
 * status mapping follow in bind-service.ts, where the decoded request and the typed handler are.
 */
export function serverInterceptors(deps: {
  logger: Logger;
  metrics: ContextdMetrics;
  tracing: Tracing;
  shedding?: LoadSheddingDeps;
  tenants?: TenantAdmissionDeps;
}): ServerInterceptor[] {
  const steps: Step[] = [requestId()];
  if (deps.tracing.enabled) steps.push(tracing(deps.tracing));
  steps.push(metricsAndAccessLog(deps.metrics, deps.logger));
  if (deps.shedding) steps.push(loadShedding(deps.shedding));
  if (deps.tenants) steps.push(tenantAdmission(deps.tenants));
  return [chain(steps)];
}

/** The steps as one interceptor; the method's names are worked out once per method, not per call. */
export function chain(steps: Step[]): ServerInterceptor {
  const methods = new Map<string, MethodInfo>();
  return (method: ServerMethodDefinition<unknown, unknown>, call) => {
    let info = methods.get(method.path);
    if (!info) methods.set(method.path, (info = methodInfo(method)));
    const m = info;
    const active = steps.map((s) => s(m));
    let ended = false;
    let refused: Refusal | undefined;
    const end = (s: Pick<StatusObject, "code" | "details">) => {
      if (ended) return;
      ended = true;
      for (const a of active) a.end?.(s);
    };
    return new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (md: Metadata, mdNext: (m: Metadata) => void) => {
            for (const a of active) {
              refused = a.metadata?.(md) ?? undefined;
              if (refused) {
                // Counted as ended now (the steps after this one never see the call), and answered
                // once its request has arrived (onReceiveMessage). Answering before would leave the
                // request's bytes unread: HTTP/2 flow control counts them against the whole
                // connection, and a client sending large requests into refusals then stalled every
                // call on its connection, the admitted ones included.
                end(refused);
                break;
              }
            }
            mdNext(md);
          },
          onReceiveMessage: (message: unknown, messageNext: (m: unknown) => void) => {
            // Not passed on: the handler never runs.
            // Each answer gets its own copy: grpc-js may add to the trailers it sends.
            if (refused) call.sendStatus({ code: refused.code, details: refused.details, metadata: refused.metadata?.clone() ?? new Metadata() });
            else messageNext(message);
          },
          onCancel: () => end({ code: status.CANCELLED, details: "cancelled by the caller" }),
        }),
      sendMessage: (message: unknown, next: (m: unknown) => void) => {
        for (const a of active) a.message?.(message);
        next(message);
      },
      sendStatus: (s, next) => {
        end(s);
        next(s);
      },
    });
  };
}

function methodInfo(method: ServerMethodDefinition<unknown, unknown>): MethodInfo {
  const path = method.path;
  const type = method.requestStream ? (method.responseStream ? "bidi_stream" : "client_stream") : method.responseStream ? "server_stream" : "unary";
  return { path, service: path.slice(1, path.lastIndexOf("/")), name: path.slice(path.lastIndexOf("/") + 1), type };
}

export function requestId(): Step {
  const step: CallStep = {
    metadata(md) {
      if (!metadataValue(md, REQUEST_ID_KEY)) md.set(REQUEST_ID_KEY, nextRequestId());
    },
  };
  return () => step;
}

const MODE_NAMES: Record<number, string> = { [Mode.MODE_NORMAL]: "NORMAL", [Mode.MODE_FALLBACK]: "FALLBACK", [Mode.MODE_DEGRADED]: "DEGRADED" };

export function tracing(t: Tracing): Step {
  return (m) => {
    let span: ReturnType<Tracing["tracer"]["startSpan"]> | undefined;
    return {
      metadata(md) {
        const parent = t.extract({ traceparent: metadataValue(md, "traceparent") || undefined, tracestate: metadataValue(md, "tracestate") || undefined });
        span = t.tracer.startSpan(
          `${m.service}/${m.name}`,
          {
            kind: SpanKind.SERVER,
            attributes: { "rpc.system": "grpc", "rpc.service": m.service, "rpc.method": m.name, "contextd.request_id": metadataValue(md, REQUEST_ID_KEY) },
          },
          parent,
        );
        // The handler continues from this span: engine calls become its children.
        for (const [k, v] of Object.entries(t.inject(trace.setSpan(parent, span)))) md.set(k, v);
      },
      // Which engine served the call and how (SessionService answers say so).
      message(message) {
        const a = message as { engineId?: unknown; mode?: unknown; fallbackReason?: unknown } | null;
        if (!span || !a || typeof a !== "object") return;
        if (typeof a.engineId === "string" && a.engineId) span.setAttribute("contextd.engine_id", a.engineId);
        if (typeof a.mode === "number" && a.mode) span.setAttribute("contextd.mode", MODE_NAMES[a.mode] ?? String(a.mode));
        if (typeof a.fallbackReason === "string" && a.fallbackReason) span.setAttribute("contextd.fallback_reason", a.fallbackReason);
      },
      end(s) {
        if (!span) return;
        span.setAttribute("rpc.grpc.status_code", s.code);
        if (s.code !== status.OK) span.setStatus({ code: SpanStatusCode.ERROR, message: s.details });
        span.end();
      },
    };
  };
}

export function metricsAndAccessLog(metrics: ContextdMetrics, logger: Logger): Step {
  // Per method: the handling-time child, and the handled-counter child of each code seen.
  const perMethod = new Map<string, { handling: { observe(v: number): void }; handled: Map<number, { inc(): void }> }>();
  const refusedLines = new LogBudget();
  return (m) => {
    let slot = perMethod.get(m.path);
    if (!slot) {
      slot = { handling: metrics.grpcHandling.labels({ grpc_type: m.type, grpc_service: m.service, grpc_method: m.name }), handled: new Map() };
      perMethod.set(m.path, slot);
    }
    const s = slot;
    const started = performance.now();
    let id = "";
    return {
      metadata(md) {
        id = metadataValue(md, REQUEST_ID_KEY);
      },
      end({ code, details }) {
        const seconds = (performance.now() - started) / 1000;
        let handled = s.handled.get(code);
        if (!handled)
          s.handled.set(
            code,
            (handled = metrics.grpcHandled.labels({
              grpc_type: m.type,
              grpc_service: m.service,
              grpc_method: m.name,
              grpc_code: status[code] ?? String(code),
            })),
          );
        handled.inc();
        s.handling.observe(seconds);
        if (code === status.OK) {
          if (logger.isLevelEnabled("debug")) logger.debug({ requestId: id, service: m.service, method: m.name, ms: Math.round(seconds * 1000) }, "ok");
        } else {
          const { log, suppressed } = refusedLines.take(`${m.path} ${code}`);
          if (log)
            logger.info(
              {
                requestId: id,
                service: m.service,
                method: m.name,
                code: status[code],
                reason: details,
                ms: Math.round(seconds * 1000),
                ...(suppressed ? { suppressed } : {}),
              },
              code === status.CANCELLED ? "call cancelled" : "request refused",
            );
        }
      },
    };
  };
}
