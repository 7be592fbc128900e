/**
 * failover, in two phases, each on a fresh contextd with a short health interval (500 ms, 250 ms
 * timeout, 2 failures) — though with traffic flowing, the failed calls themselves quarantine first —
 * under a steady, paced Assemble load (200 calls/s, open loop: a call is due every 5 ms whether or
 * not earlier ones have answered, and its latency counts from when it was due).
 *
 * Phase 1, one sidecar: the session is served by the pass-through sidecar; mid-run it is SIGKILLed
 * and `legacy` answers from then on. Reported: failed_requests (calls that got an error: the fallback
 * to legacy should make this 0); ms_to_quarantine = from the moment the bench sends SIGKILL to the
 * first RegistryService.GetEngine answer that shows the engine quarantined (polled every 10 ms on
 * its own channel, so it includes up to ~10 ms of polling granularity); ms_to_first_fallback = from
 * the SIGKILL to the first Assemble answer received with mode FALLBACK; p99_ms_during_failover = p99
 * latency of the calls due in the 2 s after the kill.
 *
 * Phase 2, instances (`instance_*` keys): the pass-through sidecar runs as three instances of one
 * engine id (instance ids pt-1..3, their own endpoints, no locality, so the router balances them by
 * power of two choices); mid-run pt-2 is SIGKILLed. Reported: instance_balance_ratio = busiest /
 * least busy instance by contextd's own count (GetEngine → instances[].calls) of the calls made from
 * the start of the load to the kill (instance_calls_steady has the counts); instance_failover_fallbacks
 * = answers received after the kill with mode FALLBACK or from another engine (an Assemble the
 * killed instance failed goes to a sibling first, so this should be 0); instance_failed_requests =
 * calls of the phase that got an error; instance_ms_to_quarantine = SIGKILL → first GetEngine answer
 * showing pt-2 quarantined (10 ms polling); instance_p99_ms_during_failover over the 2 s after it.
 */
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import type { EngineStatus } from "../../src/contract/gen/contextd/v1/registry.js";
import { registryClient, sessionClient } from "../harness/clients.js";
import { startContextd } from "../harness/contextd.js";
import { startBenchEngine, type EngineHandle } from "../harness/engines.js";
import { openLoop, type PacedCall } from "../harness/interleave.js";
import { codingMessages } from "../harness/messages.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { nowMs, percentile, round } from "../harness/stats.js";

const RATE = 200;
const BUDGET = 32_000;
const WINDOW_MS = 2_000;
const ENGINE = "passthrough";

