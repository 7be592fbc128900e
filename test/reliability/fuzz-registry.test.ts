/**
 * Bad input fuzzing of RegistryService (issue 11, part 5): fast-check sequences of RegisterEngine,
 * DeregisterEngine, GetEngine, QuarantineEngine and ClearQuarantine against one real contextd that
 * requires credentials (as production does), with adversarial engine ids, owners, endpoints,
 * protocol versions, quarantine reasons and tokens (owners', an operator's, a runtime's, unknown
 * ones, none). For every call:
 *
 *   - the answer is OK, or a status that is not INTERNAL/UNKNOWN and says why; a refused
 *     registration (`ok = false`) names its refusal and says why;
 *   - who may do what holds (docs/registry.md, docs/security.md): registering proves the owner, quarantine and clear need
 *     an operator, deregistering the engine's owner or an operator, reading any known credential;
 *   - the ownership rules of docs/registry.md hold (`legacy` is core's; an id held by another owner is
 *     OWNED_BY_OTHER naming it; the same owner without refresh is ALREADY_REGISTERED), and a
 *     registration that passes them and names a live engine that answers the id is admitted;
 *   - the registry stays consistent: ListEngines answers, `legacy` is in it (built in), ids are
 *     unique, and the registered engines are exactly those admitted and not deregistered since;
 *   - a WatchEngines stream opened at the start is still open at the end, sessions are still
 *     served by `legacy`, and a restarted contextd restores exactly the registered engines.
 *
 * The engine that admission dials is a real SDK engine served from this process. Admission checks
 * that its GetInfo answers the id being registered, so the test sets the id it answers before each
 * registration (most of the time: the other times are the CONTRACT_INVALID path).
 */
import { credentials, Metadata, status, type ClientReadableStream } from "@grpc/grpc-js";
import fc from "fast-check";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Refusal, RegistryServiceClient, type EngineStatus, type WatchEnginesResponse } from "../../src/contract/gen/contextd/v1/registry.js";
import { delegateCompactionToHost, serveEngine, type RunningEngine } from "../../src/sdk/engine-sdk.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { healthCheck } from "../helpers/health.js";
import { registryClient } from "../helpers/registry-client.js";
import * as A from "./helpers/arbitraries.js";

const TOKENS = { ownerA: "owner-a-secret", ownerB: "owner-b-secret", operator: "operator-secret", runtime: "runtime-secret" };
type TokenKind = keyof typeof TOKENS | "none" | "unknown";
/** `matching`: the token of the owner the call is about (the one a registration claims, the engine's). */
type TokenChoice = TokenKind | "matching";
const OWNER_OF: Partial<Record<TokenKind, string>> = { ownerA: "team-a", ownerB: "team-b" };

/** What the server receives for a string (the client's UTF-8), trimmed as the registry trims ids, owners and endpoints. */
const wire = (s: string) => Buffer.from(s, "utf8").toString("utf8").trim();

