/**
 * The auth matrix: every RPC of SessionService, RegistryService and HostService, called with every
 * kind of credential, against a real contextd with auth required — one table, the exact status
 * expected in each cell. The RPC list comes from the generated service definitions, so a new RPC
 * without a row fails here before it can ship without a rule.
 *
 * Where the role is right the request is minimal and harmless, and the cell shows that the call got
 * past authorization: OK, or the handler's own answer (NOT_FOUND, INVALID_ARGUMENT, ...).
 */
import { randomBytes } from "node:crypto";
import { Client, credentials } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as H from "../../src/contract/gen/contextd/v1/host.js";
import * as A from "../../src/contract/gen/contextd/v1/audit.js";
import * as R from "../../src/contract/gen/contextd/v1/registry.js";
import * as Q from "../../src/contract/gen/contextd/v1/search.js";
import * as S from "../../src/contract/gen/contextd/v1/session.js";
import { SubagentContextMode, SubagentEndReason } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startHostTokenEngine, type HostTokenEngine } from "./helpers/host-token-engine.js";
import { rawCall, type MethodDef } from "./helpers/raw-call.js";
import { healthStatus, reflectionServices } from "./helpers/public-services.js";

const secret = (): string => randomBytes(24).toString("base64url");
const TOKENS = { acme: secret(), globex: secret(), operator: secret(), runtime: secret() };

/** The credential columns, in table order. */
const COLUMNS = ["none", "wrong", "runtime", "owner", "otherOwner", "operator", "liveHost", "expiredHost"] as const;
type Column = (typeof COLUMNS)[number];

const OK = "OK";
const UNAUTH = "UNAUTHENTICATED";
const DENIED = "PERMISSION_DENIED";
const NOT_FOUND = "NOT_FOUND";
const INVALID = "INVALID_ARGUMENT";
const PRECONDITION = "FAILED_PRECONDITION";

const SEEDED = { sessionId: "matrix-seeded" };
/** The session of the held engine call: its agent is routed to the engine that reports host tokens. */
const HOSTED = { sessionId: "matrix-hosted", agentId: "host-agent" };
const ENGINE = "matrix-engine";
/** Registered afresh before each cell that could remove or quarantine it. */
const VICTIM = "matrix-victim";

// Rules (each service's table, interpreted by src/server/authorization.ts): SessionService takes runtime tokens only; RegistryService
// reads with any contextd credential, registers as the owner the request names, quarantines as an
// operator, deregisters as the engine's owner or an operator; HostService takes only the host token
// of an engine call in progress. Tokens of one kind are unknown to the others' checks — a host token
// is no contextd credential, and HostService knows no role but the host grant — so those cells are
// UNAUTHENTICATED ("not recognised"), not PERMISSION_DENIED.
// prettier-ignore
//                                                  none    wrong   runtime owner   otherOwner operator liveHost expiredHost
const SESSION = (right: string): string[] =>       [UNAUTH, UNAUTH, right,  DENIED, DENIED,    DENIED,  UNAUTH,  UNAUTH];
const READER = [UNAUTH, UNAUTH, OK, OK, OK, OK, UNAUTH, UNAUTH];
const OPERATOR = [UNAUTH, UNAUTH, DENIED, DENIED, DENIED, OK, UNAUTH, UNAUTH];
const HOST = (right: string): string[] => [UNAUTH, UNAUTH, UNAUTH, UNAUTH, UNAUTH, UNAUTH, right, UNAUTH];
// Registering names owner "acme" (the `owner` column) and no endpoint: past the owner check, the handler refuses it.
const REGISTER = [UNAUTH, UNAUTH, DENIED, INVALID, DENIED, DENIED, UNAUTH, UNAUTH];
const DEREGISTER = [UNAUTH, UNAUTH, DENIED, OK, DENIED, OK, UNAUTH, UNAUTH];

