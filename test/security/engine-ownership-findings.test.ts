/**
 * Red-team findings about engine ids (issue 12): squatting a routed id, look-alike and hostile ids,
 * raw escape sequences in `contextctl engines`. Real contextd processes, a real engine process.
 */
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Refusal } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { drawTable } from "../../src/cli/table.js";
import { runContextdUntilExit, startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { refusal, registryClient } from "../helpers/registry-client.js";
import { user } from "../fixtures/messages.js";

const ENV = { ACME_TOKEN: "acme-secret", EVIL_TOKEN: "evil-secret", ALICE_TOKEN: "alice-secret", ADMIN_TOKEN: "admin-secret" };
const AUTH = {
  required: true,
  owners: { acme: { token_env: "ACME_TOKEN", engines: ["acme-eng"] }, evil: { token_env: "EVIL_TOKEN" } },
  operators: [{ token_env: "ADMIN_TOKEN" }],
  runtimes: [{ token_env: "ALICE_TOKEN", agents: ["alice"], name: "alice" }],
};
const CONFIG = { auth: AUTH, slots: { agents: { alice: "acme-eng" } } };

describe("finding: engine-id squatting — a routed id is reserved for its configured owner", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;
  let registry: ReturnType<typeof registryClient>;
  let alice: ContextdClient;
  const session = { sessionId: "alice-1", agentId: "alice" };
  const asEvil = { engineId: "acme-eng", owner: "evil", protocolVersions: [1] };

  beforeAll(async () => {
    contextd = await startContextd({ config: CONFIG, env: ENV });
    registry = registryClient(contextd.address);
    // One engine process answering GetInfo as acme-eng: whoever registers it, it is the same code —
    // what differs is only who claims the id.
    engine = await startTsEngine({ engineId: "acme-eng" });
    alice = new ContextdClient({ address: contextd.address, token: "alice-secret", timeoutMs: 20_000 });
    await alice.appendMessages({ session, messages: [user("hello")] });
  });
  afterAll(async () => {
    alice?.close();
    registry?.close();
    await engine?.stop();
    await contextd?.cleanup();
  });

  it("before acme's sidecar starts, owner evil registering acme-eng is refused OWNED_BY_OTHER naming acme", async () => {
    const res = await registry.register({ ...asEvil, endpoint: engine.address }, "evil-secret");
    expect(res).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_OWNED_BY_OTHER, existingOwner: "acme" });
    expect(res.message).toContain("auth.owners.acme.engines");
    // alice's session is not routed anywhere but legacy, and the engine was never called for it.
    const ctx = await alice.assemble({ session, tokenBudget: 4000 });
    expect(ctx).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
    expect(engine.events().filter((e) => e.event === "call")).toEqual([]);
  });

  it("acme registers its reserved id and alice is routed to it; after acme deregisters, evil is still refused", async () => {
    const ok = await registry.register({ ...asEvil, owner: "acme", endpoint: engine.address }, "acme-secret");
    expect(ok.ok, ok.message).toBe(true);
    expect(await alice.assemble({ session, tokenBudget: 4000 })).toMatchObject({ engineId: "acme-eng", mode: Mode.MODE_NORMAL });
    await registry.deregister("acme-eng", "acme-secret");
    const res = await registry.register({ ...asEvil, endpoint: engine.address }, "evil-secret");
    expect(res).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_OWNED_BY_OTHER, existingOwner: "acme" });
    expect((await registry.get("acme-eng", "admin-secret").catch((e) => e)).code).toBe(status.NOT_FOUND);
  });

  it("an unreserved id stays first-come, as in OpenClaw (no slot can route to it)", async () => {
    const free = await startTsEngine({ engineId: "free-eng" });
    try {
      const res = await registry.register({ ...asEvil, engineId: "free-eng", endpoint: free.address }, "evil-secret");
      expect(res.ok, res.message).toBe(true);
      const other = await registry.register({ ...asEvil, engineId: "free-eng", owner: "acme", endpoint: free.address }, "acme-secret");
      expect(other).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_OWNED_BY_OTHER, existingOwner: "evil" });
    } finally {
      await free.stop();
    }
  });

  it("a registration stored before the id was reserved is dropped at start, with a warning", async () => {
    const squatter = await startTsEngine({ engineId: "late-eng" });
    try {
      const res = await registry.register({ ...asEvil, engineId: "late-eng", endpoint: squatter.address }, "evil-secret");
      expect(res.ok, res.message).toBe(true);
      contextd = await contextd.restart({ config: { auth: { owners: { acme: { engines: ["acme-eng", "late-eng"] } } } } });
      registry.close();
      registry = registryClient(contextd.address);
      expect((await refusal(registry.get("late-eng", "admin-secret"))).code).toBe(status.NOT_FOUND);
      expect(contextd.logLines().some((l) => l.engineId === "late-eng" && String(l.msg).includes("reserved for another owner"))).toBe(true);
      alice.close();
      alice = new ContextdClient({ address: contextd.address, token: "alice-secret", timeoutMs: 20_000 });
    } finally {
      await squatter.stop();
    }
  });
});