/** Phase 1: one sidecar, SIGKILLed mid-run; `legacy` answers after it. */
async function oneSidecar(ctx: ScenarioContext): Promise<ScenarioResult> {
  const durationMs = ctx.quick ? 5_000 : 12_000;
  const killAtMs = ctx.quick ? 2_000 : 5_000;
  ctx.progress.update(0, durationMs, "starting contextd and the pass-through engine");
  const cd = await startContextd({
    config: {
      slots: { context_engine: "passthrough" },
      engines: { health: { interval: "500ms", timeout: "250ms", unhealthy_threshold: 2 } },
    },
  });
  const engine = await startBenchEngine("passthrough", cd.address, "passthrough");
  const client = sessionClient(cd.address);
  const registry = registryClient(cd.address);
  try {
    const session = { sessionId: "failover-1", agentId: "bench" };
    await client.appendMessages({ session, messages: codingMessages({ count: 20, seed: 7 }) });
    const warm = await client.assemble({ session, tokenBudget: BUDGET });
    if (warm.engineId !== "passthrough") throw new Error(`contextd answered from ${warm.engineId}, not the pass-through engine`);
    for (let i = 0; i < 200; i++) await client.assemble({ session, tokenBudget: BUDGET });

    let killedAt = Number.NaN;
    let quarantinedAt = Number.NaN;
    let quarantineReason = "";
    let polling: Promise<void> | undefined;
    const t0 = nowMs();
    const calls: PacedCall[] = await openLoop(
      () => client.assemble({ session, tokenBudget: BUDGET }, { timeoutMs: 10_000 }).then((a) => ({ mode: a.mode, engineId: a.engineId, at: nowMs() - t0 })),
      RATE,
      durationMs,
      (elapsed) => {
        ctx.progress.update(Math.round(elapsed), durationMs, Number.isNaN(killedAt) ? "steady load" : "after the kill");
        if (Number.isNaN(killedAt) && elapsed >= killAtMs) {
          killedAt = nowMs() - t0;
          engine.child.kill("SIGKILL");
          polling = (async () => {
            while (Number.isNaN(quarantinedAt) && nowMs() - t0 < durationMs + 5_000) {
              const e = await registry.getEngine("passthrough").catch(() => undefined);
              if (e?.quarantine) {
                quarantinedAt = nowMs() - t0;
                quarantineReason = `${e.quarantine.operation}: ${e.quarantine.reason}`;
                break;
              }
              await new Promise((r) => setTimeout(r, 10));
            }
          })();
        }
      },
    );
    await polling;

    type Answer = { mode: Mode; engineId: string; at: number };
    const answers = calls.filter((c) => c.ok).map((c) => c.value as Answer);
    const failed = calls.filter((c) => !c.ok);
    const firstFallback = Math.min(...answers.filter((a) => a.mode === Mode.MODE_FALLBACK).map((a) => a.at));
    const lat = (from: number, to: number) => calls.filter((c) => c.dueMs >= from && c.dueMs < to).map((c) => c.latencyMs);
    const before = lat(0, killedAt);
    const during = lat(killedAt, killedAt + WINDOW_MS);
    const after = lat(killedAt + WINDOW_MS, durationMs);
    const modes = { normal: 0, fallback: 0, other: 0 };
    for (const a of answers) {
      if (a.mode === Mode.MODE_NORMAL) modes.normal++;
      else if (a.mode === Mode.MODE_FALLBACK) modes.fallback++;
      else modes.other++;
    }
    const sentLate = calls.filter((c) => c.sentMs - c.dueMs > 5).length;
    return {
      metrics: {
        failed_requests: failed.length,
        ms_to_quarantine: round(quarantinedAt - killedAt, 1),
        ms_to_quarantine_definition: "SIGKILL sent → first RegistryService.GetEngine answer showing the quarantine (polled every 10 ms)",
        ms_to_first_fallback: round(firstFallback - killedAt, 1),
        p99_ms_during_failover: round(percentile(during, 99), 2),
        p99_ms_before_kill: round(percentile(before, 99), 2),
        p99_ms_after_failover: round(percentile(after, 99), 2),
        p50_ms_before_kill: round(percentile(before, 50), 2),
        calls: calls.length,
        answers_by_mode: modes,
        quarantine_reason: quarantineReason,
        calls_sent_over_5ms_late: sentLate,
        errors_sample: [...new Set(failed.map((f) => f.error))].slice(0, 3),
      },
      goals: [{ key: "failed_requests", op: "==", target: 0 }],
      headline: ["ms_to_quarantine", "ms_to_first_fallback", "p99_ms_during_failover", "p99_ms_before_kill"],
      notes: [
        `${RATE} Assemble calls/s for ${durationMs / 1000} s, SIGKILL of the sidecar at ${killAtMs / 1000} s; "during failover" = calls due in the ${WINDOW_MS / 1000} s after the kill`,
        "ms_to_quarantine: from the SIGKILL to the first GetEngine answer that shows the quarantine (10 ms polling); ms_to_first_fallback: to the first FALLBACK answer received",
        `quarantine reason: ${quarantineReason || "(not seen)"}`,
        ...(sentLate
          ? [
              `${sentLate} calls were sent more than 5 ms after they were due (the bench process itself was late; their latency still counts from when they were due)`,
            ]
          : []),
      ],
    };
  } finally {
    client.close();
    registry.close();
    engine.child.kill("SIGKILL");
    await cd.stop();
  }
}

const INSTANCES = ["pt-1", "pt-2", "pt-3"];
/** The instance SIGKILLed in phase 2. */
const VICTIM = INSTANCES[1];

type InstanceCounts = Record<string, number>;

/** Calls contextd made to each instance of `engine` (EngineInstance.calls), by instance id. */
function instanceCalls(engine: EngineStatus | undefined): InstanceCounts {
  return Object.fromEntries((engine?.instances ?? []).map((i) => [i.instanceId, i.calls]));
}

/** The quarantined instances of `engine`: instance id → "operation: reason". */
function quarantines(engine: EngineStatus | undefined): Record<string, string> {
  return Object.fromEntries(
    (engine?.instances ?? []).flatMap((i) => (i.quarantine ? [[i.instanceId, `${i.quarantine.operation}: ${i.quarantine.reason}`]] : [])),
  );
}

function delta(to: InstanceCounts, from: InstanceCounts, ids: readonly string[]): InstanceCounts {
  return Object.fromEntries(ids.map((id) => [id, (to[id] ?? 0) - (from[id] ?? 0)]));
}

/**
 * Phase 2: the same load on a fresh contextd, the pass-through sidecar running as three instances
 * of one engine id (no locality: the router balances them by power of two choices); contextd's own
 * per-instance call counts over the steady window, then one instance SIGKILLed: its siblings should
 * answer every call (failover before fallback), `legacy` none.
 */
