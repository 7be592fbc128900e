/**
 * The Python engine SDK (clients/python/contextd/engine) end to end, all REAL processes: contextd
 * with auth on, agent `coder` routed to the engine (slots.agents), and an engine built on the SDK
 * (clients/python/tests/engine/probe_engine.py, steered by the session id) run with
 * /usr/bin/python3, registering itself through the SDK environment. It registers with a valid
 * EngineInfo and SERVING health, serves Assemble for the routed agent only, delegates Compact to the
 * host (the entry names the engine), sees contextd's deadline as ctx.cancelled, is quarantined for
 * an INTERNAL answer and released, registers again after contextd restarts without it, and on
 * SIGTERM deregisters and exits 0.
 *
 * Every case runs twice: against the probe's plain `def` Assemble (grpcio's threaded server) and
 * against its `async def` Assemble (PROBE_ASYNC=1: served on grpc.aio), which registers, renews,
 * re-registers and deregisters through the same SDK code. The async run also shows what asyncio is
 * for: an Assemble the engine holds until 20 others have been answered, the 21 calls sent at once
 * from one event loop by contextd.AsyncClient (test/python/async_burst.py) — served one at a time on
 * either side, the held call would only end at its deadline.
 */
import { spawn } from "node:child_process";
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineHealth } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode, type TranscriptEntry } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startWindowEngine, type WindowEngineProcess } from "../engines-window/window-process.js";
import { codingSession } from "../fixtures/coding-session.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess, type StartContextdOptions } from "../helpers/contextd-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { lastJsonLine, PYTHON, pythonEnv, REPO_ROOT, requirePythonGrpc } from "../helpers/python.js";
import { eventually, registryClient } from "../helpers/registry-client.js";

const ENGINE = "py-probe";
const PROBE = "clients/python/tests/engine/probe_engine.py";
const OWNER_TOKEN = "owner-t";
const RUNTIME_TOKEN = "runtime-t";

/** The probe with a plain `def` Assemble, and with an `async def` one (served on grpc.aio). */
const VARIANTS = [
  { name: "sync", env: {} as Record<string, string>, assembleDeadlineMs: 800 },
  // The burst case sends 21 Assembles at once through contextd on a busy 2-core machine: room for them.
  { name: "async (grpc.aio)", env: { PROBE_ASYNC: "1" } as Record<string, string>, assembleDeadlineMs: 3_000 },
];

function contextdOptions(listen: string, ASSEMBLE_DEADLINE_MS: number): StartContextdOptions {
  return {
    config: {
      listen,
      slots: { context_engine: "legacy", agents: { coder: ENGINE } },
      auth: { required: true, owners: { team: { token_env: "TEAM_TOKEN", engines: [ENGINE] } }, runtimes: [{ token_env: "RT" }] },
      engines: {
        timeouts: { assemble: `${ASSEMBLE_DEADLINE_MS}ms` },
        health: { interval: "200ms", timeout: "150ms", unhealthy_threshold: 2 },
        quarantine: { base_ejection: "1s", max_ejection: "3s" },
      },
      // The async burst below has 21 calls of one token in flight, more than the default 16: a
      // deployment whose runtimes fan out that wide raises the limit.
      limits: { tenant: { max_calls_in_flight: 32 } },
    },
    env: { TEAM_TOKEN: OWNER_TOKEN, RT: RUNTIME_TOKEN },
  };
}

async function compactions(cx: ContextdClient, sessionId: string) {
  const out: TranscriptEntry[] = [];
  for await (const e of cx.transcript(sessionId, 500)) out.push(e);
  return out.flatMap((e) => (e.entry?.$case === "compaction" ? [e.entry.value] : []));
}

