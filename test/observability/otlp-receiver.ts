/**
 * A stand-in for an OpenTelemetry collector (a service we do not ship): an HTTP server on a random
 * loopback port that speaks OTLP/HTTP with JSON (`POST /v1/traces`, ExportTraceServiceRequest) and
 * keeps every span it receives.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean>;
  status?: { code?: number; message?: string };
  service: string;
}

export interface OtlpReceiver {
  endpoint: string;
  spans(): ReceivedSpan[];
  /** Resolves once a span matching `pred` has arrived. */
  waitForSpan(pred: (s: ReceivedSpan) => boolean, timeoutMs?: number): Promise<ReceivedSpan>;
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };

function value(v: AnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  return v.doubleValue ?? "";
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: ReceivedSpan[] = [];
  const waiters = new Set<{ pred: (s: ReceivedSpan) => boolean; resolve: (s: ReceivedSpan) => void }>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST" || !req.url?.startsWith("/v1/traces")) {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        resourceSpans?: { resource?: { attributes?: { key: string; value: AnyValue }[] }; scopeSpans?: { spans?: Record<string, unknown>[] }[] }[];
      };
      for (const rs of body.resourceSpans ?? []) {
        const service = String(value(rs.resource?.attributes?.find((a) => a.key === "service.name")?.value ?? {}));
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            const span: ReceivedSpan = {
              traceId: String(s.traceId ?? ""),
              spanId: String(s.spanId ?? ""),
              parentSpanId: String(s.parentSpanId ?? ""),
              name: String(s.name ?? ""),
              kind: Number(s.kind ?? 0),
              attributes: Object.fromEntries(((s.attributes ?? []) as { key: string; value: AnyValue }[]).map((a) => [a.key, value(a.value)])),
              status: s.status as ReceivedSpan["status"],
              service,
            };
            received.push(span);
            for (const w of [...waiters]) if (w.pred(span)) (waiters.delete(w), w.resolve(span));
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans: () => [...received],
    waitForSpan: (pred, timeoutMs = 15_000) => {
      const hit = received.find(pred);
      if (hit) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const w = { pred, resolve: (s: ReceivedSpan) => (clearTimeout(timer), resolve(s)) };
        const timer = setTimeout(
          () => (waiters.delete(w), reject(new Error(`no such span within ${timeoutMs} ms; got: ${received.map((s) => s.name).join(", ")}`))),
          timeoutMs,
        );
        waiters.add(w);
      });
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
