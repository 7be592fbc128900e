/**
 * failover: a steady, paced Assemble load (200 calls/s, open loop: a call is due every 5 ms whether
 * or not earlier ones have answered, and its latency counts from when it was due) on a session
 * served by the pass-through sidecar; mid-run the sidecar is SIGKILLed. contextd runs with a short
 * health interval (500 ms, 250 ms timeout, 2 failures) — though with traffic flowing, the failed
 * calls themselves quarantine the engine first.
 *
 * Reported: failed_requests (calls that got an error: the fallback to legacy should make this 0);
 * ms_to_quarantine = from the moment the bench sends SIGKILL to the first RegistryService.GetEngine
 * answer that shows the engine quarantined (polled every 10 ms on its own channel, so it includes
 * up to ~10 ms of polling granularity); ms_to_first_fallback = from the SIGKILL to the first Assemble
 * answer received with mode FALLBACK; p99_ms_during_failover = p99 latency of the calls due in the
 * 2 s after the kill.
 */
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { registryClient, sessionClient } from "../harness/clients.js";
import { startContextd } from "../harness/contextd.js";
import { startBenchEngine } from "../harness/engines.js";
import { openLoop, type PacedCall } from "../harness/interleave.js";
import { codingMessages } from "../harness/messages.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "../harness/scenario.js";
import { nowMs, percentile, round } from "../harness/stats.js";

const RATE = 200;
const BUDGET = 32_000;
const WINDOW_MS = 2_000;

async function run(ctx: ScenarioContext): Promise<ScenarioResult> {
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

export const failover: Scenario = {
  name: "failover",
  title: "200 Assemble calls/s on a sidecar that is SIGKILLed mid-run: failed calls, time to quarantine, p99 during failover",
  run,
};