/** Runs test/python/async_burst.py; sends it the go-ahead once the engine logs that the waiter waits. */
async function asyncBurst(address: string, engine: WindowEngineProcess, logsBefore: number): Promise<Record<string, unknown>> {
  const child = spawn(PYTHON, ["test/python/async_burst.py", address, "coder"], {
    cwd: REPO_ROOT,
    env: pythonEnv({ CONTEXTD_RUNTIME_TOKEN: RUNTIME_TOKEN }),
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
  try {
    await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "probe: waiter waiting", 30_000);
    child.stdin.end("go\n");
    const code = await exited;
    expect(code, stderr + stdout).toBe(0);
    return lastJsonLine(stdout)!;
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
}

describe.each(VARIANTS)(
  "an engine built on the Python engine SDK, $name, behind a real contextd",
  ({ name, env, assembleDeadlineMs: ASSEMBLE_DEADLINE_MS }) => {
    let listen: string;
    let contextd: ContextdProcess;
    let engine: WindowEngineProcess;
    let cx: ContextdClient;
    let registry: ReturnType<typeof registryClient>;
    const coder = { sessionId: "chat-1", agentId: "coder" };
    const conversation = codingSession({ turns: 8, seed: 5 }).messages;

    const quarantineOver = () => eventually(async () => (await registry.get(ENGINE, OWNER_TOKEN)).quarantine === undefined, 15_000, 100);

    beforeAll(async () => {
      requirePythonGrpc();
      listen = `127.0.0.1:${await getFreePort()}`;
      contextd = await startContextd(contextdOptions(listen, ASSEMBLE_DEADLINE_MS));
      engine = await startWindowEngine({
        script: PROBE,
        registry: listen,
        owner: "team",
        ownerToken: OWNER_TOKEN,
        env: { CONTEXTD_PARENT_PID: String(process.pid), CONTEXTD_LOG_LEVEL: "debug", PROBE_HEARTBEAT_S: "0.3", ...env },
      });
      registry = registryClient(listen);
      cx = new ContextdClient({ address: listen, token: RUNTIME_TOKEN, timeoutMs: 60_000 });
      await engine.waitForLog((l) => l.msg === "registered with the registry");
    });
    afterAll(async () => {
      cx?.close();
      registry?.close();
      await engine?.stop().catch(() => undefined);
      await contextd?.cleanup();
    });

    it("registers its real endpoint with the EngineInfo the SDK derived, and is SERVING", async () => {
      expect(engine.address).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(engine.address.endsWith(":0")).toBe(false);
      const s = await eventually(async () => {
        const got = await registry.get(ENGINE, OWNER_TOKEN);
        return got.health === EngineHealth.ENGINE_HEALTH_SERVING ? got : undefined;
      }, 10_000);
      expect(s).toMatchObject({ engineId: ENGINE, owner: "team", endpoint: engine.address });
      expect(s.info).toMatchObject({
        id: ENGINE,
        name: "SDK probe",
        version: "1.0.0",
        ownsCompaction: false,
        protocolVersions: [1],
        hostRequirements: ["host-compaction"],
      });
      expect(s.info!.capabilities).toEqual({
        bootstrap: false,
        ingestBatch: false,
        afterTurn: false,
        maintain: false,
        subagents: false,
        dispose: false,
        forget: false,
      });
      const registered = await engine.waitForLog((l) => l.msg === "registered with the registry");
      expect(registered).toMatchObject({ level: "info", engine: ENGINE, endpoint: engine.address, owner: "team", protocol_version: 1 });
    });

    it("serves Assemble for the agent routed to it (slots.agents); other agents stay on legacy", async () => {
      await cx.appendMessages({ session: coder, messages: conversation });
      const logsBefore = engine.logLines().length;
      const res = await cx.assemble({ session: coder, tokenBudget: 12_000, autoCompact: false });
      expect(res).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL, fallbackReason: "" });
      expect(res.estimatedTokens).toBeLessThanOrEqual(12_000);
      expect(res.estimatedTokens).toBe(res.messages.reduce((a, m) => a + m.tokenCount, 0));
      expect(res.messages.length).toBeGreaterThan(0);
      const assembled = await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "probe: assembled");
      expect(assembled).toMatchObject({ session: "chat-1", agent: "coder", rpc: "Assemble", kept: res.messages.length });
      expect(typeof assembled.request_id).toBe("string");

      const other = { sessionId: "chat-2", agentId: "reviewer" };
      await cx.appendMessages({ session: other, messages: [user("hello")] });
      expect((await cx.assemble({ session: other, tokenBudget: 4_000 })).engineId).toBe("legacy");
    });

    it("Compact delegates to the host, which commits the compaction under the engine's id", async () => {
      const logsBefore = engine.logLines().length;
      const res = await cx.compact({ session: coder, tokenBudget: 8_000, force: true });
      expect(res).toMatchObject({ ok: true, compacted: true, engineId: ENGINE, mode: Mode.MODE_NORMAL });
      const entries = await compactions(cx, coder.sessionId);
      expect(entries).toHaveLength(1);
      expect(entries[0]!.engineId).toBe(ENGINE);
      expect(entries[0]!.summary).toBe(res.result!.summary);
      const answered = await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "delegated compaction answered");
      expect(answered).toMatchObject({ rpc: "Compact", session: "chat-1", ok: true, compacted: true });
    });

    it("contextd's deadline reaches the engine method as ctx.cancelled; the call falls back to legacy", async () => {
      const session = { sessionId: "hang-1", agentId: "coder" };
      await cx.appendMessages({ session, messages: [user("take your time")] });
      const logsBefore = engine.logLines().length;
      const started = Date.now();
      const res = await cx.assemble({ session, tokenBudget: 4_000 });
      expect(Date.now() - started).toBeLessThan(ASSEMBLE_DEADLINE_MS + 1_500);
      expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
      const ended = await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "probe: call ended", 5_000);
      expect(ended, JSON.stringify(ended)).toMatchObject({ session: "hang-1", cause: "deadline" });
      expect(ended.time_remaining).toBeLessThan(0.05);
      await quarantineOver();
    });

    it("an engine method that raises answers INTERNAL: quarantined (and the engine hears of it), then released", async () => {
      await quarantineOver();
      const session = { sessionId: "fail-1", agentId: "coder" };
      await cx.appendMessages({ session, messages: [user("break")] });
      const logsBefore = engine.logLines().length;
      const res = await cx.assemble({ session, tokenBudget: 4_000 });
      expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
      expect(res.fallbackReason).toContain("probe: told to fail");
      const failed = await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "assemble() failed");
      expect(failed).toMatchObject({ level: "error", rpc: "Assemble" });
      expect((failed.err as { type: string }).type).toBe("RuntimeError");
      const seen = await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "the registry has quarantined this engine");
      expect(seen).toMatchObject({ level: "warn", operation: "assemble" });
      await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "the registry released this engine from quarantine", 15_000);
      // Released, it serves again: waited for (within 5 s) rather than assumed at the SDK's log line,
      // which an Assemble sent at once has been seen to beat.
      await eventually(async () => (await cx.assemble({ session: coder, tokenBudget: 12_000, autoCompact: false })).engineId === ENGINE, 5_000, 100);
    });

    it("registers again by itself when contextd comes back without its registration", async () => {
      const logsBefore = engine.logLines().length;
      await contextd.kill9();
      await contextd.cleanup();
      // A fresh data dir on the same address: the registry has never heard of the engine.
      contextd = await startContextd(contextdOptions(listen, ASSEMBLE_DEADLINE_MS));
      await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "registered again with the registry", 30_000);
      await eventually(async () => (await registry.get(ENGINE, OWNER_TOKEN)).endpoint === engine.address, 15_000, 100);
      const session = { sessionId: "after-restart", agentId: "coder" };
      await cx.appendMessages({ session, messages: [user("hello again")] });
      expect(await cx.assemble({ session, tokenBudget: 4_000 })).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL });
    });

    // Only the async engine can hold one call while it serves others on the same loop.
    if (name !== "sync")
      it("20 concurrent AsyncClient calls from one event loop are answered while the engine holds another one, awaiting", async () => {
        const logsBefore = engine.logLines().length;
        const r = await asyncBurst(listen, engine, logsBefore);
        // The held call was answered by the engine, not by the fallback at its deadline: the 20 others
        // were sent, served and answered while it waited (the engine releases it at the 20th).
        expect(r).toMatchObject({ waiter_engine: ENGINE, waiter_mode: "MODE_NORMAL", burst_engines: [ENGINE], burst_modes: ["MODE_NORMAL"] });
        const waited = await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "probe: waiter waiting");
        const released = await engine.waitForLog((l, i) => i >= logsBefore && l.msg === "probe: waiter released");
        expect(waited.bursts).toBe(0);
        expect(released.bursts).toBe(20);
        expect(r.waiter_s as number).toBeLessThan(ASSEMBLE_DEADLINE_MS / 1000);
        console.log(`async burst: 20 Assembles in ${String(r.bursts_s)} s while a 21st waited ${String(r.waiter_s)} s`);
      });

    it("SIGTERM: NOT_SERVING, deregisters, drains and exits 0", async () => {
      expect(await engine.stop("SIGTERM")).toBe(0);
      const err = await registry.get(ENGINE, OWNER_TOKEN).then(
        () => undefined,
        (e: ServiceError) => e,
      );
      expect(err?.code).toBe(status.NOT_FOUND);
      const msgs = engine.logLines().map((l) => l.msg);
      const order = ["signal received: deregistering and draining", "deregistered from the registry", "engine stopped"].map((m) => msgs.indexOf(m));
      expect(
        order.every((i) => i >= 0),
        msgs.join("\n"),
      ).toBe(true);
      expect(order).toEqual([...order].sort((a, b) => a - b));
    });
  },
);
