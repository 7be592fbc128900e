/**
 * Self-test of the misbehaving test engines (test/engines/python, test/engines/ts) and their
 * harness (test/helpers/engine-process.ts): each engine runs as a real process, without contextd,
 * and is called directly with the generated TS client, a grpc.health.v1 client, and in-process fake
 * HostService / RegistryService servers.
 */
import fs from "node:fs";
import path from "node:path";
import {
  credentials,
  makeGenericClientConstructor,
  Metadata,
  Server,
  ServerCredentials,
  status,
  type Client,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServiceError,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BootstrapRequest,
  ContextEngineServiceAfterTurnRequest,
  ContextEngineServiceAssembleRequest,
  ContextEngineServiceClient,
  ContextEngineServiceCompactRequest,
  ContextEngineServiceMaintainRequest,
  ContextEngineServicePrepareSubagentSpawnRequest,
  ContextEngineServiceRollbackSubagentSpawnRequest,
  GetInfoRequest,
  IngestBatchRequest,
  IngestRequest,
  OnSubagentEndedRequest,
} from "../../src/contract/gen/contextd/v1/engine.js";
import { DelegateCompactionResponse, HostServiceService, type DelegateCompactionRequest } from "../../src/contract/gen/contextd/v1/host.js";
import {
  DeregisterEngineResponse,
  RegisterEngineResponse,
  Refusal,
  RegistryServiceService,
  type RegisterEngineRequest,
} from "../../src/contract/gen/contextd/v1/registry.js";
import { Message, Role, textMessage } from "../../src/contract/index.js";
import { callUnary } from "../../src/sdk/grpc-call.js";
import {
  compileTsEngine,
  ensurePythonEngineStubs,
  pythonEnginesAvailable,
  readLeakedHostContext,
  startEngine,
  type EngineProcess,
} from "../helpers/engine-process.js";
import { eventually } from "../helpers/registry-client.js";

const HealthClient = makeGenericClientConstructor(healthService, "Health");

// Both engines, always: without Debian's python3 and grpc this throws and the file fails (never skips).
pythonEnginesAvailable();
const kinds = ["python", "ts"] as const;

const clients: Client[] = [];
const servers: Server[] = [];
const engines: EngineProcess[] = [];

afterAll(async () => {
  for (const c of clients) c.close();
  for (const s of servers) s.forceShutdown();
  await Promise.all(engines.map((e) => e.kill9()));
});

function engineClient(address: string): ContextEngineServiceClient {
  const c = new ContextEngineServiceClient(address, credentials.createInsecure());
  clients.push(c);
  return c;
}

function healthCheck(address: string, service = "", timeoutMs = 2_000): Promise<string> {
  const c = new HealthClient(address, credentials.createInsecure());
  clients.push(c);
  return new Promise((resolve, reject) => {
    (c as unknown as { check: (...a: unknown[]) => void }).check(
      { service },
      new Metadata(),
      { deadline: new Date(Date.now() + timeoutMs) },
      (err: ServiceError | null, res: { status: string }) => (err ? reject(err) : resolve(res.status)),
    );
  });
}

