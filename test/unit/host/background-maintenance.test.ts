/**
 * Background maintenance (src/host/background-maintenance.ts) on the real host in process: an engine
 * that declares TURN_MAINTENANCE_MODE_BACKGROUND gets Maintain after each turn, never inside the
 * runtime's AfterTurn, once per session at a time however many turns end meanwhile; an engine that
 * declares FOREGROUND gets none. The engine is the one stand-in, written against ContextEngine.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { CallContext, ContextEngine } from "../../../src/contract/engine-api.js";
import {
  EngineInfo,
  TurnMaintenanceMode,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceAssembleResponse,
  type ContextEngineServiceCompactResponse,
  type ContextEngineServiceMaintainRequest,
  type ContextEngineServiceMaintainResponse,
  type IngestResponse,
} from "../../../src/contract/gen/contextd/v1/engine.js";
import { Mode, Role } from "../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../src/contract/messages.js";
import type { SessionHost } from "../../../src/host/session-host.js";
import { SqliteStore } from "../../../src/store/sqlite/sqlite-store.js";
import { inProcessHost, resolved, runtimeCall } from "../../host/held-compaction-host.js";

/** An engine whose Maintain calls are held until the test lets each one answer. */
class MaintainedEngine implements ContextEngine {
  readonly id = "maintained";
  readonly maintains: { req: ContextEngineServiceMaintainRequest; ctx: CallContext; answer: () => void }[] = [];
  private arrived: (() => void)[] = [];

  constructor(private readonly mode: TurnMaintenanceMode) {}
  info(): EngineInfo {
    return EngineInfo.fromPartial({
      id: this.id,
      name: "maintained",
      version: "1",
      protocolVersions: [1],
      turnMaintenanceMode: this.mode,
      capabilities: { maintain: true, afterTurn: true },
    });
  }
  async ingest(): Promise<IngestResponse> {
    return { ingested: true };
  }
  async assemble(req: ContextEngineServiceAssembleRequest): Promise<ContextEngineServiceAssembleResponse> {
    return { messages: req.messages, keptEntryIds: [], estimatedTokens: 0, systemPromptAddition: "", promptAuthority: 0 };
  }
  async compact(): Promise<ContextEngineServiceCompactResponse> {
    return { ok: true, compacted: false, reason: "no", result: undefined };
  }
  async afterTurn() {
    return {};
  }
  maintain(req: ContextEngineServiceMaintainRequest, ctx: CallContext): Promise<ContextEngineServiceMaintainResponse> {
    return new Promise((resolve) => {
      this.maintains.push({ req, ctx, answer: () => resolve({ changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "done" }) });
      for (const a of this.arrived.splice(0)) a();
    });
  }
  /** Resolves once `n` Maintain calls have arrived in all. */
  async maintainCalls(n: number): Promise<void> {
    while (this.maintains.length < n) await new Promise<void>((resolve) => this.arrived.push(resolve));
  }
}

let dir: string;
let store: SqliteStore;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-background-"));
  store = SqliteStore.open(path.join(dir, "bg.db"));
});
afterEach(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const session = { sessionId: "s", agentId: "agent", sessionKey: "" };

async function turn(host: SessionHost): Promise<void> {
  await host.appendMessages(
    { session, messages: [textMessage(Role.ROLE_USER, "hello")], isHeartbeat: false, messageKeys: [], idempotencyKey: "" },
    runtimeCall(),
    await resolved(host, session, "create"),
  );
}

const afterTurn = async (host: SessionHost) =>
  host.afterTurn(
    { session, prePromptMessageCount: 0, autoCompactionSummary: "", tokenBudget: 1000 } as never,
    runtimeCall(),
    await resolved(host, session, "view"),
  );

describe("background maintenance", () => {
  it("AfterTurn is answered without waiting for it; Maintain follows, as an engine call with a host deadline", async () => {
    const engine = new MaintainedEngine(TurnMaintenanceMode.TURN_MAINTENANCE_MODE_BACKGROUND);
    const { host } = inProcessHost(store, engine, { contextEngine: engine.id, onFailure: "fallback" });
    await turn(host);
    const answer = await afterTurn(host);
    expect(answer.mode).toBe(Mode.MODE_NORMAL);
    await engine.maintainCalls(1);
    expect(engine.maintains[0].req.session?.sessionId).toBe("s");
    expect(Number.isFinite(engine.maintains[0].ctx.deadlineMs)).toBe(true);
    engine.maintains[0].answer();
    await host.background.stop();
  });

  it("turns that end while a session's maintenance runs ask for one more run after it, not one each", async () => {
    const engine = new MaintainedEngine(TurnMaintenanceMode.TURN_MAINTENANCE_MODE_BACKGROUND);
    const { host } = inProcessHost(store, engine, { contextEngine: engine.id, onFailure: "fallback" });
    await turn(host);
    await afterTurn(host);
    await engine.maintainCalls(1);
    for (let i = 0; i < 3; i++) await afterTurn(host);
    expect(engine.maintains).toHaveLength(1);
    engine.maintains[0].answer();
    await engine.maintainCalls(2);
    engine.maintains[1].answer();
    await host.background.stop();
    expect(engine.maintains).toHaveLength(2);
  });

  it("an engine that declares FOREGROUND gets no Maintain after the turn", async () => {
    const engine = new MaintainedEngine(TurnMaintenanceMode.TURN_MAINTENANCE_MODE_FOREGROUND);
    const { host } = inProcessHost(store, engine, { contextEngine: engine.id, onFailure: "fallback" });
    await turn(host);
    await afterTurn(host);
    expect(host.background.pending).toBe(0);
    await host.background.stop();
    expect(engine.maintains).toHaveLength(0);
  });

  it("stop cancels a run in progress and drops what waits", async () => {
    const engine = new MaintainedEngine(TurnMaintenanceMode.TURN_MAINTENANCE_MODE_BACKGROUND);
    const { host } = inProcessHost(store, engine, { contextEngine: engine.id, onFailure: "fallback" });
    await turn(host);
    await afterTurn(host);
    await engine.maintainCalls(1);
    const stopped = host.background.stop();
    expect(engine.maintains[0].ctx.signal.aborted).toBe(true);
    engine.maintains[0].answer();
    await stopped;
    expect(host.background.pending).toBe(0);
  });
});
