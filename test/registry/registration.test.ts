import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineHealth, Refusal } from "../../src/contract/gen/contextd/v1/registry.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startPythonEngine, type EngineProcess } from "../helpers/engine-process.js";
import { refusal, registryClient } from "../helpers/registry-client.js";

const AUTH = {
  required: true,
  owners: { acme: { token_env: "ACME_TOKEN" }, globex: { token_env: "GLOBEX_TOKEN" } },
  operators: [{ token_env: "ADMIN_TOKEN" }],
  runtimes: [{ token_env: "RUNTIME_TOKEN" }],
};
const ENV = { ACME_TOKEN: "acme-secret", GLOBEX_TOKEN: "globex-secret", ADMIN_TOKEN: "admin-secret", RUNTIME_TOKEN: "runtime-secret" };

describe("RegisterEngine enforces ownership, credentials and the endpoint allow-list", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;
  let registry: ReturnType<typeof registryClient>;

  beforeAll(async () => {
    contextd = await startContextd({ config: { auth: AUTH }, env: ENV });
    registry = registryClient(contextd.address);
    engine = await startPythonEngine({ engineId: "acme-ctx" });
  });
  afterAll(async () => {
    registry?.close();
    await engine?.stop();
    await contextd?.cleanup();
  });

  const req = (over: Record<string, unknown> = {}) => ({ engineId: "acme-ctx", owner: "acme", endpoint: engine.address, protocolVersions: [1], ...over });

  it("nobody can register legacy: DEFAULT_SLOT_RESERVED", async () => {
    const res = await registry.register(req({ engineId: "legacy" }), "acme-secret");
    expect(res).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_DEFAULT_SLOT_RESERVED, existingOwner: "core" });
  });

  it("no credentials → UNAUTHENTICATED; a forged token → UNAUTHENTICATED; another owner's token → PERMISSION_DENIED", async () => {
    expect((await refusal(registry.register(req()))).code).toBe(status.UNAUTHENTICATED);
    expect((await refusal(registry.register(req(), "forged"))).code).toBe(status.UNAUTHENTICATED);
    const wrong = await refusal(registry.register(req(), "globex-secret"));
    expect(wrong.code).toBe(status.PERMISSION_DENIED);
    expect(wrong.details).toContain("acme");
  });

  it("an endpoint outside the allow-list is refused without being dialled", async () => {
    const started = Date.now();
    const res = await registry.register(req({ endpoint: "10.20.30.40:7000" }), "acme-secret");
    expect(res).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_ENDPOINT_NOT_ALLOWED });
    expect(res.message).toContain("without dialling");
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("the owner registers after GetInfo and a health check; the engine is listed SERVING", async () => {
    const res = await registry.register(req(), "acme-secret");
    expect(res.ok, res.message).toBe(true);
    expect(res.refusal).toBe(Refusal.REFUSAL_NONE);
    expect(res.protocolVersion).toBe(1);
    const status_ = await registry.get("acme-ctx", "runtime-secret");
    expect(status_).toMatchObject({ engineId: "acme-ctx", owner: "acme", endpoint: engine.address, health: EngineHealth.ENGINE_HEALTH_SERVING });
    expect(status_.info?.name).toBeTruthy();
    const ids = (await registry.list("admin-secret")).engines.map((e) => e.engineId);
    expect(ids).toEqual(["legacy", "acme-ctx"]);
  });

  it("another owner cannot take the id: OWNED_BY_OTHER with existing_owner", async () => {
    const res = await registry.register(req({ owner: "globex" }), "globex-secret");
    expect(res).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_OWNED_BY_OTHER, existingOwner: "acme" });
  });

  it("the same owner needs allow_same_owner_refresh", async () => {
    const again = await registry.register(req(), "acme-secret");
    expect(again).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_ALREADY_REGISTERED });
    const refreshed = await registry.register(req({ allowSameOwnerRefresh: true }), "acme-secret");
    expect(refreshed.ok).toBe(true);
  });

  it("an unreachable endpoint and a mismatched id are refused", async () => {
    const unreachable = await registry.register(req({ engineId: "acme-2", endpoint: "127.0.0.1:1" }), "acme-secret");
    expect(unreachable).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_UNREACHABLE });
    const mismatch = await registry.register(req({ engineId: "acme-other-id" }), "acme-secret");
    expect(mismatch).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_CONTRACT_INVALID });
    const version = await registry.register(req({ engineId: "acme-3", protocolVersions: [7] }), "acme-secret");
    expect(version).toMatchObject({ ok: false, refusal: Refusal.REFUSAL_VERSION_UNSUPPORTED });
  });

  it("only the owner or an operator deregisters; operators only isolate and clear", async () => {
    expect((await refusal(registry.deregister("acme-ctx", "globex-secret"))).code).toBe(status.PERMISSION_DENIED);
    expect((await refusal(registry.isolate("acme-ctx", "looks odd", "acme-secret"))).code).toBe(status.PERMISSION_DENIED);
    const isolated = await registry.isolate("acme-ctx", "looks odd", "admin-secret");
    expect(isolated.engine?.quarantine).toMatchObject({ manual: true, reason: "looks odd" });
    // An operator's quarantine holds across the engine registering again (e.g. after a restart).
    expect((await registry.register(req({ allowSameOwnerRefresh: true }), "acme-secret")).ok).toBe(true);
    expect((await registry.get("acme-ctx", "admin-secret")).quarantine).toMatchObject({ manual: true, reason: "looks odd" });
    const cleared = await registry.clear("acme-ctx", "admin-secret");
    expect(cleared.engine?.quarantine).toBeUndefined();
    expect((await registry.deregister("acme-ctx", "admin-secret")).deregistered).toBe(true);
    expect((await refusal(registry.get("acme-ctx", "admin-secret"))).code).toBe(status.NOT_FOUND);
    // Released ownership: another owner may now take the id.
    const taken = await registry.register(req({ owner: "globex" }), "globex-secret");
    expect(taken.ok).toBe(true);
  });
});