async function startServer(service: object, impl: Record<string, unknown>, address = "127.0.0.1:0"): Promise<{ server: Server; address: string }> {
  const server = new Server();
  server.addService(service as never, impl as UntypedServiceImplementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  servers.push(server);
  return { server, address: `127.0.0.1:${port}` };
}

/** Oldest first: u1, a1 (calls c1), r1 (result of c1), a2, u2 — 10, 10, 30, 10, 10 tokens. */
function conversation(): Message[] {
  return [
    textMessage(Role.ROLE_USER, "read the file", { id: "u1", tokenCount: 10 }),
    Message.fromPartial({
      id: "a1",
      role: Role.ROLE_ASSISTANT,
      content: [{ block: { $case: "toolCall", value: { id: "c1", name: "read", argumentsJson: "{}" } } }],
      tokenCount: 10,
    }),
    textMessage(Role.ROLE_TOOL_RESULT, "file contents", { id: "r1", toolCallId: "c1", toolName: "read", tokenCount: 30 }),
    textMessage(Role.ROLE_ASSISTANT, "done", { id: "a2", tokenCount: 10 }),
    textMessage(Role.ROLE_USER, "thanks", { id: "u2", tokenCount: 10 }),
  ];
}

function expectWellFormed(messages: Message[], budget: number): void {
  const total = messages.reduce((s, m) => s + m.tokenCount, 0);
  expect(total).toBeLessThanOrEqual(budget);
  expect(messages[0]?.role).not.toBe(Role.ROLE_TOOL_RESULT);
  const ids = messages.map((m) => m.id);
  expect(ids.includes("a1")).toBe(ids.includes("r1"));
}

beforeAll(async () => {
  // Warm up outside the per-test timeouts: stubs and the TS build.
  if (kinds.includes("python")) ensurePythonEngineStubs();
  await compileTsEngine();
}, 120_000);

describe.each(kinds)("%s misbehaving engine", (kind) => {
  let engine: EngineProcess;
  let client: ContextEngineServiceClient;
  const call = <Req, Res>(method: (...a: never[]) => unknown, req: Req, timeoutMs = 5_000) =>
    callUnary<Req, Res>(client, method as never, req, { address: engine.address }, { timeoutMs });

  // A fake HostService: records what the engine sent.
  const hostCalls: Array<{ req: DelegateCompactionRequest; auth: string }> = [];
  let hostAddress = "";

  beforeAll(async () => {
    const host = await startServer(HostServiceService, {
      delegateCompaction: (c: ServerUnaryCall<DelegateCompactionRequest, unknown>, cb: sendUnaryData<DelegateCompactionResponse>) => {
        hostCalls.push({ req: c.request, auth: String(c.metadata.get("authorization")[0] ?? "") });
        cb(
          null,
          DelegateCompactionResponse.fromPartial({
            ok: true,
            compacted: true,
            reason: "host compacted",
            result: { summary: "host summary", firstKeptEntryId: "a2" },
          }),
        );
      },
    });
    hostAddress = host.address;
    engine = await startEngine(kind, { engineId: `misbehaving-${kind}` });
    engines.push(engine);
    client = engineClient(engine.address);
  });

  it("answers GetInfo and reports it serves", async () => {
    expect(engine.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(await engine.registered).toMatchObject({ ok: false, refusal: "NO_REGISTRY" });
    const { info } = await call<GetInfoRequest, { info: Record<string, unknown> }>(client.getInfo, GetInfoRequest.fromPartial({}));
    expect(info).toMatchObject({ id: `misbehaving-${kind}`, name: "Misbehaving test engine", ownsCompaction: false, protocolVersions: [1] });
    expect(Object.values(info.capabilities as Record<string, boolean>).every((v) => v === false)).toBe(true);
    expect(await healthCheck(engine.address)).toBe("SERVING");
    expect(await healthCheck(engine.address, "contextd.v1.ContextEngineService")).toBe("SERVING");
  });

  it("ok: Assemble keeps the newest messages that fit, with tool pairs together", async () => {
    for (const [budget, expected] of [
      [65, ["a1", "r1", "a2", "u2"]],
      [55, ["a2", "u2"]],
      [15, ["u2"]],
      [1000, ["u1", "a1", "r1", "a2", "u2"]],
    ] as const) {
      const res = await call<ContextEngineServiceAssembleRequest, { messages: Message[]; estimatedTokens: number }>(
        client.assemble,
        ContextEngineServiceAssembleRequest.fromPartial({ session: { sessionId: "s1" }, messages: conversation(), tokenBudget: budget }),
      );
      expect(res.messages.map((m) => m.id)).toEqual(expected);
      expect(res.estimatedTokens).toBe(res.messages.reduce((s, m) => s + m.tokenCount, 0));
      expectWellFormed(res.messages, budget);
    }
    const ing = await call<IngestRequest, { ingested: boolean }>(client.ingest, IngestRequest.fromPartial({ session: { sessionId: "s1" } }));
    expect(ing.ingested).toBe(true);
    expect(engine.events()).toContainEqual({ event: "call", op: "assemble", mode: "ok" });
  });

  it("ok: Compact delegates to the host with the HostContext token; the leak hook writes the HostContext", async () => {
    const leak = path.join(engine.dir, "leak.json");
    engine.control({ leak_host_token_to: leak });
    const expiresAtMs = Date.now() + 5_000;
    const res = await call<ContextEngineServiceCompactRequest, { ok: boolean; compacted: boolean; result?: { summary: string; firstKeptEntryId: string } }>(
      client.compact,
      ContextEngineServiceCompactRequest.fromPartial({
        session: { sessionId: "s-compact", agentId: "agent-1" },
        messages: conversation(),
        tokenBudget: 40,
        force: true,
        currentTokenCount: 70,
        host: { endpoint: hostAddress, token: "host-token-1", expiresAtMs },
      }),
    );
    expect(res).toMatchObject({ ok: true, compacted: true, result: { summary: "host summary", firstKeptEntryId: "a2" } });
    expect(hostCalls.at(-1)?.auth).toBe("Bearer host-token-1");
    expect(hostCalls.at(-1)?.req).toMatchObject({ session: { sessionId: "s-compact" }, tokenBudget: 40, force: true, currentTokenCount: 70 });
    expect(readLeakedHostContext(leak)).toMatchObject({
      op: "compact",
      endpoint: hostAddress,
      token: "host-token-1",
      expires_at_ms: expiresAtMs,
      session_id: "s-compact",
    });
    engine.control({});
  });

  it("throw: answers INTERNAL", async () => {
    engine.control({ assemble: "throw" });
    await expect(call(client.assemble, ContextEngineServiceAssembleRequest.fromPartial({ messages: conversation(), tokenBudget: 100 }))).rejects.toMatchObject({
      code: status.INTERNAL,
      details: expect.stringContaining("told to throw"),
    });
  });

  it("garbage: Assemble goes over the budget, Compact names an unknown entry", async () => {
    engine.control({ assemble: "garbage", compact: "garbage" });
    const res = await call<ContextEngineServiceAssembleRequest, { messages: Message[]; estimatedTokens: number }>(
      client.assemble,
      ContextEngineServiceAssembleRequest.fromPartial({ messages: conversation(), tokenBudget: 50 }),
    );
    expect(res.estimatedTokens).toBe(70 + 1050);
    expect(res.messages.at(-1)?.id).toBe("garbage-padding");
    const c = await call<ContextEngineServiceCompactRequest, { compacted: boolean; result?: { firstKeptEntryId: string } }>(
      client.compact,
      ContextEngineServiceCompactRequest.fromPartial({ messages: conversation(), tokenBudget: 50 }),
    );
    expect(c).toMatchObject({ compacted: true, result: { firstKeptEntryId: "no-such-entry" } });
  });

  it("hang: the caller's deadline passes (DEADLINE_EXCEEDED) and the engine sees the cancellation", async () => {
    engine.control({ assemble: "hang" });
    const before = engine.events().length;
    const started = Date.now();
    await expect(
      call(client.assemble, ContextEngineServiceAssembleRequest.fromPartial({ messages: conversation(), tokenBudget: 100 }), 300),
    ).rejects.toMatchObject({ code: status.DEADLINE_EXCEEDED });
    expect(Date.now() - started).toBeLessThan(2_000);
    const cancelled = await engine.waitForEvent((e, i) => i >= before && e.event === "cancelled" && e.op === "assemble", 3_000);
    expect(cancelled.reason).toBe("deadline");
    expect(engine.events().slice(before)).toContainEqual({ event: "call", op: "assemble", mode: "hang" });
  });

  it("slow: answers after ~300 ms, and stops early when the caller cancels", async () => {
    engine.control({ compact: "slow", assemble: "slow" });
    const started = Date.now();
    const res = await call<ContextEngineServiceAssembleRequest, { messages: Message[] }>(
      client.assemble,
      ContextEngineServiceAssembleRequest.fromPartial({ messages: conversation(), tokenBudget: 15 }),
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
    expect(res.messages.map((m) => m.id)).toEqual(["u2"]);
    expect(engine.events()).toContainEqual({ event: "answered", op: "assemble", mode: "slow" });

    const before = engine.events().length;
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 100);
    await expect(
      callUnary(
        client,
        client.compact as never,
        ContextEngineServiceCompactRequest.fromPartial({ messages: conversation() }),
        { address: engine.address },
        {
          timeoutMs: 5_000,
          signal: abort.signal,
        },
      ),
    ).rejects.toMatchObject({ code: status.CANCELLED });
    const cancelled = await engine.waitForEvent((e, i) => i >= before && e.event === "cancelled" && e.op === "compact", 3_000);
    expect(cancelled.reason).toBe("cancelled");
  });

  it("ignore_cancel: the caller times out while the engine keeps sleeping, then answers late", async () => {
    engine.control({ assemble: "ignore_cancel", ignore_cancel_ms: 600 });
    const before = engine.events().length;
    await expect(
      call(client.assemble, ContextEngineServiceAssembleRequest.fromPartial({ messages: conversation(), tokenBudget: 100 }), 200),
    ).rejects.toMatchObject({ code: status.DEADLINE_EXCEEDED });
    // (The TS engine also logs each Assemble's request, `assemble_request`: not an answer.)
    expect(
      engine
        .events()
        .slice(before)
        .filter((e) => e.event !== "assemble_request"),
    ).toEqual([{ event: "call", op: "assemble", mode: "ignore_cancel" }]);
    // Still serving other calls meanwhile.
    expect(await healthCheck(engine.address)).toBe("SERVING");
    await engine.waitForEvent((e, i) => i >= before && e.event === "answered_late" && e.op === "assemble", 3_000);
    expect(
      engine
        .events()
        .slice(before)
        .map((e) => e.event),
    ).not.toContain("cancelled");
  });

  it("health follows the control file", async () => {
    engine.control({ health: "NOT_SERVING" });
    expect(await healthCheck(engine.address)).toBe("NOT_SERVING");
    expect(await healthCheck(engine.address, "contextd.v1.ContextEngineService")).toBe("NOT_SERVING");
    engine.control({});
    expect(await healthCheck(engine.address)).toBe("SERVING");
  });

  it("crash: the process exits (code 3) mid-call", async () => {
    engine.control({ ingest: "crash" });
    await expect(call(client.ingest, IngestRequest.fromPartial({ session: { sessionId: "s1" } }))).rejects.toMatchObject({
      code: status.UNAVAILABLE,
    });
    expect(await engine.exited).toBe(3);
    expect(engine.events()).toContainEqual({ event: "call", op: "ingest", mode: "crash" });
  });
});

describe.each(kinds)("%s misbehaving engine with a registry and its own compaction", (kind) => {
  it("registers (retrying until the registry is up), compacts itself, deregisters on stop", async () => {
    const registers: Array<{ req: RegisterEngineRequest; auth: string }> = [];
    const deregisters: string[] = [];
    const registryImpl = {
      registerEngine: (c: ServerUnaryCall<RegisterEngineRequest, unknown>, cb: sendUnaryData<RegisterEngineResponse>) => {
        registers.push({ req: c.request, auth: String(c.metadata.get("authorization")[0] ?? "") });
        cb(null, RegisterEngineResponse.fromPartial({ ok: true, refusal: Refusal.REFUSAL_NONE, protocolVersion: 1 }));
      },
      deregisterEngine: (c: ServerUnaryCall<{ engineId: string }, unknown>, cb: sendUnaryData<DeregisterEngineResponse>) => {
        deregisters.push(c.request.engineId);
        cb(null, DeregisterEngineResponse.fromPartial({ deregistered: true }));
      },
    };
    // Reserve an address, close it, start the engine against it, then bring the registry up there.
    const probe = await startServer(RegistryServiceService, {});
    const registryAddress = probe.address;
    probe.server.forceShutdown();

    const engine = await startEngine(kind, {
      engineId: `owner-${kind}`,
      registry: registryAddress,
      owner: "acme",
      ownerToken: "acme-secret",
      ownsCompaction: true,
    });
    engines.push(engine);
    // Its first attempt has failed (both engines log "…; retrying" for it) before the registry comes up.
    await eventually(async () => /; retrying/.test(engine.logs()), 15_000);
    await startServer(RegistryServiceService, registryImpl, registryAddress);

    expect(await engine.registered).toMatchObject({ ok: true, refusal: "REFUSAL_NONE" });
    expect(registers.at(-1)).toMatchObject({
      auth: "Bearer acme-secret",
      req: { engineId: `owner-${kind}`, owner: "acme", endpoint: engine.address, allowSameOwnerRefresh: true, protocolVersions: [1] },
    });

    const client = engineClient(engine.address);
    const info = await callUnary<GetInfoRequest, { info: { ownsCompaction: boolean } }>(client, client.getInfo as never, GetInfoRequest.fromPartial({}), {
      address: engine.address,
    });
    expect(info.info.ownsCompaction).toBe(true);
    const res = await callUnary<ContextEngineServiceCompactRequest, { compacted: boolean; result?: { summary: string; firstKeptEntryId: string } }>(
      client,
      client.compact as never,
      ContextEngineServiceCompactRequest.fromPartial({ messages: conversation(), tokenBudget: 30 }),
      { address: engine.address },
    );
    expect(res).toMatchObject({ compacted: true, result: { summary: "test summary", firstKeptEntryId: "u2" } });

    await engine.stop();
    expect(await engine.exited).toBe(0);
    expect(deregisters).toEqual([`owner-${kind}`]);
    expect(engine.events()).toContainEqual(expect.objectContaining({ event: "stopping" }));
    expect(fs.existsSync(engine.controlPath)).toBe(true);
  });
});

describe.each(kinds)("%s misbehaving engine: optional RPCs, wire faults, GetInfo and health modes", (kind) => {
  let engine: EngineProcess;
  let client: ContextEngineServiceClient;
  const call = <Req, Res>(method: (...a: never[]) => unknown, req: Req, timeoutMs = 5_000) =>
    callUnary<Req, Res>(client, method as never, req, { address: engine.address }, { timeoutMs });
  const rewrites: Array<{ entryIds: string[]; auth: string }> = [];
  let hostAddress = "";

  beforeAll(async () => {
    // A fake HostService that knows no entries: RewriteTranscriptEntries answers NOT_FOUND.
    const host = await startServer(HostServiceService, {
      rewriteTranscriptEntries: (c: ServerUnaryCall<{ rewrites: Array<{ entryId: string }> }, unknown>, cb: sendUnaryData<unknown>) => {
        rewrites.push({ entryIds: c.request.rewrites.map((r) => r.entryId), auth: String(c.metadata.get("authorization")[0] ?? "") });
        cb({ code: status.NOT_FOUND, details: `entry "${c.request.rewrites[0]?.entryId}" not found` }, null);
      },
    });
    hostAddress = host.address;
    engine = await startEngine(kind, { engineId: `capable-${kind}`, capabilities: "all" });
    engines.push(engine);
    client = engineClient(engine.address);
  });

  it("capabilities: all optional RPCs are advertised and follow their control key", async () => {
    const { info } = await call<GetInfoRequest, { info: { capabilities: Record<string, boolean> } }>(client.getInfo, GetInfoRequest.fromPartial({}));
    expect(info.capabilities).toMatchObject({ bootstrap: true, ingestBatch: true, afterTurn: true, maintain: true, subagents: true });
    const session = { sessionId: "s-opt" };
    await call(client.bootstrap, BootstrapRequest.fromPartial({ session }));
    await call(client.ingestBatch, IngestBatchRequest.fromPartial({ session, messages: conversation() }));
    await call(client.afterTurn, ContextEngineServiceAfterTurnRequest.fromPartial({ session }));
    await call(client.maintain, ContextEngineServiceMaintainRequest.fromPartial({ session }));
    const spawn = await call<unknown, { rollbackHandle: string }>(
      client.prepareSubagentSpawn,
      ContextEngineServicePrepareSubagentSpawnRequest.fromPartial({ parent: session, child: { sessionId: "child-1" } }),
    );
    expect(spawn.rollbackHandle).toBe("mb-child-1");
    await call(client.rollbackSubagentSpawn, ContextEngineServiceRollbackSubagentSpawnRequest.fromPartial({ child: { sessionId: "child-1" } }));
    await call(client.onSubagentEnded, OnSubagentEndedRequest.fromPartial({ child: { sessionId: "child-1" } }));
    const ops = engine
      .events()
      .filter((e) => e.event === "call")
      .map((e) => e.op);
    expect(ops).toEqual(expect.arrayContaining(["bootstrap", "ingest", "after_turn", "maintain", "subagent"]));

    engine.control({ after_turn: "throw", subagent: "throw", bootstrap: "throw" });
    for (const [method, req] of [
      [client.afterTurn, ContextEngineServiceAfterTurnRequest.fromPartial({ session })],
      [client.onSubagentEnded, OnSubagentEndedRequest.fromPartial({ child: { sessionId: "child-1" } })],
      [client.bootstrap, BootstrapRequest.fromPartial({ session })],
    ] as const) {
      await expect(call(method as never, req)).rejects.toMatchObject({ code: status.INTERNAL, details: expect.stringContaining("told to throw") });
    }
    engine.control({});
  });

  it("garbage_bytes: the answer is bytes no protobuf message decodes from", async () => {
    engine.control({ assemble: "garbage_bytes", get_info: "garbage_bytes", health: "garbage_bytes" });
    const parseError = { code: status.INTERNAL, details: expect.stringContaining("parsing error") };
    await expect(call(client.assemble, ContextEngineServiceAssembleRequest.fromPartial({ messages: conversation(), tokenBudget: 100 }))).rejects.toMatchObject(
      parseError,
    );
    await expect(call(client.getInfo, GetInfoRequest.fromPartial({}))).rejects.toMatchObject(parseError);
    await expect(healthCheck(engine.address)).rejects.toMatchObject(parseError);
    engine.control({});
  });

  it("late: ignores cancellation and answers after the deadline, which goes nowhere", async () => {
    engine.control({ assemble: "late", late_ms: 100 });
    const before = engine.events().length;
    await expect(
      call(client.assemble, ContextEngineServiceAssembleRequest.fromPartial({ messages: conversation(), tokenBudget: 100 }), 200),
    ).rejects.toMatchObject({
      code: status.DEADLINE_EXCEEDED,
    });
    await engine.waitForEvent((e, i) => i >= before && e.event === "answered_late" && e.op === "assemble", 3_000);
    expect(
      engine
        .events()
        .slice(before)
        .map((e) => e.event),
    ).not.toContain("cancelled");
    engine.control({});
  });

  it("over_budget and unknown_entry: Assemble pads or adds a message of its own; Compact's over_budget answers as ok", async () => {
    engine.control({ assemble: "over_budget" });
    const padded = await call<unknown, { messages: Message[]; estimatedTokens: number }>(
      client.assemble,
      ContextEngineServiceAssembleRequest.fromPartial({ messages: conversation(), tokenBudget: 50 }),
    );
    expect(padded.messages.at(-1)?.id).toBe("garbage-padding");
    engine.control({ assemble: "unknown_entry" });
    const made = await call<unknown, { messages: Message[] }>(
      client.assemble,
      ContextEngineServiceAssembleRequest.fromPartial({ messages: conversation(), tokenBudget: 100 }),
    );
    expect(made.messages[0]?.id).toBe("no-such-entry");
    engine.control({ compact: "unknown_entry" });
    const unknown = await call<unknown, { result?: { firstKeptEntryId: string } }>(
      client.compact,
      ContextEngineServiceCompactRequest.fromPartial({ messages: conversation() }),
    );
    expect(unknown.result?.firstKeptEntryId).toBe("no-such-entry");
    engine.control({});
  });

  it("unknown_entry on Maintain: asks the host to rewrite an entry it does not have, and passes on the refusal", async () => {
    engine.control({ maintain: "unknown_entry" });
    await expect(
      call(
        client.maintain,
        ContextEngineServiceMaintainRequest.fromPartial({
          session: { sessionId: "s-m" },
          host: { endpoint: hostAddress, token: "t-m", expiresAtMs: Date.now() + 5_000 },
        }),
      ),
    ).rejects.toMatchObject({ code: status.NOT_FOUND });
    expect(rewrites.at(-1)).toEqual({ entryIds: ["no-such-entry"], auth: "Bearer t-m" });
    engine.control({});
  });

  it("get_info: hang, throw and slow", async () => {
    engine.control({ get_info: "hang" });
    const before = engine.events().length;
    await expect(call(client.getInfo, GetInfoRequest.fromPartial({}), 300)).rejects.toMatchObject({ code: status.DEADLINE_EXCEEDED });
    await engine.waitForEvent((e, i) => i >= before && e.event === "cancelled" && e.op === "get_info", 3_000);
    engine.control({ get_info: "throw" });
    await expect(call(client.getInfo, GetInfoRequest.fromPartial({}))).rejects.toMatchObject({ code: status.INTERNAL });
    engine.control({ get_info: "slow", slow_ms: 100 });
    const { info } = await call<GetInfoRequest, { info: { id: string } }>(client.getInfo, GetInfoRequest.fromPartial({}));
    expect(info.id).toBe(`capable-${kind}`);
    engine.control({});
  });

  it("health: hang and slow miss the deadline, throw answers an error", async () => {
    engine.control({ health: "hang" });
    await expect(healthCheck(engine.address, "", 300)).rejects.toMatchObject({ code: status.DEADLINE_EXCEEDED });
    engine.control({ health: "slow", slow_ms: 1_000 });
    await expect(healthCheck(engine.address, "", 300)).rejects.toMatchObject({ code: status.DEADLINE_EXCEEDED });
    engine.control({ health: "throw" });
    await expect(healthCheck(engine.address)).rejects.toMatchObject({ code: status.INTERNAL });
    engine.control({});
    expect(await healthCheck(engine.address)).toBe("SERVING");
  });
});
