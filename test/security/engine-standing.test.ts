/**
 * Finding: "an evicted engine keeps its powers" — after an operator quarantined or deregistered an
 * engine while one of its calls was in flight, the engine still read and rewrote the transcript with
 * that call's host token, and its answer reached the runtime in normal mode. Now an engine's
 * standing ends its calls: quarantine (an operator's, a health check's, another call's failure) and
 * deregistration revoke its live host tokens and end its calls in flight, which `legacy` answers;
 * the engine's late answer is discarded (src/registry/host-grants.ts revokeEngine, wired to the
 * registry's events in src/server/contextd.ts).
 *
 * Real contextd, real engine processes (test/security/fixtures/scoped-host-engine.ts) holding an
 * Assemble open and calling HostService from their own address with that call's token.
 */
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { registryClient } from "../helpers/registry-client.js";
import { startScopedHostEngine, type ScopedHostEngine } from "./fixtures/scoped-host-engine-process.js";

describe("an engine that loses its standing while its call runs keeps no power over the session", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;
  let engine: ScopedHostEngine;
  let registry: ReturnType<typeof registryClient>;

  beforeAll(async () => {
    cd = await startContextd({ config: { slots: { agents: { rw: "rw-engine" } }, engines: { timeouts: { assemble: "30s" } } } });
    cx = new ContextdClient({ address: cd.address, timeoutMs: 30_000 });
    registry = registryClient(cd.address);
    engine = await startScopedHostEngine({ engineId: "rw-engine", registry: cd.address, owner: "team", requirements: ["transcript-rewrite"] });
    expect(await engine.registered, engine.logs()).toMatchObject({ ok: true });
  }, 60_000);
  afterAll(async () => {
    registry?.close();
    cx?.close();
    await engine?.stop();
    await cd?.cleanup();
  });

  /** A session routed to the engine, and an Assemble it holds open. */
  const hold = async (sessionId: string) => {
    const session = { sessionId, agentId: "rw" };
    const { entryIds } = await cx.appendMessages({ session, messages: [user("the original first message"), user("second")] });
    const answered = cx.assemble({ session, tokenBudget: 10_000 });
    answered.catch(() => undefined);
    await engine.held(sessionId);
    return { session, entryIds, answered };
  };
  const texts = async (sessionId: string) =>
    (await cx.getTranscript({ session: { sessionId } })).entries.map((e) => (e.entry?.$case === "message" ? messageText(e.entry.value) : ""));

  it("an operator's quarantine: the held call is answered by legacy at once, the token no longer reads or rewrites, the late answer goes nowhere", async () => {
    const { entryIds, answered } = await hold("quarantined-mid-call");
    expect(await engine.host("quarantined-mid-call", "read")).toMatchObject({ code: status.OK });
    await registry.isolate("rw-engine", "maintenance");
    const res = await answered;
    expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(res.fallbackReason).toContain('engine "rw-engine" was quarantined (manual: maintenance)');
    const rewrite = await engine.host("quarantined-mid-call", "rewrite", { entryId: entryIds[0], text: "rewritten after the quarantine" });
    expect(rewrite.code).toBe(status.UNAUTHENTICATED);
    expect(rewrite.details).toContain('host token revoked: engine "rw-engine" was quarantined');
    expect((await engine.host("quarantined-mid-call", "read")).code).toBe(status.UNAUTHENTICATED);
    await engine.release("quarantined-mid-call");
    expect(await texts("quarantined-mid-call")).toEqual(["the original first message", "second"]);
    await registry.clear("rw-engine");
  });

  it("a deregistration: the same — legacy answers, the token is dead", async () => {
    const { entryIds, answered } = await hold("deregistered-mid-call");
    await registry.deregister("rw-engine");
    const res = await answered;
    expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(res.fallbackReason).toContain('engine "rw-engine" was deregistered');
    const rewrite = await engine.host("deregistered-mid-call", "rewrite", { entryId: entryIds[0], text: "rewritten after leaving" });
    expect(rewrite.code).toBe(status.UNAUTHENTICATED);
    expect(rewrite.details).toContain("host token revoked");
    await engine.release("deregistered-mid-call");
    expect(await texts("deregistered-mid-call")).toEqual(["the original first message", "second"]);
  });
});
