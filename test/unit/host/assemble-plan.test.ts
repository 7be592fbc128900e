/**
 * The steps of an Assemble (src/host/assemble-plan.ts), each on the real host in process: the real
 * Router, EngineRegistry with the real `legacy` engine and native compaction, Compactions, tokenizer
 * and a SQLite file. The one stand-in is the selected engine, an outside component written here
 * against the ContextEngine interface, whose answers each test scripts.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ContextEngine } from "../../../src/contract/engine-api.js";
import {
  EngineInfo,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceAssembleResponse,
  type ContextEngineServiceCompactRequest,
  type ContextEngineServiceCompactResponse,
  type IngestResponse,
} from "../../../src/contract/gen/contextd/v1/engine.js";
import { Mode, PromptAuthority, Role } from "../../../src/contract/gen/contextd/v1/types.js";
import { isSummaryMessage, messageText, textMessage } from "../../../src/contract/messages.js";
import { AssemblePlan, MAX_OVERFLOW_COMPACTIONS } from "../../../src/host/assemble-plan.js";
import type { SessionHost } from "../../../src/host/session-host.js";
import { StablePrefixes } from "../../../src/host/stable-prefix.js";
import { SqliteStore } from "../../../src/store/sqlite/sqlite-store.js";
import { inProcessHost, resolved, runtimeCall } from "../../host/held-compaction-host.js";

const ENGINE = "scripted";
const BUDGET = 400;

/** An engine whose Assemble and Compact answers the test sets; it records what it was sent. */
class ScriptedAssembler implements ContextEngine {
  readonly id = ENGINE;
  assembles: ContextEngineServiceAssembleRequest[] = [];
  compacts: ContextEngineServiceCompactRequest[] = [];
  onAssemble: (req: ContextEngineServiceAssembleRequest, n: number) => ContextEngineServiceAssembleResponse = (req) => viewAnswer(req);
  onCompact: (req: ContextEngineServiceCompactRequest) => ContextEngineServiceCompactResponse = () => ({
    ok: true,
    compacted: false,
    reason: "no",
    result: undefined,
  });

  constructor(private readonly ownsCompaction: boolean) {}
  info(): EngineInfo {
    return EngineInfo.fromPartial({ id: ENGINE, name: "scripted", version: "1", ownsCompaction: this.ownsCompaction, protocolVersions: [1] });
  }
  async ingest(): Promise<IngestResponse> {
    return { ingested: true };
  }
  async assemble(req: ContextEngineServiceAssembleRequest): Promise<ContextEngineServiceAssembleResponse> {
    this.assembles.push(req);
    return this.onAssemble(req, this.assembles.length);
  }
  async compact(req: ContextEngineServiceCompactRequest): Promise<ContextEngineServiceCompactResponse> {
    this.compacts.push(req);
    return this.onCompact(req);
  }
}

/** The view handed back, as legacy does; `overflow`: "it may be over the budget". */
function viewAnswer(req: ContextEngineServiceAssembleRequest, overflow = false): ContextEngineServiceAssembleResponse {
  return {
    messages: req.messages,
    keptEntryIds: [],
    estimatedTokens: req.messages.reduce((n, m) => n + m.tokenCount, 0),
    systemPromptAddition: "",
    promptAuthority: overflow ? PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW : PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED,
  };
}