describe("RegistryService under bad input", () => {
  let contextd: ContextdProcess;
  let engine: RunningEngine;
  let registry: ReturnType<typeof registryClient>;
  let watcher: RegistryServiceClient;
  let watch: ClientReadableStream<WatchEnginesResponse>;
  let watchEnded: string | undefined;
  let closedPort: number;
  /** The registered engines, as the rules say they must be: id → owner and endpoint. */
  const model = new Map<string, { owner: string; endpoint: string }>();
  /** How registrations were answered, by refusal: each kind must have been reached. */
  const outcomes = new Map<string, number>();

  beforeAll(async () => {
    contextd = await startContextd({
      config: {
        auth: {
          required: true,
          owners: { "team-a": { token_env: "FUZZ_OWNER_A" }, "team-b": { token_env: "FUZZ_OWNER_B" } },
          operators: [{ token_env: "FUZZ_OPERATOR" }],
          runtimes: [{ token_env: "FUZZ_RUNTIME", agents: ["*"] }],
        },
      },
      env: { FUZZ_OWNER_A: TOKENS.ownerA, FUZZ_OWNER_B: TOKENS.ownerB, FUZZ_OPERATOR: TOKENS.operator, FUZZ_RUNTIME: TOKENS.runtime },
    });
    registry = registryClient(contextd.address);
    engine = await serveEngine(
      {
        info: { id: "fuzz-engine", name: "fuzz engine", version: "1.0.0" },
        assemble: (req) => ({ messages: req.messages }),
        compact: delegateCompactionToHost,
      },
      { registry: "", listen: "127.0.0.1:0", handleSignals: false, logger: pino({ level: "silent" }), env: {} },
    );
    engine.setHealth(true);
    closedPort = await getFreePort();
    watcher = new RegistryServiceClient(contextd.address, credentials.createInsecure());
    const md = new Metadata();
    md.set("authorization", `Bearer ${TOKENS.operator}`);
    watch = watcher.watchEngines({ includeCurrent: true }, md);
    watch.on("data", () => undefined);
    watch.on("error", (err: Error) => (watchEnded = err.message));
    watch.on("end", () => (watchEnded ??= "ended"));
  });
  afterAll(async () => {
    watch?.cancel();
    watcher?.close();
    registry?.close();
    await engine?.stop({ deregister: false });
    await contextd?.cleanup();
  });

  const idArb = fc.oneof(
    { arbitrary: fc.constantFrom("fz-a", "fz-b", "fz-a ", "legacy", " legacy", "LEGACY", "core"), weight: 4 },
    { arbitrary: A.adversarialString({ long: 2000 }), weight: 3 },
  );
  const ownerArb = fc.oneof(
    { arbitrary: fc.constantFrom("team-a", "team-b", " team-a ", "core", ""), weight: 3 },
    { arbitrary: A.adversarialString({ long: 500 }), weight: 1 },
  );
  /** The live engine's endpoint in the forms a registration may spell it, and endpoints that are not it. */
  const endpointArb = () =>
    fc.oneof(
      {
        arbitrary: fc.constantFrom(engine.endpoint, ` ${engine.endpoint} `, `dns:///${engine.endpoint}`, engine.endpoint.replace("127.0.0.1", "localhost")),
        weight: 6,
      },
      {
        arbitrary: fc.constantFrom(
          "127.0.0.1:0",
          "127.0.0.1:99999",
          "unix:/nonexistent/engine.sock",
          "unix:",
          "10.0.0.1:80",
          "example.com:443",
          "127.0.0.1",
          ":50051",
        ),
        weight: 2,
      },
      // Allowed but closed: dialled, and refused UNREACHABLE.
      { arbitrary: fc.constantFrom(`127.0.0.1:${closedPort}`, "[::1]:1"), weight: 2 },
      { arbitrary: A.adversarialString({ long: 1000 }), weight: 2 },
    );
  const versions = fc.array(fc.constantFrom(0, 1, 1, 2, 99, A.U32_MAX), { maxLength: 3 });
  /** Whose token a call carries; `unknown` is printable junk (grpc-js refuses to send anything else). */
  const tokenArb = fc.oneof(
    { arbitrary: fc.constant<TokenChoice>("matching"), weight: 6 },
    { arbitrary: fc.constantFrom<TokenChoice>("ownerA", "ownerB", "operator", "runtime", "none"), weight: 5 },
    { arbitrary: fc.constant<TokenChoice>("unknown"), weight: 1 },
  );
  const junk = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 40 });

  const op = () =>
    fc.oneof(
      {
        arbitrary: fc.record({
          rpc: fc.constant("register" as const),
          engineId: idArb,
          owner: ownerArb,
          endpoint: endpointArb(),
          refresh: fc.boolean(),
          versions,
          answersId: fc.oneof({ arbitrary: fc.constant(true), weight: 5 }, { arbitrary: fc.constant(false), weight: 1 }),
          token: tokenArb,
          junk,
        }),
        weight: 5,
      },
      {
        arbitrary: fc.record({ rpc: fc.constantFrom("deregister" as const, "get" as const, "clear" as const), engineId: idArb, token: tokenArb, junk }),
        weight: 3,
      },
      {
        arbitrary: fc.record({ rpc: fc.constant("quarantine" as const), engineId: idArb, reason: A.adversarialString({ long: 5000 }), token: tokenArb, junk }),
        weight: 2,
      },
    );

  /** The registry as ListEngines says: legacy built in, unique ids, and the others exactly as modelled. */
  async function expectConsistent(what: string): Promise<EngineStatus[]> {
    const { engines } = await registry.list(TOKENS.runtime);
    const ids = engines.map((e) => e.engineId);
    expect(new Set(ids).size, `${what}: engine ids are unique`).toBe(ids.length);
    expect(engines.find((e) => e.engineId === "legacy")?.builtin, `${what}: legacy is still there`).toBe(true);
    const remote = Object.fromEntries(engines.filter((e) => !e.builtin).map((e) => [e.engineId, { owner: e.owner, endpoint: e.endpoint }]));
    expect(remote, `${what}: the registered engines are those admitted`).toEqual(Object.fromEntries(model));
    return engines;
  }

  type Auth = { token: TokenChoice; junk: string };
  type Op = Auth &
    (
      | { rpc: "register"; engineId: string; owner: string; endpoint: string; refresh: boolean; versions: number[]; answersId: boolean }
      | { rpc: "deregister" | "get" | "clear"; engineId: string }
      | { rpc: "quarantine"; engineId: string; reason: string }
    );

  /** The status the credential rules answer before the handler runs (docs/security.md "Principals"; src/server/auth.ts), or OK. */
  function authStatus(o: Op & { token: TokenKind }): status {
    const known = o.token !== "none" && o.token !== "unknown";
    if (o.rpc === "register") {
      const owner = wire(o.owner);
      if (!owner) return status.INVALID_ARGUMENT;
      if (!known || (owner !== "team-a" && owner !== "team-b")) return status.UNAUTHENTICATED;
      return OWNER_OF[o.token] === owner ? status.OK : status.PERMISSION_DENIED;
    }
    if (!known) return status.UNAUTHENTICATED;
    if (o.rpc === "quarantine" || o.rpc === "clear") return o.token === "operator" ? status.OK : status.PERMISSION_DENIED;
    return status.OK;
  }

  // docs/registry.md "Ownership": plain ASCII, at most 128, nothing that reads as legacy but legacy.
  const validEngineId = (id: string) => /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(id) && (id === "legacy" || id.toLowerCase() !== "legacy");

  async function run(choice: Op): Promise<void> {
    const what = `${choice.rpc} ${A.describeRequest(choice)}`;
    const id = wire(choice.engineId);
    const held = model.get(id);
    const about = choice.rpc === "register" ? wire(choice.owner) : held?.owner;
    const kind: TokenKind = choice.token !== "matching" ? choice.token : about === "team-a" ? "ownerA" : about === "team-b" ? "ownerB" : "unknown";
    const o = { ...choice, token: kind } as Op & { token: TokenKind };
    const token = o.token === "none" ? undefined : o.token === "unknown" ? o.junk : TOKENS[o.token];
    const gate = authStatus(o);
    if (o.rpc === "register") {
      const owner = wire(o.owner);
      // GetInfo answers the id being registered (or, now and then, another one).
      (engine.info as { id: string }).id = o.answersId ? id : `${id}-not`;
      const res = await A.settle(
        registry.register(
          { engineId: o.engineId, owner: o.owner, endpoint: o.endpoint, allowSameOwnerRefresh: o.refresh, protocolVersions: o.versions },
          token,
        ),
      );
      if (!res.ok) {
        A.expectNamedRefusal(res.err, what);
        // Past the credential rules, only a missing or malformed id (over 128 characters, control
        // characters: src/registry/admission.ts) or a missing endpoint is an error; the rest are answers.
        const expected = gate !== status.OK ? gate : !validEngineId(id) || !wire(o.endpoint) ? status.INVALID_ARGUMENT : status.OK;
        expect(res.err.code, what).toBe(expected);
        return;
      }
      const r = res.value;
      expect({ gate, id: validEngineId(id), endpoint: Boolean(wire(o.endpoint)) }, `${what}: refused by the credential rules, or a missing field`).toEqual({
        gate: status.OK,
        id: true,
        endpoint: true,
      });
      if (!r.ok) {
        expect(r.refusal, what).not.toBe(Refusal.REFUSAL_NONE);
        expect(Refusal[r.refusal], what).toBeDefined();
        expect(r.message.trim(), `${what}: a refusal says why`).not.toBe("");
      }
      const refusal = Refusal[r.refusal];
      outcomes.set(refusal, (outcomes.get(refusal) ?? 0) + 1);
      if (id === "legacy")
        expect({ refusal, existingOwner: r.existingOwner }, what).toEqual({ refusal: "REFUSAL_DEFAULT_SLOT_RESERVED", existingOwner: "core" });
      else if (held && held.owner !== owner)
        expect({ refusal, existingOwner: r.existingOwner }, what).toEqual({ refusal: "REFUSAL_OWNED_BY_OTHER", existingOwner: held.owner });
      // Without refresh, registering the instance the owner holds again is refused; another endpoint
      // (with no instance_id: another instance) is a new instance of the id, admitted when it answers.
      else if (held && !o.refresh && wire(o.endpoint) === held.endpoint) expect(refusal, what).toBe("REFUSAL_ALREADY_REGISTERED");
      else if (wire(o.endpoint) === engine.endpoint && o.answersId && (o.versions.length === 0 || o.versions.includes(1)))
        expect({ ok: r.ok, refusal }, `${what}: ${r.message}`).toEqual({ ok: true, refusal: "REFUSAL_NONE" });
      if (r.ok) {
        expect(r.engine, what).toMatchObject({ engineId: id, owner, endpoint: wire(o.endpoint) });
        model.set(id, { owner, endpoint: wire(o.endpoint) });
      }
      return;
    }
    const call =
      o.rpc === "quarantine"
        ? registry.isolate(o.engineId, o.reason, token)
        : o.rpc === "deregister"
          ? registry.deregister(o.engineId, token)
          : o.rpc === "get"
            ? registry.get(o.engineId, token)
            : registry.clear(o.engineId, token);
    const res = await A.settle<unknown>(call);
    // What the rules say, for each kind of id: empty, the built-in one, unknown, registered; and
    // only the engine's owner or an operator deregisters it.
    const byId = !id
      ? status.INVALID_ARGUMENT
      : id === "legacy"
        ? o.rpc === "get"
          ? status.OK
          : status.FAILED_PRECONDITION
        : held
          ? status.OK
          : status.NOT_FOUND;
    const mayDeregister = o.token === "operator" || OWNER_OF[o.token] === held?.owner;
    const expected = gate !== status.OK ? gate : byId === status.OK && o.rpc === "deregister" && !mayDeregister ? status.PERMISSION_DENIED : byId;
    expect(res.ok ? status.OK : res.err.code, `${what}${res.ok ? "" : `: ${res.err.details}`}`).toBe(expected);
    if (!res.ok) return A.expectNamedRefusal(res.err, what);
    if (o.rpc === "deregister") model.delete(id);
    const answer = o.rpc === "get" ? (res.value as EngineStatus) : o.rpc === "deregister" ? undefined : (res.value as { engine: EngineStatus }).engine;
    if (answer) expect(answer.engineId, what).toBe(id);
    if (o.rpc === "quarantine") expect(answer?.quarantine, what).toMatchObject({ manual: true, reason: wire(o.reason) || "isolated by an operator" });
    if (o.rpc === "clear") expect(answer?.quarantine, what).toBeUndefined();
  }

  it("answers OK or a named refusal, keeps the ownership rules, and stays consistent", async () => {
    const runs = A.fuzzRuns("RegistryService", 600);
    await fc.assert(
      fc.asyncProperty(fc.array(op(), { minLength: 1, maxLength: 3 }), async (ops) => {
        for (const o of ops) {
          await run(o);
          await expectConsistent(`after ${o.rpc} ${A.describeRequest(o)}`);
        }
      }),
      runs,
    );
    console.info(`[fuzz] registrations: ${JSON.stringify(Object.fromEntries(outcomes))}; registered at the end: ${model.size}`);
    // Fewer runs (FC_RUNS) may not reach every refusal.
    if (runs.numRuns! >= 100) {
      for (const r of [
        "NONE",
        "DEFAULT_SLOT_RESERVED",
        "OWNED_BY_OTHER",
        // ALREADY_REGISTERED needs the very instance held again without refresh, which these runs
        // seldom reach now that another endpoint is another instance: test/registry/instances.test.ts
        // checks it (and that it is per instance) directly.
        "CONTRACT_INVALID",
        "UNREACHABLE",
        "VERSION_UNSUPPORTED",
        "ENDPOINT_NOT_ALLOWED",
      ]) {
        expect(outcomes.get(`REFUSAL_${r}`) ?? 0, `no registration was answered REFUSAL_${r}`).toBeGreaterThan(0);
      }
    }
    expect(watchEnded, "the WatchEngines stream is still open").toBeUndefined();
    expect(await healthCheck(contextd.address)).toBe("SERVING");
    // What the store kept is what was admitted: a restarted contextd restores the same registry.
    watch.cancel();
    registry.close();
    contextd = await contextd.restart();
    registry = registryClient(contextd.address);
    await expectConsistent("after a restart");
    const cx = new ContextdClient({ address: contextd.address, token: TOKENS.runtime });
    try {
      await cx.appendMessages({ session: { sessionId: "after-fuzz" }, messages: [user("still here?")] });
      expect((await cx.assemble({ session: { sessionId: "after-fuzz" }, tokenBudget: 1000 })).engineId).toBe("legacy");
    } finally {
      cx.close();
    }
  });
});