interface Row {
  request: () => unknown;
  /** One expected status per column of COLUMNS. */
  expect: string[];
  /** Runs before each cell, so that every cell meets the same state. */
  before?: () => Promise<void>;
}

// prettier-ignore
const MATRIX: Record<string, Row> = {
  "SessionService/AppendMessages":         { request: () => S.AppendMessagesRequest.fromPartial({ session: { sessionId: "matrix-new" }, messages: [user("hi")] }), expect: SESSION(OK) },
  "SessionService/Assemble":               { request: () => S.AssembleRequest.fromPartial({ session: SEEDED, tokenBudget: 1000 }), expect: SESSION(OK) },
  "SessionService/Compact":                { request: () => S.CompactRequest.fromPartial({ session: SEEDED, tokenBudget: 1000 }), expect: SESSION(OK) },
  "SessionService/AfterTurn":              { request: () => S.AfterTurnRequest.fromPartial({ session: SEEDED, tokenBudget: 1000 }), expect: SESSION(OK) },
  "SessionService/Maintain":               { request: () => S.MaintainRequest.fromPartial({ session: SEEDED }), expect: SESSION(OK) },
  "SessionService/PrepareSubagentSpawn":   { request: () => S.PrepareSubagentSpawnRequest.fromPartial({ parent: { sessionId: "matrix-missing" }, child: { sessionId: "matrix-child" }, contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED }), expect: SESSION(NOT_FOUND) },
  "SessionService/RollbackSubagentSpawn":  { request: () => S.RollbackSubagentSpawnRequest.fromPartial({ rollbackHandle: "not-a-handle" }), expect: SESSION(INVALID) },
  "SessionService/EndSubagent":            { request: () => S.EndSubagentRequest.fromPartial({ child: { sessionId: "matrix-missing" }, reason: SubagentEndReason.SUBAGENT_END_REASON_COMPLETED }), expect: SESSION(NOT_FOUND) },
  "SessionService/GetSession":             { request: () => S.GetSessionRequest.fromPartial({ session: SEEDED }), expect: SESSION(OK) },
  "SessionService/ListSessions":           { request: () => S.ListSessionsRequest.fromPartial({}), expect: SESSION(OK) },
  "SessionService/GetTranscript":          { request: () => S.GetTranscriptRequest.fromPartial({ session: SEEDED }), expect: SESSION(OK) },
  "SessionService/ImportTranscript":       { request: () => S.ImportTranscriptRequest.fromPartial({ session: { sessionId: "matrix-import" }, jsonl: Buffer.from(JSON.stringify({ role: "user", content: "hi" })) }), expect: SESSION(OK) },
  "SessionService/ExportTranscript":       { request: () => S.ExportTranscriptRequest.fromPartial({ session: SEEDED }), expect: SESSION(OK) },
  "SessionService/SearchTranscript":       { request: () => Q.SearchTranscriptRequest.fromPartial({ session: SEEDED, query: "hi" }), expect: SESSION(OK) },
  "SessionService/ExpandCompaction":       { request: () => Q.ExpandCompactionRequest.fromPartial({ session: SEEDED, compactionEntryId: "not-a-compaction" }), expect: SESSION(INVALID) },
  "SessionService/DeleteSession":          { request: () => S.DeleteSessionRequest.fromPartial({ session: { sessionId: "matrix-missing" } }), expect: SESSION(NOT_FOUND) },

  "RegistryService/RegisterEngine":        { request: () => R.RegisterEngineRequest.fromPartial({ engineId: "matrix-probe", owner: "acme" }), expect: REGISTER },
  "RegistryService/DeregisterEngine":      { request: () => R.DeregisterEngineRequest.fromPartial({ engineId: VICTIM }), expect: DEREGISTER, before: () => victim.register() },
  "RegistryService/ListEngines":           { request: () => R.ListEnginesRequest.fromPartial({}), expect: READER },
  "RegistryService/GetEngine":             { request: () => R.GetEngineRequest.fromPartial({ engineId: ENGINE }), expect: READER },
  "RegistryService/WatchEngines":          { request: () => R.WatchEnginesRequest.fromPartial({ includeCurrent: true }), expect: READER },
  "RegistryService/QuarantineEngine":      { request: () => R.QuarantineEngineRequest.fromPartial({ engineId: VICTIM, reason: "matrix" }), expect: OPERATOR, before: () => victim.register() },
  "RegistryService/ClearQuarantine":       { request: () => R.ClearQuarantineRequest.fromPartial({ engineId: VICTIM }), expect: OPERATOR, before: () => victim.quarantined() },

  "AuditService/ListAuditEvents":          { request: () => A.ListAuditEventsRequest.fromPartial({ pageSize: 5 }), expect: OPERATOR },

  // For the session of the held engine call; minimal requests the handlers refuse past the token check.
  "HostService/ReadTranscript":            { request: () => H.ReadTranscriptRequest.fromPartial({ session: HOSTED }), expect: HOST(OK) },
  "HostService/SearchTranscript":          { request: () => H.HostServiceSearchTranscriptRequest.fromPartial({ session: HOSTED, query: "hi" }), expect: HOST(OK) },
  "HostService/RewriteTranscriptEntries":  { request: () => H.RewriteTranscriptEntriesRequest.fromPartial({ session: HOSTED, rewrites: [] }), expect: HOST(INVALID) },
  "HostService/DelegateCompaction":        { request: () => H.DelegateCompactionRequest.fromPartial({ session: HOSTED }), expect: HOST(INVALID) },
  // No summarizer model is configured: the host token got through, the host has nothing to complete with.
  "HostService/Complete":                  { request: () => H.CompleteRequest.fromPartial({ session: HOSTED, system: "say hi" }), expect: HOST(PRECONDITION) },
};

