import { newestFirst } from "../../../engines/newest-first/main.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { credentials, makeGenericClientConstructor, Metadata, Server, ServerCredentials, status, type Client, type ServiceError } from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as E from "../../../src/contract/gen/contextd/v1/engine.js";
import {
  ContextEngineServiceClient,
  TurnMaintenanceMode,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceAssembleResponse,
} from "../../../src/contract/gen/contextd/v1/engine.js";
import {
  HostServiceService,
  type DelegateCompactionRequest,
  type HostServiceServer,
  type ReadTranscriptRequest,
} from "../../../src/contract/gen/contextd/v1/host.js";
import { callUnary } from "../../../src/sdk/grpc-call.js";
import { summaryMessage, toolCallBlock } from "../../../src/contract/messages.js";
import { TranscriptEntry } from "../../../src/contract/gen/contextd/v1/types.js";
import {
  delegateCompactionToHost,
  FailedPreconditionError,
  keepMessages,
  NotFoundError,
  PromptAuthority,
  Role,
  serveEngine,
  textMessage,
  type EngineCallContext,
  type EngineDefinition,
  type Message,
  type RunningEngine,
  type ServeEngineOptions,
} from "../../../src/sdk/engine-sdk.js";

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });
const running: RunningEngine[] = [];
const clients: Client[] = [];
const servers: Server[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) s.forceShutdown();
  await Promise.all(running.splice(0).map((e) => e.stop({ deregister: false })));
});

const minimal = (overrides: Partial<EngineDefinition> = {}): EngineDefinition => ({
  info: { id: "test-engine", name: "Test engine", version: "0.1.0" },
  assemble: (req) => ({ messages: req.messages }),
  compact: () => ({ ok: true, compacted: false, reason: "nothing to do" }),
  ...overrides,
});

async function serve(def: EngineDefinition, options: ServeEngineOptions = {}): Promise<RunningEngine> {
  const engine = await serveEngine(def, { registry: "", handleSignals: false, logger, drainTimeoutMs: 1_000, ...options });
  running.push(engine);
  return engine;
}

