/**
 * Issue 28, item 5: engine instances as deployed — three contextd replicas on one scratch PostgreSQL
 * database behind HAProxy (docs/deploy/haproxy.cfg, unchanged), and beside each replica its own
 * sidecar of the one engine id (the TypeScript test engine), registered at that replica with that
 * replica's locality (`engines.locality.replica` ↔ CONTEXTD_ENGINE_REPLICA). A steady Append/Assemble
 * load from several sessions goes through HAProxy the whole time; every Assemble answer is recorded
 * (mode, engine id, fallback reason) and every failed call counted (test/helpers/runtime-load.ts).
 *
 * What it shows, phase by phase (docs/registry.md, "Instances"): every instance serves a share (each
 * replica calls the sidecar beside it); kill -9 one sidecar and no call fails and no Assemble is
 * answered by legacy — the other instances serve; freeze one (SIGSTOP, the case a dead connection
 * cannot reveal) and it is ejected at every replica and its calls move to the one left; all down and
 * legacy answers (FALLBACK), still without a failed call; one sidecar back and the engine answers
 * again. An Ingest cut off in flight by the kill or the freeze (or by the ejection it waited
 * through) is, by design, not sent again — the lost instance may have applied it — and falls back,
 * unseen by the runtime (an append's answer has no mode): the only fallbacks allowed before phase 4
 * are such Ingests, a bounded few, counted from the replicas' metrics. An Assemble, which only
 * reads, never falls back while an instance is left: it is sent to another instance.
 *
 * Single-process instance behaviour is test/registry/instances.test.ts; two replicas without a load
 * balancer, test/replicas/instances.test.ts; HAProxy under restarts, test/replicas/load-balancer.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineStatus } from "../../src/contract/gen/contextd/v1/registry.js";
import type { AssembleRequest, AssembleResponse, DeepPartial } from "../../src/contract/gen/contextd/v1/session.js";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient, type CallOptions } from "../../src/sdk/runtime-client.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { startHaproxy, type Haproxy } from "../helpers/haproxy.js";
import { eventually, registryClient } from "../helpers/registry-client.js";
import { startReplicas, stopReplicas, type Replica } from "../helpers/replicas.js";
import { runLoad, RuntimeStats, SessionWriter, waitUntil } from "../helpers/runtime-load.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";
import { parsePrometheus } from "../observability/prometheus-text.js";

const ENGINE = "shared-engine";
const OWNER = "acme";
/** The load's sessions, one writer each (a step: an append, then an Assemble). */
const WRITERS = ["a", "b", "c", "d", "e"];
/**
 * Short health and quarantine times, as the other instance tests use, but deadlines generous enough
 * that a healthy sidecar on a loaded 2-core CI machine is not ejected by a slow answer: a frozen one
 * is caught by two failed health checks (1 s apart) or by an Assemble unanswered after 3 s.
 */
const CONFIG = {
  slots: { context_engine: ENGINE },
  engines: {
    timeouts: { assemble: "3s", ingest: "3s" },
    health: { interval: "1s", timeout: "1s", unhealthy_threshold: 2, remove_after: "5m" },
    quarantine: { base_ejection: "1s", max_ejection: "3s" },
  },
};

/** One Assemble answer as the runtime saw it. */
interface Answer {
  startedAtMs: number;
  sessionId: string;
  mode: Mode;
  engineId: string;
  fallbackReason: string;
}

/** The runtime's client through HAProxy, recording every Assemble answer. */
class RecordingClient extends ContextdClient {
  readonly answers: Answer[] = [];
  override async assemble(req: DeepPartial<AssembleRequest>, o?: CallOptions): Promise<AssembleResponse> {
    const startedAtMs = Date.now();
    const res = await super.assemble(req, o);
    this.answers.push({ startedAtMs, sessionId: req.session?.sessionId ?? "", mode: res.mode, engineId: res.engineId, fallbackReason: res.fallbackReason });
    return res;
  }
}