const SERVICES = {
  SessionService: S.SessionServiceService,
  RegistryService: R.RegistryServiceService,
  HostService: H.HostServiceService,
  AuditService: A.AuditServiceService,
};
const METHODS = new Map<string, MethodDef>(
  Object.values(SERVICES).flatMap((def) =>
    Object.values(def).map((m): [string, MethodDef] => [m.path.slice("/contextd.v1.".length), m as unknown as MethodDef]),
  ),
);

let contextd: ContextdProcess;
let engine: HostTokenEngine;
let victimEngine: HostTokenEngine;
let runtime: ContextdClient;
let client: Client;
const tokens = {} as Record<Column, string | undefined>;
let heldAssemble: Promise<unknown>;

/** The engine the registry rows may deregister and quarantine, put back before each such cell. */
const victim = {
  async register(): Promise<void> {
    const res = await rawCall(
      client,
      METHODS.get("RegistryService/RegisterEngine")!,
      R.RegisterEngineRequest.fromPartial({ engineId: VICTIM, owner: "acme", endpoint: victimEngine.address, allowSameOwnerRefresh: true }),
      TOKENS.acme,
    );
    expect(res.code).toBe(OK);
  },
  async quarantined(): Promise<void> {
    await victim.register();
    const res = await rawCall(
      client,
      METHODS.get("RegistryService/QuarantineEngine")!,
      R.QuarantineEngineRequest.fromPartial({ engineId: VICTIM, reason: "setup" }),
      TOKENS.operator,
    );
    expect(res.code).toBe(OK);
  },
};