function engineClient(address: string): ContextEngineServiceClient {
  const client = new ContextEngineServiceClient(address, credentials.createInsecure());
  clients.push(client);
  return client;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const REQUEST_TYPES: Record<string, { fromPartial(o: any): unknown }> = {
  getInfo: E.GetInfoRequest,
  bootstrap: E.BootstrapRequest,
  ingest: E.IngestRequest,
  ingestBatch: E.IngestBatchRequest,
  assemble: E.ContextEngineServiceAssembleRequest,
  compact: E.ContextEngineServiceCompactRequest,
  afterTurn: E.ContextEngineServiceAfterTurnRequest,
  maintain: E.ContextEngineServiceMaintainRequest,
  prepareSubagentSpawn: E.ContextEngineServicePrepareSubagentSpawnRequest,
  rollbackSubagentSpawn: E.ContextEngineServiceRollbackSubagentSpawnRequest,
  onSubagentEnded: E.OnSubagentEndedRequest,
  dispose: E.DisposeRequest,
};

/** One unary call with a partial request (normalised like a real client would). */
function call<Req, Res>(client: ContextEngineServiceClient, method: keyof typeof REQUEST_TYPES, req: Req, timeoutMs = 10_000): Promise<Res> {
  const request = REQUEST_TYPES[method].fromPartial(req);
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return callUnary<unknown, Res>(client, (client as any)[method], request, { address: "" }, { timeoutMs });
}

async function callError(p: Promise<unknown>): Promise<ServiceError> {
  try {
    await p;
  } catch (err) {
    return err as ServiceError;
  }
  throw new Error("expected the call to fail");
}

function msg(role: Role, text: string, tokenCount: number, id: string, extra: Partial<Message> = {}): Message {
  return textMessage(role, text, { id, tokenCount, ...extra });
}

const HealthClient = makeGenericClientConstructor(healthService, "Health");
async function healthOf(address: string): Promise<string> {
  const client = new HealthClient(address, credentials.createInsecure()) as Client & Record<string, unknown>;
  clients.push(client);
  const res = await callUnary<{ service: string }, { status: string | number }>(
    client,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the generic client's methods are untyped
    client.check as any,
    { service: "" },
    { address },
    { timeoutMs: 5_000 },
  );
  return typeof res.status === "number" ? ["UNKNOWN", "SERVING", "NOT_SERVING"][res.status] : res.status;
}

describe("serveEngine: ContextEngineService", () => {
  it("answers GetInfo with capabilities derived from the optional methods", async () => {
    const engine = await serve(
      minimal({
        info: { id: "caps", name: "Caps", version: "2.0.0", ownsCompaction: true, turnMaintenanceMode: "background", hostRequirements: ["llm-complete"] },
        afterTurn: () => undefined,
        onSubagentEnded: () => undefined,
        dispose: () => undefined,
      }),
    );
    expect(engine.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(engine.address).not.toBe("127.0.0.1:0");
    expect(engine.endpoint).toBe(engine.address);
    const { info } = await call<object, { info: Record<string, unknown> }>(engineClient(engine.address), "getInfo", {});
    expect(info).toEqual({
      id: "caps",
      name: "Caps",
      version: "2.0.0",
      ownsCompaction: true,
      turnMaintenanceMode: TurnMaintenanceMode.TURN_MAINTENANCE_MODE_BACKGROUND,
      capabilities: { bootstrap: false, ingestBatch: false, afterTurn: true, maintain: false, subagents: true, dispose: true, forget: false },
      hostRequirements: ["llm-complete"],
      protocolVersions: [1],
    });
    expect(engine.info).toEqual(info);
  });

  it("defaults: FOREGROUND maintenance, no capabilities, protocol version 1", async () => {
    const engine = await serve(minimal());
    const { info } = await call<object, { info: Record<string, unknown> }>(engineClient(engine.address), "getInfo", {});
    expect(info.turnMaintenanceMode).toBe(TurnMaintenanceMode.TURN_MAINTENANCE_MODE_FOREGROUND);
    expect(info.capabilities).toEqual({
      bootstrap: false,
      ingestBatch: false,
      afterTurn: false,
      maintain: false,
      subagents: false,
      dispose: false,
      forget: false,
    });
    expect(info.protocolVersions).toEqual([1]);
  });

  it("round-trips Assemble: the request arrives decoded, a partial answer is normalised", async () => {
    let seen: ContextEngineServiceAssembleRequest | undefined;
    let seenCtx: EngineCallContext | undefined;
    const engine = await serve(
      minimal({
        async assemble(req, ctx) {
          seen = req;
          seenCtx = ctx;
          return { messages: req.messages.slice(-1), systemPromptAddition: `budget ${req.tokenBudget}` };
        },
      }),
    );
    const messages = [msg(Role.ROLE_USER, "first", 5, "e1"), msg(Role.ROLE_ASSISTANT, "second", 7, "e2")];
    const res = await call<ContextEngineServiceAssembleRequest, ContextEngineServiceAssembleResponse>(engineClient(engine.address), "assemble", {
      session: { sessionId: "s1", sessionKey: "k", agentId: "a" },
      messages,
      tokenBudget: 100,
      availableTools: ["read"],
      model: "m",
      prompt: "hi",
      runtimeSettings: undefined,
      host: undefined,
    });
    expect(seen?.session?.sessionId).toBe("s1");
    expect(seen?.messages.map((m) => m.id)).toEqual(["e1", "e2"]);
    expect(seen?.tokenBudget).toBe(100);
    expect(seenCtx?.method).toBe("Assemble");
    expect(seenCtx?.host).toBeUndefined();
    expect(seenCtx?.deadlineMs).toBeGreaterThan(Date.now());
    expect(res.messages).toEqual([messages[1]]);
    // estimatedTokens defaults to the sum of the returned messages' token counts.
    expect(res.estimatedTokens).toBe(7);
    expect(res.systemPromptAddition).toBe("budget 100");
    expect(res.promptAuthority).toBe(PromptAuthority.PROMPT_AUTHORITY_UNSPECIFIED);
  });

  it("keepMessages answers the request's messages by id; estimatedTokens then counts the kept ones too", async () => {
    const note = msg(Role.ROLE_USER, "a note", 2, "");
    const engine = await serve(minimal({ assemble: (req) => keepMessages(req, [note, req.messages[0], req.messages[2]]) }));
    const messages = [msg(Role.ROLE_USER, "first", 5, "e1"), msg(Role.ROLE_ASSISTANT, "second", 7, "e2"), msg(Role.ROLE_USER, "third", 11, "e3")];
    const res = await call<ContextEngineServiceAssembleRequest, ContextEngineServiceAssembleResponse>(
      engineClient(engine.address),
      "assemble",
      E.ContextEngineServiceAssembleRequest.fromPartial({ messages, tokenBudget: 100 }),
    );
    expect(res.messages.map((m) => m.content)).toEqual([note.content]);
    expect(res.keptEntryIds).toEqual(["e1", "e3"]);
    expect(res.estimatedTokens).toBe(2 + 5 + 11);
    // Any other shape is the echo form: an added message after a kept one, or out of order.
    const req = { messages };
    expect(keepMessages(req, [messages[0], note])).toEqual({ messages: [messages[0], note], keptEntryIds: [] });
    expect(keepMessages(req, [messages[2], messages[0]]).keptEntryIds).toEqual([]);
    expect(keepMessages(req, [{ ...messages[1] }]).keptEntryIds).toEqual([]);
  });

  it("answers UNIMPLEMENTED for a missing optional RPC, and defaults for ingest and partial subagent support", async () => {
    const engine = await serve(minimal({ prepareSubagentSpawn: () => ({ rollbackHandle: "h1" }) }));
    const client = engineClient(engine.address);
    for (const method of ["bootstrap", "ingestBatch", "afterTurn", "maintain", "dispose"] as const) {
      const err = await callError(call(client, method, {}));
      expect(err.code, method).toBe(status.UNIMPLEMENTED);
      expect(err.details).toContain("test-engine");
    }
    expect(await call(client, "ingest", {})).toEqual({ ingested: true });
    expect(await call(client, "prepareSubagentSpawn", {})).toEqual({ rollbackHandle: "h1" });
    expect(await call(client, "rollbackSubagentSpawn", { rollbackHandle: "h1" })).toEqual({});
    expect(await call(client, "onSubagentEnded", {})).toEqual({});
  });

  it("keeps a ContextdError's status and maps other errors to INTERNAL", async () => {
    const engine = await serve(
      minimal({
        compact: () => {
          throw new FailedPreconditionError("no summarizer configured");
        },
        ingest: async () => {
          throw new NotFoundError("unknown session");
        },
        assemble: async () => {
          throw new Error("boom");
        },
        maintain: () => {
          throw "a string";
        },
      }),
    );
    const client = engineClient(engine.address);
    const compact = await callError(call(client, "compact", {}));
    expect(compact.code).toBe(status.FAILED_PRECONDITION);
    expect(compact.details).toBe("no summarizer configured");
    expect((await callError(call(client, "ingest", {}))).code).toBe(status.NOT_FOUND);
    const assemble = await callError(call(client, "assemble", {}));
    expect(assemble.code).toBe(status.INTERNAL);
    expect(assemble.details).toBe("internal error: boom");
    const maintain = await callError(call(client, "maintain", {}));
    expect(maintain.code).toBe(status.INTERNAL);
    expect(maintain.details).toBe("internal error: a string");
    // The engine is still healthy after failures.
    expect((await call<object, { info: { id: string } }>(client, "getInfo", {})).info.id).toBe("test-engine");
  });

  it("maps an answer that is not an object to INTERNAL", async () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const engine = await serve(minimal({ assemble: (() => 42) as any }));
    const err = await callError(call(engineClient(engine.address), "assemble", {}));
    expect(err.code).toBe(status.INTERNAL);
    expect(err.details).toMatch(/returned a number/);
  });

  it("fires the AbortSignal when the client cancels", async () => {
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    let fired: { reason: unknown; at: number } | undefined;
    const engine = await serve(
      minimal({
        assemble: (_req, ctx) =>
          new Promise((_resolve, reject) => {
            entered();
            ctx.signal.addEventListener("abort", () => {
              fired = { reason: ctx.signal.reason, at: Date.now() };
              reject(ctx.signal.reason);
            });
          }),
      }),
    );
    const client = engineClient(engine.address);
    const result = new Promise<ServiceError | null>((resolve) => {
      const c = client.assemble(E.ContextEngineServiceAssembleRequest.fromPartial({}), new Metadata(), { deadline: Date.now() + 30_000 }, (err) =>
        resolve(err),
      );
      void inside.then(() => c.cancel());
    });
    const err = await result;
    const cancelledAt = Date.now();
    expect(err?.code).toBe(status.CANCELLED);
    await vi.waitFor(() => expect(fired).toBeDefined(), { timeout: 5_000 });
    expect((fired!.reason as Error).name).toBe("AbortError");
    expect(fired!.at - cancelledAt).toBeLessThan(5_000);
  });

  it("fires the AbortSignal when the deadline passes, and the client gets DEADLINE_EXCEEDED", async () => {
    let fired: { reason: unknown; at: number; deadlineMs: number } | undefined;
    const engine = await serve(
      minimal({
        assemble: (_req, ctx) =>
          new Promise((_resolve, reject) => {
            ctx.signal.addEventListener("abort", () => {
              fired = { reason: ctx.signal.reason, at: Date.now(), deadlineMs: ctx.deadlineMs };
              reject(ctx.signal.reason);
            });
          }),
      }),
    );
    const started = Date.now();
    const deadline = started + 400;
    const err = await new Promise<ServiceError | null>((resolve) =>
      engineClient(engine.address).assemble(E.ContextEngineServiceAssembleRequest.fromPartial({}), new Metadata(), { deadline }, (e) => resolve(e)),
    );
    expect(err?.code).toBe(status.DEADLINE_EXCEEDED);
    expect(Date.now() - started).toBeLessThan(5_000);
    await vi.waitFor(() => expect(fired).toBeDefined(), { timeout: 5_000 });
    expect((fired!.reason as Error).name).toBe("TimeoutError");
    expect(Math.abs(fired!.deadlineMs - deadline)).toBeLessThan(100);
    expect(fired!.at).toBeGreaterThanOrEqual(deadline - 50);
    expect(fired!.at - deadline).toBeLessThan(3_000);
  });

  it("drops an answer produced after the deadline", async () => {
    let finished = false;
    const engine = await serve(
      minimal({
        // Ignores the signal on purpose and answers late.
        assemble: async () => {
          await new Promise((r) => setTimeout(r, 600));
          finished = true;
          return { messages: [] };
        },
      }),
    );
    const client = engineClient(engine.address);
    const err = await callError(call(client, "assemble", {}, 200));
    expect(err.code).toBe(status.DEADLINE_EXCEEDED);
    await vi.waitFor(() => expect(finished).toBe(true), { timeout: 5_000 });
    // The late answer did not break the server.
    expect((await call<object, { info: { id: string } }>(client, "getInfo", {})).info.id).toBe("test-engine");
  });

  it("serves grpc.health.v1: SERVING, then NOT_SERVING via setHealth", async () => {
    const engine = await serve(minimal());
    expect(await healthOf(engine.address)).toBe("SERVING");
    engine.setHealth(false);
    expect(await healthOf(engine.address)).toBe("NOT_SERVING");
    engine.setHealth(true);
    expect(await healthOf(engine.address)).toBe("SERVING");
    await engine.stop();
    const err = await callError(healthOf(engine.address));
    expect(err.code).toBe(status.UNAVAILABLE);
  });

  it("serves on a unix socket", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "engine-sdk-"));
    try {
      const target = `unix:${path.join(dir, "engine.sock")}`;
      const engine = await serve(minimal(), { listen: target });
      expect(engine.address).toBe(target);
      expect(engine.endpoint).toBe(target);
      expect((await call<object, { info: { id: string } }>(engineClient(target), "getInfo", {})).info.id).toBe("test-engine");
      await engine.stop();
      // A socket file left behind (as after a crash) does not prevent serving again.
      const again = await serve(minimal(), { listen: target });
      expect((await call<object, { info: { id: string } }>(engineClient(target), "getInfo", {})).info.id).toBe("test-engine");
      await again.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reads the listen address from CONTEXTD_ENGINE_LISTEN and honours advertise", async () => {
    const engine = await serve(minimal(), { env: { CONTEXTD_ENGINE_LISTEN: "127.0.0.1:0", CONTEXTD_ENGINE_ADVERTISE: "engine.internal:7000" } });
    expect(engine.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(engine.endpoint).toBe("engine.internal:7000");
    expect(engine.registration).toBeUndefined();
    await expect(engine.registered).resolves.toBeNull();
  });

  it("reports a taken port clearly", async () => {
    const first = await serve(minimal());
    await expect(serve(minimal(), { listen: first.address })).rejects.toThrow(`cannot listen on ${first.address}`);
  });

  it("stop() drains an in-flight call before shutting down", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const engine = await serve(
      minimal({
        assemble: async () => {
          entered();
          await gate;
          return { systemPromptAddition: "drained" };
        },
      }),
    );
    const pending = call<object, ContextEngineServiceAssembleResponse>(engineClient(engine.address), "assemble", {});
    await inside;
    const stopped = engine.stop();
    setTimeout(release, 200);
    expect((await pending).systemPromptAddition).toBe("drained");
    await stopped;
  });
});

