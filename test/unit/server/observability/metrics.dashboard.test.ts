/**
 * The documented queries, alert rules and the Grafana dashboard only name series contextd exports:
 * every `contextd_*` and `grpc_server_*` name in docs/operations.md and docs/grafana-dashboard.json
 * is a metric of ContextdMetrics (a histogram's _bucket/_sum/_count included).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ContextdMetrics } from "../../../../src/server/observability/metrics.js";

const DOCS = path.resolve(import.meta.dirname, "../../../../docs");

describe("docs/operations.md and the Grafana dashboard", () => {
  const metrics = new ContextdMetrics(async () => 0);
  const known = new Set(metrics.registry.getMetricsAsArray().map((m) => m.name));
  const base = (name: string) => name.replace(/_(bucket|sum|count)$/, "");
  const names = (text: string) => [...new Set([...text.matchAll(/\b(contextd_[a-z_]+|grpc_server_[a-z_]+)\b/g)].map((m) => m[1]))];

  it("name only exported series", () => {
    const dashboard = readFileSync(path.join(DOCS, "grafana-dashboard.json"), "utf8");
    const operations = readFileSync(path.join(DOCS, "operations.md"), "utf8");
    const used = [...names(dashboard), ...names(operations)];
    expect(used.length).toBeGreaterThan(10);
    for (const n of used) expect(known.has(base(n)) || known.has(n), n).toBe(true);
    // And the dashboard is a dashboard: panels with Prometheus targets.
    const d = JSON.parse(dashboard) as { panels: { targets: { expr: string }[] }[] };
    expect(d.panels.length).toBeGreaterThan(10);
    for (const p of d.panels) expect(p.targets.length).toBeGreaterThan(0);
  });
});
