/**
 * An engine's instances as an operator sees them (docs/operations.md, "Engine instances"): three
 * TypeScript sidecar processes registered as instances of one engine id at a real contextd, one of
 * them local to it. Shown through the real surfaces: `contextctl engines` (a row per instance under
 * its engine), `contextctl isolate --instance` / `release --instance` / `deregister --instance`, the
 * per-instance Prometheus series scraped from `metrics_listen` (the failover counter, the degraded
 * gauge), and `engines.max_instances` refusing a fourth instance, which the SDK retries until an
 * instance is removed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Refusal } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { contextctl, tableRows } from "../cli/run-contextctl.js";
import { codingSession } from "../fixtures/coding-session.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { eventually, registryClient } from "../helpers/registry-client.js";
import { parsePrometheus, type Sample } from "../observability/prometheus-text.js";

const ENGINE = "seen";
const CONFIG = {
  slots: { context_engine: ENGINE },
  engines: {
    max_instances: 3,
    locality: { replica: "replica-1" },
    timeouts: { assemble: "2s" },
    health: { interval: "200ms", timeout: "150ms", unhealthy_threshold: 2 },
    // Long: an instance ejected by a failure stays out while the test looks at it.
    quarantine: { base_ejection: "10m", max_ejection: "10m" },
  },
};

describe("an engine's instances, seen by an operator", () => {
  let contextd: ContextdProcess;
  let engines: EngineProcess[] = [];
  let extra: EngineProcess | undefined;
  let cx: ContextdClient;
  let registry: ReturnType<typeof registryClient>;
  const session = { sessionId: "seen-1" };
  const [local, second, third] = ["seen-a", "seen-b", "seen-c"];
  const scrape = async (): Promise<Sample[]> => parsePrometheus(await (await fetch(`http://${contextd.metricsAddress}/metrics`)).text());
  const value = (samples: Sample[], name: string, labels: Record<string, string>) =>
    samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
  const assemble = () => cx.assemble({ session, tokenBudget: 100_000 });

  beforeAll(async () => {
    contextd = await startContextd({ config: CONFIG });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    registry = registryClient(contextd.address);
    await cx.appendMessages({ session, messages: codingSession({ turns: 4, seed: 9 }).messages });
    engines = await Promise.all(
      [local, second, third].map((id) =>
        startTsEngine({
          engineId: ENGINE,
          registry: contextd.address,
          owner: "team",
          env: { CONTEXTD_ENGINE_INSTANCE_ID: id, ...(id === local ? { CONTEXTD_ENGINE_REPLICA: "replica-1" } : {}) },
        }),
      ),
    );
    for (const e of engines) expect(await e.registered).toMatchObject({ ok: true });
  });
  afterAll(async () => {
    cx?.close();
    registry?.close();
    await Promise.all([...engines, ...(extra ? [extra] : [])].map((e) => e.stop().catch(() => undefined)));
    await contextd?.cleanup();
  });

  it("contextctl engines lists each instance under its engine: its id, where it runs, its endpoint, state and health", async () => {
    for (let i = 0; i < 6; i++) expect(await assemble()).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL });
    const run = await contextctl(contextd.address, "engines");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const rows = tableRows(run.stdout);
    const at = rows.findIndex((r) => r[0] === ENGINE);
    expect(rows[at]!.slice(0, 5)).toEqual([ENGINE, "team", "3 instances, 3 serving", "active", "SERVING"]);
    expect(rows.slice(at + 1, at + 4).map((r) => r.slice(0, 5))).toEqual([
      ["├ seen-a", "local", engines[0]!.address, "active", "SERVING"],
      ["├ seen-b", "-", engines[1]!.address, "active", "SERVING"],
      ["└ seen-c", "-", engines[2]!.address, "active", "SERVING"],
    ]);
    // The local instance took this replica's calls: its own counter says so.
    expect(Number(rows[at + 1]![5])).toBeGreaterThanOrEqual(6);
  });

  it("each instance has its own series, and a call one instance fails counts as a failover to another, not a fallback", async () => {
    engines[0]!.control({ assemble: "throw" });
    expect(await assemble()).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL, fallbackReason: "" });
    const samples = await scrape();
    expect(value(samples, "contextd_engine_failovers_total", { engine: ENGINE, operation: "assemble" })).toBe(1);
    expect(value(samples, "contextd_engine_fallbacks_total", { engine: ENGINE, operation: "assemble" })).toBeUndefined();
    expect(value(samples, "contextd_engine_instance_calls_total", { engine: ENGINE, instance: local })).toBeGreaterThanOrEqual(7);
    expect(value(samples, "contextd_engine_instance_failures_total", { engine: ENGINE, instance: local })).toBe(1);
    expect(value(samples, "contextd_engine_instance_quarantined", { engine: ENGINE, instance: local })).toBe(1);
    for (const id of [second, third]) {
      expect(value(samples, "contextd_engine_instance_quarantined", { engine: ENGINE, instance: id })).toBe(0);
      expect(value(samples, "contextd_engine_instance_health", { engine: ENGINE, instance: id })).toBe(1);
      expect(value(samples, "contextd_engine_instance_outstanding_calls", { engine: ENGINE, instance: id })).toBe(0);
    }
    expect(value(samples, "contextd_engine_instances", { engine: ENGINE, state: "serving" })).toBe(2);
    expect(value(samples, "contextd_engine_instances", { engine: ENGINE, state: "quarantined" })).toBe(1);
    // Two of three serve: not degraded; the engine as a whole is not quarantined.
    expect(value(samples, "contextd_engine_degraded", { engine: ENGINE })).toBe(0);
    expect(value(samples, "contextd_engine_quarantined", { engine: ENGINE })).toBe(0);
  });

  it("isolating one more instance by hand leaves one of three serving: the engine is degraded, still answers, and says so", async () => {
    const run = await contextctl(contextd.address, "isolate", ENGINE, "--instance", second, "--reason", "draining node");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(run.stdout).toMatch(/instance\s+seen-b/);
    expect(run.stdout).toMatch(/quarantine\s+manual: draining node/);
    expect(run.stdout).toMatch(/serving\s+1 of 3 instances/);
    for (let i = 0; i < 4; i++) expect(await assemble()).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL });
    const samples = await scrape();
    expect(value(samples, "contextd_engine_degraded", { engine: ENGINE })).toBe(1);
    expect(value(samples, "contextd_engine_instances", { engine: ENGINE, state: "serving" })).toBe(1);
    const rows = tableRows((await contextctl(contextd.address, "engines")).stdout);
    const at = rows.findIndex((r) => r[0] === ENGINE);
    expect(rows[at]![2]).toBe("3 instances, 1 serving");
    expect(rows[at + 2]!.slice(0, 4)).toEqual(["├ seen-b", "-", engines[1]!.address, "quarantined (manual: draining node)"]);
    expect(rows[at + 1]![3]).toMatch(/^quarantined until \d\d:\d\d:\d\d \(assemble: error: /);

    expect(await contextctl(contextd.address, "release", ENGINE, "--instance", second)).toMatchObject({ code: 0 });
    expect((await registry.get(ENGINE)).instances.find((i) => i.instanceId === second)?.quarantine).toBeUndefined();
    expect(value(await scrape(), "contextd_engine_degraded", { engine: ENGINE })).toBe(0);
  });

  it("a fourth instance is refused TOO_MANY_INSTANCES at engines.max_instances; the SDK retries, and it is admitted once a dead one is deregistered", async () => {
    const refused = await registry.register({ engineId: ENGINE, owner: "team", endpoint: "127.0.0.1:1", instanceId: "seen-x" });
    expect(refused).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_TOO_MANY_INSTANCES });
    expect(refused.message).toContain("engines.max_instances");
    // A registered instance is not new: its refresh passes the limit.
    expect(
      (await registry.register({ engineId: ENGINE, owner: "team", endpoint: engines[2]!.address, instanceId: third, allowSameOwnerRefresh: true })).ok,
    ).toBe(true);

    extra = await startTsEngine({ engineId: ENGINE, registry: contextd.address, owner: "team", env: { CONTEXTD_ENGINE_INSTANCE_ID: "seen-d" } });
    await contextd.waitForLog((l) => l.msg === "engine registration refused" && l.instanceId === "seen-d" && l.refusal === "REFUSAL_TOO_MANY_INSTANCES");
    expect((await registry.get(ENGINE)).instances.map((i) => i.instanceId)).toEqual([local, second, third]);

    // seen-c dies (its SDK cannot deregister it); the operator removes it.
    await engines[2]!.kill9();
    const run = await contextctl(contextd.address, "deregister", ENGINE, "--instance", third);
    expect(run).toMatchObject({ code: 0, stdout: `deregistered ${ENGINE} instance ${third}\n` });
    expect(await extra.registered).toMatchObject({ ok: true });
    await eventually(async () => JSON.stringify((await registry.get(ENGINE)).instances.map((i) => i.instanceId)) === JSON.stringify([local, second, "seen-d"]));
  });
});