/** A HostService test double: checks the bearer token and records what engines send. */
async function startFakeHost(token: string) {
  const seen: { method: string; auth: string; deadlineMs: number; req: unknown }[] = [];
  const record = (method: string, c: { metadata: Metadata; getDeadline(): Date | number; request: unknown }) => {
    const auth = String(c.metadata.get("authorization")[0] ?? "");
    const d = c.getDeadline();
    seen.push({ method, auth, deadlineMs: d instanceof Date ? d.getTime() : d, req: c.request });
    return auth === `Bearer ${token}`;
  };
  const unauth = { code: status.UNAUTHENTICATED, details: "bad host token" };
  const impl: HostServiceServer = {
    readTranscript: (c, cb) => {
      if (!record("ReadTranscript", c)) return cb(unauth, null);
      const req = c.request as ReadTranscriptRequest;
      const page = Number(req.pageToken || "0");
      const entry = (n: number) =>
        TranscriptEntry.fromPartial({ id: `e${n}`, seq: n, entry: { $case: "message" as const, value: msg(Role.ROLE_USER, `m${n}`, 1, `e${n}`) } });
      cb(null, { entries: [entry(page * 2 + 1), entry(page * 2 + 2)], nextPageToken: page < 2 ? String(page + 1) : "" });
    },
    searchTranscript: (c, cb) => {
      if (!record("SearchTranscript", c)) return cb(unauth, null);
      const hit = { entryId: "e1", sessionId: c.request.session?.sessionId ?? "", seq: 1, snippet: `«${c.request.query}»`, score: 1 };
      cb(null, { hits: [{ role: Role.ROLE_USER, compaction: false, timestampMs: 0, hidden: false, ...hit }], nextPageToken: "" });
    },
    rewriteTranscriptEntries: (c, cb) => (record("RewriteTranscriptEntries", c) ? cb(null, { rewrittenEntries: 1, bytesFreed: 10 }) : cb(unauth, null)),
    delegateCompaction: (c, cb) => {
      if (!record("DelegateCompaction", c)) return cb(unauth, null);
      const req = c.request as DelegateCompactionRequest;
      cb(null, {
        ok: true,
        compacted: true,
        reason: `budget ${req.tokenBudget} force ${req.force} session ${req.session?.sessionId}`,
        result: { summary: "sum", firstKeptEntryId: "e3", tokensBefore: 100, tokensAfter: 20, details: undefined },
      });
    },
    complete: (c, cb) => (record("Complete", c) ? cb({ code: status.FAILED_PRECONDITION, details: "no summarizer model configured" }, null) : cb(unauth, null)),
  };
  const server = new Server();
  server.addService(HostServiceService, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  servers.push(server);
  return { endpoint: `127.0.0.1:${port}`, seen };
}

describe("serveEngine: HostClient", () => {
  it("calls back into the host with the HostContext token and a bounded deadline", async () => {
    const host = await startFakeHost("host-token");
    let transcriptIds: string[] = [];
    const engine = await serve(
      minimal({
        async assemble(req, ctx) {
          const entries = await ctx.host!.readWholeTranscript(undefined, { pageSize: 2 });
          transcriptIds = entries.map((e) => e.id);
          const rewrite = await ctx.host!.rewriteTranscriptEntries({ rewrites: [{ entryId: "e1", message: req.messages[0] }] });
          return { systemPromptAddition: `rewrote ${rewrite.rewrittenEntries}` };
        },
        compact: delegateCompactionToHost,
        async maintain(_req, ctx) {
          await ctx.host!.complete({ system: "summarize", messages: [] });
          return { changed: true };
        },
      }),
    );
    const client = engineClient(engine.address);
    const expiresAtMs = Date.now() + 20_000;
    const hostCtx = { endpoint: host.endpoint, token: "host-token", expiresAtMs };
    const session = { sessionId: "s1", sessionKey: "", agentId: "" };

    const assembled = await call<object, ContextEngineServiceAssembleResponse>(
      client,
      "assemble",
      { session, messages: [msg(Role.ROLE_USER, "x", 1, "e1")], host: hostCtx },
      30_000,
    );
    expect(assembled.systemPromptAddition).toBe("rewrote 1");
    expect(transcriptIds).toEqual(["e1", "e2", "e3", "e4", "e5", "e6"]);
    const reads = host.seen.filter((s) => s.method === "ReadTranscript");
    expect(reads).toHaveLength(3);
    for (const s of host.seen) {
      expect(s.auth).toBe("Bearer host-token");
      // Never later than the HostContext expiry (the engine call's own deadline was 30 s away);
      // the wire carries a relative timeout, so allow a few ms of transit.
      expect(s.deadlineMs).toBeLessThanOrEqual(expiresAtMs + 50);
      expect(s.deadlineMs).toBeGreaterThan(expiresAtMs - 5_000);
      expect((s.req as { session?: { sessionId: string } }).session?.sessionId).toBe("s1");
    }

    const compacted = await call<object, { ok: boolean; compacted: boolean; reason: string; result?: { firstKeptEntryId: string } }>(client, "compact", {
      session,
      tokenBudget: 500,
      force: true,
      host: hostCtx,
    });
    expect(compacted).toMatchObject({ ok: true, compacted: true, reason: "budget 500 force true session s1" });
    expect(compacted.result?.firstKeptEntryId).toBe("e3");

    // The host's status travels through the engine's answer.
    const err = await callError(call(client, "maintain", { session, host: hostCtx }));
    expect(err.code).toBe(status.FAILED_PRECONDITION);
    expect(err.details).toContain("no summarizer model configured");
  });

  it("bounds host calls by the engine call's deadline when it is earlier than the HostContext expiry", async () => {
    const host = await startFakeHost("t");
    const engine = await serve(
      minimal({
        async assemble(_req, ctx) {
          await ctx.host!.readTranscript({ pageSize: 1 });
          return {};
        },
      }),
    );
    const before = Date.now();
    await call(
      engineClient(engine.address),
      "assemble",
      { session: { sessionId: "s" }, host: { endpoint: host.endpoint, token: "t", expiresAtMs: Date.now() + 600_000 } },
      3_000,
    );
    expect(host.seen[0].deadlineMs).toBeLessThanOrEqual(before + 3_100);
  });

  it("searches the engine call's session through the host, with the host token, the session defaulting to the call's", async () => {
    const host = await startFakeHost("t");
    let snippet = "";
    const engine = await serve(
      minimal({
        async assemble(_req, ctx) {
          snippet = (await ctx.host!.searchTranscript({ query: "BILL-4821" })).hits[0].snippet;
          return {};
        },
      }),
    );
    await call(
      engineClient(engine.address),
      "assemble",
      { session: { sessionId: "s9" }, host: { endpoint: host.endpoint, token: "t", expiresAtMs: Date.now() + 60_000 } },
      10_000,
    );
    expect(snippet).toBe("«BILL-4821»");
    expect(host.seen).toMatchObject([{ method: "SearchTranscript", auth: "Bearer t", req: { session: { sessionId: "s9" }, query: "BILL-4821" } }]);
  });

  it("refuses Compact delegation without a HostContext", async () => {
    const engine = await serve(minimal({ compact: delegateCompactionToHost }));
    const err = await callError(call(engineClient(engine.address), "compact", { tokenBudget: 10 }));
    expect(err.code).toBe(status.FAILED_PRECONDITION);
  });
});

describe("the example engine of docs/engines.md (engines/newest-first/main.ts)", () => {
  it("keeps the pinned messages, then the newest messages that fit, and never starts with a tool result", async () => {
    // engines/newest-first/main.ts itself (docs/engines.md shows the same object: test/readme checks it).
    const engine = await serveEngine(newestFirst, { registry: "", handleSignals: false, logger });
    running.push(engine);
    const messages = [
      msg(Role.ROLE_USER, "please read the file", 10, "e1"),
      msg(Role.ROLE_ASSISTANT, "", 10, "e2", { content: [toolCallBlock("c1", "read", "{}")] }),
      msg(Role.ROLE_TOOL_RESULT, "file contents", 30, "e3", { toolCallId: "c1", toolName: "read" }),
      msg(Role.ROLE_ASSISTANT, "done", 5, "e4"),
    ];
    const assemble = (view: Message[], tokenBudget: number) =>
      call<object, ContextEngineServiceAssembleResponse>(engineClient(engine.address), "assemble", { messages: view, tokenBudget });
    // What the model sees: messages the engine sent, then those it kept by id (kept_entry_ids).
    const ids = (a: ContextEngineServiceAssembleResponse) => [...a.messages.map((m) => m.id), ...a.keptEntryIds];
    const res = await assemble(messages, 40);
    expect(res.messages).toEqual([]);
    expect(res.keptEntryIds).toEqual(["e4"]);
    expect(res.estimatedTokens).toBe(5);
    const all = await assemble(messages, 100);
    expect(ids(all)).toEqual(["e1", "e2", "e3", "e4"]);
    expect(all.estimatedTokens).toBe(55);
    expect(all.promptAuthority).toBe(PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED);

    // The host's view after a compaction: pinned system message, summary, kept entries (a system
    // message among them). The pinned ones come first and count; the middle system message moves up
    // (still in the view's order: e5 is not kept, so the answer is by id).
    const view = [
      msg(Role.ROLE_SYSTEM, "rules", 8, "s1"),
      summaryMessage("earlier work", "c9", 12),
      msg(Role.ROLE_USER, "next", 10, "e5"),
      msg(Role.ROLE_SYSTEM, "now in French", 4, "s2"),
      ...messages,
    ];
    const pinned = await assemble(view, 40);
    expect(ids(pinned)).toEqual(["s1", "c9", "s2", "e4"]);
    expect(pinned.messages).toEqual([]);
    expect(pinned.estimatedTokens).toBe(8 + 12 + 4 + 5);
    // The pinned messages alone over the budget: all of them, nothing else, flagged.
    const over = await assemble(view, 20);
    expect(ids(over)).toEqual(["s1", "c9", "s2"]);
    expect(over.estimatedTokens).toBe(24);
    expect(over.promptAuthority).toBe(PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW);
  });
});