describe("one engine id, a sidecar beside each of three replicas behind HAProxy, under load", () => {
  let db: ScratchDatabase;
  let replicas: Replica[] = [];
  let lb: Haproxy;
  /** engines[i] runs beside replicas[i] (locality.replica = its name); a 4th comes back in the last phase. */
  const engines: EngineProcess[] = [];
  let registries: Array<ReturnType<typeof registryClient>> = [];
  let cx: RecordingClient;
  const stats = new RuntimeStats();
  const stop = new AbortController();
  let load: Promise<void> | undefined;
  let loadError: unknown;
  const phases: Array<Record<string, unknown>> = [];

  /** Each replica's view of the engine (RegistryService.GetEngine, straight to the replica). */
  const views = (): Promise<EngineStatus[]> => Promise.all(registries.map((r) => r.get(ENGINE)));
  const instanceIn = (view: EngineStatus, e: EngineProcess) => view.instances.find((i) => i.endpoint === e.address);
  /** Calls made to `e`, summed over the replicas. */
  const callsOf = (vs: EngineStatus[], e: EngineProcess) => vs.reduce((n, v) => n + (instanceIn(v, e)?.calls ?? 0), 0);
  const quarantinedEverywhere = (vs: EngineStatus[], e: EngineProcess) => vs.every((v) => instanceIn(v, e)?.quarantine !== undefined);
  const answers = () => cx.answers;
  /** For the log: at each replica, what ejected `e` and how long after `sinceMs`. */
  const ejections = (vs: EngineStatus[], e: EngineProcess, sinceMs: number) =>
    vs.map((v) => {
      const q = instanceIn(v, e)?.quarantine;
      return q && `${q.operation} +${q.failedAtMs - sinceMs}ms`;
    });
  /** Waits for `n` more Assemble answers started after `sinceMs`; fails at once if the load stopped on an error. */
  const answersSince = async (sinceMs: number, n: number, what: string): Promise<Answer[]> => {
    const after = () => answers().filter((a) => a.startedAtMs > sinceMs);
    await waitUntil(
      () => {
        if (loadError) throw new Error(`the load stopped: ${String(loadError)}; ${JSON.stringify(stats.summary())}`);
        return after().length >= n;
      },
      `${n} Assemble answers ${what}`,
      30_000,
    );
    return after();
  };
  /** contextd_engine_fallbacks_total of the engine, summed over the replicas, by operation and reason. */
  const fallbacks = async (): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    for (const r of replicas) {
      const text = await (await fetch(`http://${r.current.metricsAddress}/metrics`)).text();
      for (const s of parsePrometheus(text)) {
        if (s.name !== "contextd_engine_fallbacks_total" || s.labels.engine !== ENGINE || s.value === 0) continue;
        const key = `${s.labels.operation}/${s.labels.reason}`;
        out[key] = (out[key] ?? 0) + s.value;
      }
    }
    return out;
  };
  /**
   * Only Ingests cut off in flight fell back — by the instance's death (error), its silence
   * (timeout) or its ejection while they waited on it (quarantined: its calls in flight die with
   * it) — never sent again, as it may have applied them; and at most one per writer at each replica
   * for each instance lost (a writer has one call in flight, and a replica no longer calls an
   * instance once it failed a call there or was ejected).
   */
  const expectOnlyCutOffIngestsFellBack = async (instancesLost: number) => {
    const fb = await fallbacks();
    for (const key of Object.keys(fb)) expect(["ingest/error", "ingest/timeout", "ingest/quarantined"], `fallbacks ${JSON.stringify(fb)}`).toContain(key);
    const total = Object.values(fb).reduce((a, b) => a + b, 0);
    expect(total, `fallbacks ${JSON.stringify(fb)}`).toBeLessThanOrEqual(WRITERS.length * replicas.length * instancesLost);
    return fb;
  };
  const expectNoFailedCall = () => {
    expect(loadError, String(loadError)).toBeUndefined();
    expect(stats.failures, JSON.stringify(stats.summary())).toEqual([]);
  };
  const expectAllFromEngine = (list: Answer[]) => {
    const other = list.filter((a) => a.mode !== Mode.MODE_NORMAL || a.engineId !== ENGINE || a.fallbackReason !== "");
    expect(other, `${other.length} of ${list.length} answers not the engine's`).toEqual([]);
  };

  beforeAll(async () => {
    db = await createScratchDatabase();
    replicas = await startReplicas(3, {
      store: db.url({ pool_max: 4 }),
      config: CONFIG,
      configFor: (name) => ({ engines: { locality: { replica: name } } }),
    });
    registries = replicas.map((r) => registryClient(r.address));
    // Each sidecar registers at the replica it runs beside, naming that replica as its locality.
    const [proxy, sidecars] = await Promise.all([
      startHaproxy(replicas.map((r) => r.address)),
      Promise.all(replicas.map((r) => startTsEngine({ engineId: ENGINE, registry: r.address, owner: OWNER, env: { CONTEXTD_ENGINE_REPLICA: r.name } }))),
    ]);
    lb = proxy;
    engines.push(...sidecars);
    for (const e of engines) expect(await e.registered).toMatchObject({ ok: true });
    // Every replica holds all three (LISTEN/NOTIFY), the one beside it as local.
    await eventually(async () => {
      const vs = await views();
      return vs.every((v, r) => v.instances.length === 3 && engines.every((e, i) => instanceIn(v, e)?.local === (i === r)));
    }, 20_000);

    // One channel through HAProxy, as a runtime has; HAProxy spreads its calls over the replicas.
    cx = new RecordingClient({ address: lb.address, timeoutMs: 30_000 });
    const writers = WRITERS.map((w) => new SessionWriter({ client: cx, sessionId: `inst-${w}`, writer: w, stats }));
    load = runLoad(writers, stop.signal, 20).catch((err: unknown) => {
      loadError = err;
    });
  });
  afterAll(async () => {
    stop.abort();
    await load;
    console.log(JSON.stringify({ test: "instances behind haproxy", phases, load: stats.summary(), assembles: cx?.answers.length }));
    cx?.close();
    for (const r of registries) r.close();
    await Promise.all(engines.map((e) => e.kill9().catch(() => undefined)));
    await lb?.stop();
    await stopReplicas(replicas);
    await db?.drop();
  });

  it("every instance serves a share: each replica calls the sidecar beside it, and every answer is the engine's", async () => {
    await answersSince(0, 30, "from the start");
    const vs = await eventually(async () => {
      const now = await views();
      return engines.every((e) => callsOf(now, e) > 0) && now;
    }, 20_000);
    // Local first: each replica's calls went to the instance beside it, none to the others.
    for (const [r, v] of vs.entries()) {
      for (const [i, e] of engines.entries()) {
        const calls = instanceIn(v, e)?.calls ?? 0;
        if (i === r) expect(calls, `${replicas[r]!.name} → its own sidecar`).toBeGreaterThan(0);
        else expect(calls, `${replicas[r]!.name} → the sidecar beside ${replicas[i]!.name}`).toBe(0);
      }
    }
    expectAllFromEngine(answers());
    expectNoFailedCall();
    expect(await fallbacks()).toEqual({});
    phases.push({ phase: "share", calls: engines.map((e) => callsOf(vs, e)), answers: answers().length });
  });

  it("kill -9 one sidecar under load: zero failed calls, no Assemble answered by legacy, and that instance alone is quarantined", async () => {
    const [killed, ...others] = engines as [EngineProcess, EngineProcess, EngineProcess];
    const sinceMs = Date.now();
    const before = await views();
    await killed.kill9();
    const vs = await eventually(async () => {
      const now = await views();
      return quarantinedEverywhere(now, killed) && now;
    }, 20_000);
    const ejectedMs = Date.now() - sinceMs;
    for (const v of vs) for (const e of others) expect(instanceIn(v, e)?.quarantine, `${e.address} at a replica`).toBeUndefined();
    // The replica it ran beside now calls the others.
    const othersAtR1 = (v: EngineStatus) => others.reduce((n, e) => n + (instanceIn(v, e)?.calls ?? 0), 0);
    await answersSince(Date.now(), 30, "after the ejection");
    await eventually(async () => othersAtR1((await registries[0]!.get(ENGINE))!) > othersAtR1(before[0]!), 20_000);
    // Every answer so far, those in flight at the moment included.
    expectAllFromEngine(answers());
    expectNoFailedCall();
    const fb = await expectOnlyCutOffIngestsFellBack(1);
    phases.push({ phase: "kill -9", ejected_after_ms: ejectedMs, ejections: ejections(vs, killed, sinceMs), fallbacks: fb });
  });

  it("SIGSTOP another under load: it is ejected at every replica and its calls move to the one left, none to legacy, no call fails", async () => {
    const [, frozen, left] = engines as [EngineProcess, EngineProcess, EngineProcess];
    const sinceMs = Date.now();
    const leftAtR2Before = instanceIn(await registries[1]!.get(ENGINE), left)?.calls ?? 0;
    process.kill(frozen.pid, "SIGSTOP");
    const vs = await eventually(async () => {
      const now = await views();
      return quarantinedEverywhere(now, frozen) && now;
    }, 20_000);
    const ejectedMs = Date.now() - sinceMs;
    for (const v of vs) expect(instanceIn(v, left)?.quarantine, "the instance left at a replica").toBeUndefined();
    const frozenCalls = callsOf(vs, frozen);
    const leftCalls = callsOf(vs, left);
    await answersSince(Date.now(), 30, "after the ejection");
    const after = await eventually(async () => {
      const now = await views();
      // The replica beside the frozen sidecar calls the one left, and so does the load as a whole.
      return (instanceIn(now[1]!, left)?.calls ?? 0) > leftAtR2Before && callsOf(now, left) >= leftCalls + 20 && now;
    }, 20_000);
    expect(callsOf(after, frozen), "calls to the frozen instance after its ejection").toBe(frozenCalls);
    // Every answer so far, those in flight at the moment included.
    expectAllFromEngine(answers());
    expectNoFailedCall();
    const fb = await expectOnlyCutOffIngestsFellBack(2);
    phases.push({
      phase: "SIGSTOP",
      ejected_after_ms: ejectedMs,
      ejections: ejections(vs, frozen, sinceMs),
      calls_left_after: callsOf(after, left) - leftCalls,
      fallbacks: fb,
    });
  });

  it("all three down: legacy answers (FALLBACK, the engine's instances quarantined), and still no call fails", async () => {
    const [, frozen, left] = engines as [EngineProcess, EngineProcess, EngineProcess];
    const sinceMs = Date.now();
    // SIGKILL ends the frozen one too.
    await Promise.all([frozen.kill9(), left.kill9()]);
    await eventually(async () => (await views()).every((v) => v.instances.length === 3 && v.instances.every((i) => i.quarantine !== undefined)), 20_000);
    const downMs = Date.now() - sinceMs;
    const list = await answersSince(Date.now(), 20, "after every instance was ejected");
    const other = list.filter((a) => a.mode !== Mode.MODE_FALLBACK || a.engineId !== "legacy" || !/is quarantined/.test(a.fallbackReason));
    expect(other, `${other.length} of ${list.length} answers not legacy's`).toEqual([]);
    expectNoFailedCall();
    phases.push({ phase: "all down", ejected_after_ms: downMs, sample_reason: list[0]?.fallbackReason, fallbacks: await fallbacks() });
  });

  it("one sidecar back: the engine answers again (NORMAL, its id), called by every replica", async () => {
    const sinceMs = Date.now();
    const back = await startTsEngine({ engineId: ENGINE, registry: replicas[0]!.address, owner: OWNER, env: { CONTEXTD_ENGINE_REPLICA: replicas[0]!.name } });
    engines.push(back);
    expect(await back.registered).toMatchObject({ ok: true });
    await eventually(async () => (await views()).every((v) => instanceIn(v, back) !== undefined && instanceIn(v, back)!.quarantine === undefined), 20_000);
    const backMs = Date.now() - sinceMs;
    expectAllFromEngine(await answersSince(Date.now(), 30, "after the sidecar came back"));
    const vs = await eventually(async () => {
      const now = await views();
      return now.every((v) => (instanceIn(v, back)?.calls ?? 0) > 0) && now;
    }, 20_000);
    expectNoFailedCall();
    phases.push({ phase: "back", serving_after_ms: backMs, calls: vs.map((v) => instanceIn(v, back)?.calls) });
  });
});