let dir: string;
let store: SqliteStore;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-assemble-plan-"));
  store = SqliteStore.open(path.join(dir, "plan.db"));
});
afterEach(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function wire(selected: "legacy" | typeof ENGINE, engine: ScriptedAssembler) {
  const { host, router, compactions, tokenizer } = inProcessHost(store, engine, { contextEngine: selected, onFailure: "fallback" });
  const plan = new AssemblePlan({
    router,
    compactions,
    tokenizer,
    store,
    stablePrefixes: new StablePrefixes(),
    readView: (s) => host.readView(s),
    compact: (r, c, s) => host.compact(r, c, { claimed: s, read: async () => ({ session: s, view: await host.readView(s) }) }),
  });
  return { host, plan, router };
}

const session = { sessionId: "s", agentId: "agent", sessionKey: "" };

/** 40 turns of ~20 tokens each: about twice the budget. */
async function longSession(host: SessionHost): Promise<void> {
  const messages = Array.from({ length: 40 }, (_, i) =>
    textMessage(i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER, `turn ${i}: the deploy of service-${i % 5} needs config key k${i} checked again`),
  );
  await host.appendMessages(
    { session, messages, isHeartbeat: false, messageKeys: [], idempotencyKey: "" },
    runtimeCall(),
    await resolved(host, session, "create"),
  );
}

describe("Assemble, step by step", () => {
  it("fit: the host's native compaction brings the view within the budget and reports the compaction it committed", async () => {
    const { host, plan, router } = wire("legacy", new ScriptedAssembler(false));
    await longSession(host);
    const view = await host.readView(session);
    expect(view.tokens).toBeGreaterThan(BUDGET);
    const input = {
      req: { session, tokenBudget: BUDGET } as never,
      session: await resolved(host, session, "existing"),
      budget: BUDGET,
      selection: router.select(session),
      call: runtimeCall(),
    };
    const fitted = await plan.fit(input, { view, fitted: false }, undefined);
    expect(fitted.fitted).toBe(true);
    expect(fitted.view.tokens).toBeLessThanOrEqual(BUDGET);
    expect(fitted.compaction?.tokensBefore).toBe(view.tokens);
    expect((await host.readView(session)).tokens).toBe(fitted.view.tokens);
  });

  it("fit: a view that already fits is left as it is, nothing committed", async () => {
    const { host, plan, router } = wire("legacy", new ScriptedAssembler(false));
    await host.appendMessages(
      { session, messages: [textMessage(Role.ROLE_USER, "hello")], isHeartbeat: false, messageKeys: [], idempotencyKey: "" },
      runtimeCall(),
      await resolved(host, session, "create"),
    );
    const view = await host.readView(session);
    const input = {
      req: {} as never,
      session: await resolved(host, session, "existing"),
      budget: BUDGET,
      selection: router.select(session),
      call: runtimeCall(),
    };
    const fitted = await plan.fit(input, { view, fitted: false }, undefined);
    expect(fitted.view).toBe(view);
    expect(fitted.compaction).toBeUndefined();
  });

  it("an engine that does not own compaction gets the fitted view; when it fails, legacy answers from that view and the compaction is still reported", async () => {
    const engine = new ScriptedAssembler(false);
    engine.onAssemble = () => {
      throw new Error("engine down");
    };
    const { host } = wire(ENGINE, engine);
    await longSession(host);
    const answer = await host.assemble({ session, tokenBudget: BUDGET } as never, runtimeCall(), await resolved(host, session, "view"));
    expect(engine.assembles[0].messages.reduce((n, m) => n + m.tokenCount, 0)).toBeLessThanOrEqual(BUDGET);
    expect(answer.engineId).toBe("legacy");
    expect(answer.mode).toBe(Mode.MODE_FALLBACK);
    expect(answer.compaction).toBeDefined();
    expect(answer.estimatedTokens).toBeLessThanOrEqual(BUDGET);
  });

  it("an engine that owns compaction and overflows gets its own Compact, is asked again, and its compaction is reported", async () => {
    const engine = new ScriptedAssembler(true);
    engine.onAssemble = (req, n) => viewAnswer(req, n === 1);
    engine.onCompact = (req) => {
      const keep = req.messages.slice(-4);
      const summary = "Summary: deploys of service-0 to service-4, config keys k0 to k35 checked.";
      return {
        ok: true,
        compacted: true,
        reason: "compacted",
        result: { summary, firstKeptEntryId: keep[0].id, tokensBefore: 900, tokensAfter: 120, details: {} },
      };
    };
    const { host } = wire(ENGINE, engine);
    await longSession(host);
    const answer = await host.assemble({ session, tokenBudget: BUDGET } as never, runtimeCall(), await resolved(host, session, "view"));
    expect(engine.compacts).toHaveLength(1);
    expect(engine.assembles).toHaveLength(2);
    expect(engine.assembles[1].messages.length).toBeLessThan(engine.assembles[0].messages.length);
    expect(messageText(engine.assembles[1].messages[0])).toContain("Summary: deploys");
    expect(answer.engineId).toBe(ENGINE);
    expect(answer.mode).toBe(Mode.MODE_NORMAL);
    expect(answer.compaction?.summary).toMatch(/^Summary: deploys/);
    expect(answer.estimatedTokens).toBeLessThanOrEqual(BUDGET);
  });

  it(`an owning engine still over the budget after ${MAX_OVERFLOW_COMPACTIONS} of its compactions is answered DEGRADED, saying why`, async () => {
    const engine = new ScriptedAssembler(true);
    engine.onAssemble = (req) => viewAnswer(req, true);
    engine.onCompact = (req) => ({
      ok: true,
      compacted: true,
      reason: "compacted a little",
      // Two messages less each time: never enough.
      result: {
        summary: "k1",
        firstKeptEntryId: req.messages.filter((m) => m.id && !isSummaryMessage(m))[2].id,
        tokensBefore: 900,
        tokensAfter: 880,
        details: {},
      },
    });
    const { host } = wire(ENGINE, engine);
    await longSession(host);
    const answer = await host.assemble({ session, tokenBudget: BUDGET } as never, runtimeCall(), await resolved(host, session, "view"));
    expect(engine.compacts).toHaveLength(MAX_OVERFLOW_COMPACTIONS);
    expect(answer.mode).toBe(Mode.MODE_DEGRADED);
    expect(answer.fallbackReason).toMatch(new RegExp(`over token_budget ${BUDGET} after ${MAX_OVERFLOW_COMPACTIONS} compaction attempts`));
  });
});