async function threeInstances(ctx: ScenarioContext): Promise<ScenarioResult> {
  const durationMs = ctx.quick ? 4_000 : 10_000;
  const killAtMs = ctx.quick ? 2_000 : 5_000;
  ctx.progress.update(0, durationMs, "instances: starting contextd and three pass-through instances");
  const cd = await startContextd({
    config: {
      slots: { context_engine: ENGINE },
      engines: { health: { interval: "500ms", timeout: "250ms", unhealthy_threshold: 2 } },
    },
  });
  const engines: EngineHandle[] = [];
  const client = sessionClient(cd.address);
  const registry = registryClient(cd.address);
  try {
    await Promise.all(INSTANCES.map(async (instanceId) => engines.push(await startBenchEngine("passthrough", cd.address, ENGINE, { instanceId }))));
    const victim = engines.find((e) => e.instanceId === VICTIM)!;
    const registered = (await registry.getEngine(ENGINE))?.instances ?? [];
    const listed = registered.map((i) => i.instanceId).sort();
    if (listed.join() !== INSTANCES.join()) throw new Error(`the registry lists instances [${listed.join(", ")}], not [${INSTANCES.join(", ")}]`);
    // None is local to contextd: the router must choose by power of two choices, not locality.
    const local = registered.filter((i) => i.local).map((i) => i.instanceId);
    if (local.length) throw new Error(`instances ${local.join(", ")} are local to contextd: the router would not balance by load`);

    const session = { sessionId: "failover-instances-1", agentId: "bench" };
    await client.appendMessages({ session, messages: codingMessages({ count: 20, seed: 7 }) });
    for (let i = 0; i < 150; i++) {
      const a = await client.assemble({ session, tokenBudget: BUDGET });
      if (a.engineId !== ENGINE || a.mode !== Mode.MODE_NORMAL)
        throw new Error(`contextd answered from ${a.engineId} (mode ${a.mode}), not the pass-through instances`);
    }

    const atStart = instanceCalls(await registry.getEngine(ENGINE));
    let atKill: InstanceCounts | undefined;
    /** Instances already quarantined when the steady window ended (then the balance is not the router's alone). */
    let quarantinedBeforeKill: Record<string, string> = {};
    let killing: Promise<void> | undefined;
    let killedAt = Number.NaN;
    let quarantinedAt = Number.NaN;
    let quarantineReason = "";
    const t0 = nowMs();
    const calls: PacedCall[] = await openLoop(
      () => client.assemble({ session, tokenBudget: BUDGET }, { timeoutMs: 10_000 }).then((a) => ({ mode: a.mode, engineId: a.engineId, at: nowMs() - t0 })),
      RATE,
      durationMs,
      (elapsed) => {
        ctx.progress.update(Math.round(elapsed), durationMs, Number.isNaN(killedAt) ? "instances: steady load" : "instances: after the kill");
        if (killing || elapsed < killAtMs) return;
        killing = (async () => {
          // The steady window ends here: contextd's counts, then the kill.
          const snapshot = await registry.getEngine(ENGINE);
          atKill = instanceCalls(snapshot);
          quarantinedBeforeKill = quarantines(snapshot);
          killedAt = nowMs() - t0;
          victim.child.kill("SIGKILL");
          while (Number.isNaN(quarantinedAt) && nowMs() - t0 < durationMs + 5_000) {
            const e = await registry.getEngine(ENGINE).catch(() => undefined);
            const q = e?.instances.find((i) => i.instanceId === VICTIM)?.quarantine;
            if (q) {
              quarantinedAt = nowMs() - t0;
              quarantineReason = `${q.operation}: ${q.reason}`;
              break;
            }
            await new Promise((r) => setTimeout(r, 10));
          }
        })();
      },
    );
    await killing;
    const final = await registry.getEngine(ENGINE);
    if (!atKill) throw new Error("the load ended before the kill");

    type Answer = { mode: Mode; engineId: string; at: number };
    const answers = calls.filter((c) => c.ok).map((c) => c.value as Answer);
    const failed = calls.filter((c) => !c.ok);
    const fromLegacy = (a: Answer) => a.mode === Mode.MODE_FALLBACK || a.engineId !== ENGINE;
    const fallbacksAfterKill = answers.filter((a) => a.at >= killedAt && fromLegacy(a)).length;
    const fallbacksBeforeKill = answers.filter((a) => a.at < killedAt && fromLegacy(a)).length;

    const steady = delta(atKill, atStart, INSTANCES);
    const steadyCounts = Object.values(steady);
    const busiest = Math.max(...steadyCounts);
    const leastBusy = Math.min(...steadyCounts);
    const survivors = INSTANCES.filter((id) => id !== VICTIM);
    const afterKill = delta(instanceCalls(final), atKill, survivors);
    const victimFailures = final?.instances.find((i) => i.instanceId === VICTIM)?.failures ?? null;
    const during = calls.filter((c) => c.dueMs >= killedAt && c.dueMs < killedAt + WINDOW_MS).map((c) => c.latencyMs);
    const before = calls.filter((c) => c.dueMs < killedAt).map((c) => c.latencyMs);
    const sentLate = calls.filter((c) => c.sentMs - c.dueMs > 5).length;
    const errorsSample = [...new Set(failed.map((f) => f.error))].slice(0, 3);
    return {
      metrics: {
        instance_failover_fallbacks: fallbacksAfterKill,
        instance_balance_ratio: leastBusy > 0 ? round(busiest / leastBusy, 3) : null,
        instance_balance_ratio_definition: `busiest / least busy of ${INSTANCES.length} instances by EngineInstance.calls (RegistryService.GetEngine) over the steady window before the kill`,
        instance_calls_steady: steady,
        instance_calls_after_kill: afterKill,
        instance_failed_requests: failed.length,
        instance_fallbacks_before_kill: fallbacksBeforeKill,
        instance_killed_instance_failures: victimFailures,
        instance_ms_to_quarantine: round(quarantinedAt - killedAt, 1),
        instance_p99_ms_before_kill: round(percentile(before, 99), 2),
        instance_p99_ms_during_failover: round(percentile(during, 99), 2),
        instance_calls: calls.length,
        instance_engine_fallbacks: final?.fallbacks ?? null,
        instance_engine_fallbacks_by_reason: final?.fallbacksByReason ?? {},
        instance_quarantined_before_kill: quarantinedBeforeKill,
        instance_quarantined_at_end: quarantines(final),
        instance_quarantine_reason: quarantineReason,
        instance_calls_sent_over_5ms_late: sentLate,
        instance_errors_sample: errorsSample,
      },
      goals: [
        { key: "instance_failover_fallbacks", op: "==", target: 0 },
        { key: "instance_balance_ratio", op: "<=", target: 1.5 },
      ],
      headline: ["instance_failed_requests", "instance_calls_steady", "instance_ms_to_quarantine", "instance_p99_ms_during_failover"],
      notes: [
        `instances: a fresh contextd, the pass-through sidecar as ${INSTANCES.length} instances of "${ENGINE}" (${INSTANCES.join(", ")}; no locality, so the router balances by power of two choices); ${RATE} Assemble calls/s for ${durationMs / 1000} s, SIGKILL of ${VICTIM} at ${killAtMs / 1000} s`,
        `instance_balance_ratio: contextd's calls per instance (EngineInstance.calls) from the start of the load to the kill: ${INSTANCES.map((id) => `${id} ${steady[id]}`).join(", ")}${leastBusy > 0 ? "" : " (an instance got no call: no ratio)"}`,
        `instance_failover_fallbacks: answers received after the kill with mode FALLBACK or from another engine; calls the killed instance failed (each sent on to a sibling, or answered by legacy): ${String(victimFailures)}; fallbacks contextd counted on the engine (EngineStatus.fallbacks): ${String(final?.fallbacks ?? null)}`,
        `instance quarantine: ${quarantineReason || "(not seen)"}`,
        ...(Object.keys(quarantinedBeforeKill).length
          ? [
              `instances: already quarantined before the kill (so the balance and the fallbacks are not the router's alone): ${Object.entries(
                quarantinedBeforeKill,
              )
                .map(([id, why]) => `${id} (${why})`)
                .join("; ")}`,
            ]
          : []),
        ...(failed.length ? [`instances: ${failed.length} calls failed: ${errorsSample.join("; ")}`] : []),
        ...(sentLate ? [`instances: ${sentLate} calls were sent more than 5 ms after they were due (the bench process itself was late)`] : []),
      ],
    };
  } finally {
    client.close();
    registry.close();
    for (const e of engines) e.child.kill("SIGKILL");
    await cd.stop();
  }
}

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
  const one = await oneSidecar(ctx);
  const three = await threeInstances(ctx);
  return {
    metrics: { ...one.metrics, ...three.metrics },
    goals: [...(one.goals ?? []), ...(three.goals ?? [])],
    headline: [...(one.headline ?? []), ...(three.headline ?? [])],
    notes: [...(one.notes ?? []), ...(three.notes ?? [])],
  };
}

export const failover: Scenario = {
  name: "failover",
  title:
    "200 Assemble calls/s on a sidecar that is SIGKILLed mid-run: failed calls, time to quarantine, p99 during failover; then on three instances of it, one SIGKILLed: balance, fallbacks",
  run,
};