describe("finding: with auth.required, a slot naming an id that no owner reserves refuses to start", () => {
  const run = (config: Record<string, unknown>) => runContextdUntilExit({ config, env: ENV });

  it.each([
    ["slots.context_engine", { auth: AUTH, slots: { context_engine: "nobodys" } }],
    ["slots.agents.bob", { auth: AUTH, slots: { agents: { bob: "nobodys" } } }],
  ])("%s → exit 2 naming the key and auth.owners.<owner>.engines", async (key, config) => {
    const out = await run(config);
    expect(out.code).toBe(2);
    const text = out.stderr + out.stdout;
    expect(text).toContain(key);
    expect(text).toContain("auth.owners.<owner>.engines");
  });

  it("two owners reserving one id, or a managed sidecar's id reserved for another owner → exit 2", async () => {
    const twice = await run({ auth: { ...AUTH, owners: { ...AUTH.owners, evil: { token_env: "EVIL_TOKEN", engines: ["acme-eng"] } } } });
    expect(twice.code).toBe(2);
    expect(twice.stderr + twice.stdout).toContain('is reserved for "acme"');
    const managed = await run({ auth: AUTH, engines: { managed: [{ id: "acme-eng", owner: "evil", command: ["true"] }] } });
    expect(managed.code).toBe(2);
    expect(managed.stderr + managed.stdout).toContain("engines.managed[0].owner");
  });

  it("a managed sidecar reserves its own id, so a slot may route to it", async () => {
    const cd = await startContextd({
      config: {
        auth: AUTH,
        slots: { context_engine: "side" },
        engines: { managed: [{ id: "side", command: [process.execPath, "-e", "setInterval(() => {}, 1000)"] }] },
      },
      env: ENV,
    });
    await cd.cleanup();
  });
});

describe("finding: hostile engine ids are refused with a short INVALID_ARGUMENT", () => {
  let contextd: ContextdProcess;
  let registry: ReturnType<typeof registryClient>;
  beforeAll(async () => {
    contextd = await startContextd({ config: { auth: AUTH }, env: ENV });
    registry = registryClient(contextd.address);
  });
  afterAll(async () => {
    registry?.close();
    await contextd?.cleanup();
  });

  it.each([
    ["a control character", "acme\u0007eng"],
    ["an escape sequence", "acme\u001b[2Jeng"],
    ["a bidi override", "acme\u202eeng"],
    ["a zero-width space", "acme\u200beng"],
    ["a Cyrillic look-alike of legacy", "leg\u0430cy"],
    ["a full-width look-alike of legacy", "\uff4c\uff45\uff47\uff41\uff43\uff59"],
    ["legacy in capitals", "LEGACY"],
    ["10,000 characters", "a".repeat(10_000)],
  ])("%s", async (_what, engineId) => {
    const err = await refusal(registry.register({ engineId, owner: "evil", endpoint: "127.0.0.1:1", protocolVersions: [1] }, "evil-secret"));
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toContain("engine_id");
    expect(err.details.length).toBeLessThan(400);
    expect(err.details).not.toMatch(/[\u0000-\u001f\u200b\u202e]/);
  });

  it("contextctl's tables print escape sequences and bidi overrides as \\uXXXX, keeping its own colours", () => {
    // Only the colour codes contextctl itself emits (style.ts) pass; a tenant's ESC[8m (hidden) does not.
    const table = drawTable(["engine", "reason"], [["\u001b[32mok\u001b[39m", "x\u001b]0;pwned\u0007\u202e\u001b[8m"]], ["left", "left"]);
    expect(table).toContain("\u001b[32mok\u001b[39m");
    expect(table).toContain("x\\u001b]0;pwned\\u0007\\u202e\\u001b[8m");
    expect(table).not.toMatch(/\u001b\]|\u0007|\u202e|\u001b\[8m/);
  });
});