describe("auth matrix: every RPC × every credential, against a contextd with auth required", () => {
  beforeAll(async () => {
    contextd = await startContextd({
      config: {
        auth: {
          required: true,
          owners: { acme: { token_env: "SEC_ACME", engines: [ENGINE, VICTIM] }, globex: { token_env: "SEC_GLOBEX" } },
          operators: [{ token_env: "SEC_OPERATOR", name: "ops" }],
          runtimes: [{ token_env: "SEC_RUNTIME", name: "runtime" }],
        },
        slots: { agents: { [HOSTED.agentId]: ENGINE } },
        // The held call must outlive the whole matrix; the test releases it, it never times out.
        engines: { timeouts: { assemble: "120s" } },
      },
      env: { SEC_ACME: TOKENS.acme, SEC_GLOBEX: TOKENS.globex, SEC_OPERATOR: TOKENS.operator, SEC_RUNTIME: TOKENS.runtime },
    });
    [engine, victimEngine] = await Promise.all([
      startHostTokenEngine({ engineId: ENGINE, registry: contextd.address, owner: "acme", ownerToken: TOKENS.acme }),
      startHostTokenEngine({ engineId: VICTIM }),
    ]);
    expect(await engine.registered).toMatchObject({ ok: true });
    client = new Client(contextd.address, credentials.createInsecure());
    runtime = new ContextdClient({ address: contextd.address, token: TOKENS.runtime, timeoutMs: 120_000 });
    await runtime.appendMessages({ session: SEEDED, messages: [user("seeded")] });
    await runtime.appendMessages({ session: HOSTED, messages: [user("hosted")] });

    // An expired host token: the token of an engine call that has ended (for the same session).
    const first = runtime.assemble({ session: HOSTED, tokenBudget: 1000 });
    const ended = await engine.nextHostContext();
    await engine.release(ended.token);
    await first;
    // A live one: the engine holds this call open until afterAll releases it.
    heldAssemble = runtime.assemble({ session: HOSTED, tokenBudget: 1000 });
    heldAssemble.catch(() => undefined);
    const held = await engine.nextHostContext();
    Object.assign(tokens, {
      none: undefined,
      wrong: secret(),
      runtime: TOKENS.runtime,
      owner: TOKENS.acme,
      otherOwner: TOKENS.globex,
      operator: TOKENS.operator,
      liveHost: held.token,
      expiredHost: ended.token,
    });
  }, 120_000);
  afterAll(async () => {
    if (tokens.liveHost) await engine.release(tokens.liveHost).catch(() => undefined);
    await heldAssemble?.catch(() => undefined);
    client?.close();
    runtime?.close();
    await Promise.all([engine?.stop(), victimEngine?.stop()]);
    await contextd?.cleanup();
  });

  it("auth matrix: has one row per RPC of the generated service definitions (a new RPC needs its row)", () => {
    expect(Object.keys(MATRIX).sort()).toEqual([...METHODS.keys()].sort());
    for (const [rpc, row] of Object.entries(MATRIX)) expect(row.expect, rpc).toHaveLength(COLUMNS.length);
  });

  it("auth matrix: every RPC answers every credential with the exact status its rule prescribes", async () => {
    const expected: Record<string, Record<string, string>> = {};
    const actual: Record<string, Record<string, string>> = {};
    const details: string[] = [];
    for (const [rpc, row] of Object.entries(MATRIX)) {
      const method = METHODS.get(rpc);
      if (!method) throw new Error(`${rpc} is not an RPC of the generated services`);
      expected[rpc] = {};
      actual[rpc] = {};
      for (const [i, column] of COLUMNS.entries()) {
        await row.before?.();
        const outcome = await rawCall(client, method, row.request(), tokens[column]);
        expected[rpc][column] = row.expect[i]!;
        actual[rpc][column] = outcome.code;
        if (outcome.code !== row.expect[i]) details.push(`${rpc} × ${column}: ${outcome.code} ${outcome.details}`);
      }
    }
    // One comparison of the whole table: a failure shows every differing cell at once.
    expect(actual, details.join("\n")).toEqual(expected);
  }, 120_000);

  it("auth matrix: health and reflection are public — no token, or a wrong one, is served", async () => {
    for (const token of [undefined, tokens.wrong]) {
      expect(await healthStatus(contextd.address, token)).toBe("SERVING");
      for (const version of ["v1", "v1alpha"] as const) {
        expect(await reflectionServices(contextd.address, version, token)).toContain("contextd.v1.SessionService");
      }
    }
  });
});
