import { createServer } from "node:net";
import { credentials, Metadata, Server, ServerCredentials, status, type ServiceError } from "@grpc/grpc-js";
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ContextEngineServiceClient, GetInfoRequest, type EngineInfo } from "../../src/contract/gen/contextd/v1/engine.js";
import {
  EngineStatus,
  Refusal,
  RegistryServiceService,
  type DeregisterEngineRequest,
  type GetEngineRequest,
  type RegisterEngineRequest,
  type RegisterEngineResponse,
  type RegistryServiceServer,
} from "../../src/contract/gen/contextd/v1/registry.js";
import { RegistrationError, serveEngine, type EngineDefinition, type RunningEngine, type ServeEngineOptions } from "../../src/sdk/engine-sdk.js";

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });
const running: RunningEngine[] = [];
const registries: FakeRegistry[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(running.splice(0).map((e) => e.stop({ deregister: false })));
  for (const r of registries.splice(0)) r.stop();
});

const definition: EngineDefinition = {
  info: { id: "acme-engine", name: "Acme engine", version: "1.0.0" },
  assemble: (req) => ({ messages: req.messages }),
  compact: () => ({ ok: true }),
};

/** A free TCP port on 127.0.0.1 (nothing listens on it when this returns). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

type RegisterBehaviour = (req: RegisterEngineRequest, n: number) => Partial<RegisterEngineResponse> | { error: status; details: string } | undefined;

/**
 * A RegistryService test double (an external peer of the SDK). Like the real registry it dials
 * the endpoint and calls GetInfo before admitting.
 */
class FakeRegistry {
  readonly server = new Server();
  readonly engines = new Map<string, { owner: string; endpoint: string; info?: EngineInfo }>();
  readonly registerCalls: { req: RegisterEngineRequest; auth: string }[] = [];
  readonly deregisterCalls: { req: DeregisterEngineRequest; auth: string }[] = [];
  readonly getEngineCalls: { req: GetEngineRequest; auth: string }[] = [];
  behaviour: RegisterBehaviour = () => undefined;

  constructor() {
    const auth = (md: Metadata) => String(md.get("authorization")[0] ?? "");
    const impl: Partial<RegistryServiceServer> = {
      registerEngine: (call, cb) => {
        const req = call.request;
        this.registerCalls.push({ req, auth: auth(call.metadata) });
        const forced = this.behaviour(req, this.registerCalls.length);
        if (forced && "error" in forced) return cb({ code: forced.error, details: forced.details }, null);
        if (forced)
          return cb(null, { ok: false, existingOwner: "", refusal: Refusal.REFUSAL_UNSPECIFIED, message: "", protocolVersion: 0, instanceId: "", ...forced });
        // Admission: dial the endpoint and ask for GetInfo, as contextd does.
        const client = new ContextEngineServiceClient(req.endpoint, credentials.createInsecure());
        client.getInfo(GetInfoRequest.fromPartial({}), new Metadata(), { deadline: Date.now() + 1_000 }, (err, res) => {
          client.close();
          if (err || res.info?.id !== req.engineId) {
            return cb(null, {
              ok: false,
              existingOwner: "",
              refusal: Refusal.REFUSAL_UNREACHABLE,
              message: err?.details ?? "bad info",
              protocolVersion: 0,
              instanceId: "",
            });
          }
          this.engines.set(req.engineId, { owner: req.owner, endpoint: req.endpoint, info: res.info });
          cb(null, {
            ok: true,
            existingOwner: "",
            refusal: Refusal.REFUSAL_NONE,
            message: "",
            protocolVersion: 1,
            engine: this.status(req.engineId),
            instanceId: req.instanceId || req.endpoint,
          });
        });
      },
      getEngine: (call, cb) => {
        this.getEngineCalls.push({ req: call.request, auth: auth(call.metadata) });
        const engine = this.engines.get(call.request.engineId);
        if (!engine) return cb({ code: status.NOT_FOUND, details: `engine_id "${call.request.engineId}" is not registered` }, null);
        cb(null, { engine: this.status(call.request.engineId) });
      },
      deregisterEngine: (call, cb) => {
        this.deregisterCalls.push({ req: call.request, auth: auth(call.metadata) });
        cb(null, { deregistered: this.engines.delete(call.request.engineId) });
      },
    };
    this.server.addService(RegistryServiceService, impl as RegistryServiceServer);
  }

  status(id: string): EngineStatus {
    const e = this.engines.get(id)!;
    return EngineStatus.fromPartial({ engineId: id, owner: e.owner, endpoint: e.endpoint, info: e.info });
  }

  start(port: number): Promise<void> {
    return new Promise((resolve, reject) =>
      this.server.bindAsync(`127.0.0.1:${port}`, ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
    );
  }

  stop(): void {
    this.server.forceShutdown();
  }
}

async function startRegistry(port = 0): Promise<{ registry: FakeRegistry; address: string }> {
  const registry = new FakeRegistry();
  registries.push(registry);
  const p = port || (await freePort());
  await registry.start(p);
  return { registry, address: `127.0.0.1:${p}` };
}

async function serve(options: ServeEngineOptions, def: EngineDefinition = definition): Promise<RunningEngine> {
  const engine = await serveEngine(def, {
    owner: "acme",
    ownerToken: "owner-secret",
    handleSignals: false,
    logger,
    heartbeatMs: 100,
    retry: { initialMs: 50, maxMs: 250 },
    drainTimeoutMs: 1_000,
    ...options,
  });
  running.push(engine);
  return engine;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("serveEngine: registration", () => {
  it("retries until the registry comes up, then registers the real endpoint with the owner token", async () => {
    const port = await freePort();
    const engine = await serve({ registry: `127.0.0.1:${port}` });
    expect(engine.registration?.state).toBe("registering");
    await sleep(700);
    expect(engine.registration?.state).toBe("registering");
    expect(engine.registration?.lastError?.message).toMatch(/UNAVAILABLE/);

    const { registry } = await startRegistry(port);
    const res = await engine.registered;
    expect(res?.ok).toBe(true);
    expect(res?.protocolVersion).toBe(1);
    expect(registry.registerCalls).toHaveLength(1);
    const { req, auth } = registry.registerCalls[0];
    expect(auth).toBe("Bearer owner-secret");
    // No instance id: the registry names the instance by its endpoint.
    expect(req).toEqual({
      engineId: "acme-engine",
      owner: "acme",
      endpoint: engine.endpoint,
      allowSameOwnerRefresh: true,
      protocolVersions: [1],
      instanceId: "",
      locality: undefined,
    });
    expect(engine.endpoint).toMatch(/^127\.0\.0\.1:[1-9]\d*$/);
    expect(engine.registration).toMatchObject({ state: "registered", registrations: 1 });

    // Heartbeats check the registration with the owner token.
    await vi.waitFor(() => expect(registry.getEngineCalls.length).toBeGreaterThanOrEqual(2), { timeout: 5_000 });
    expect(registry.getEngineCalls[0]).toEqual({ req: { engineId: "acme-engine" }, auth: "Bearer owner-secret" });
    expect(registry.registerCalls).toHaveLength(1);
  });

  it("registers again when the registry answers NOT_FOUND or restarts empty", async () => {
    const { registry, address } = await startRegistry();
    const engine = await serve({ registry: address });
    await engine.registered;

    // The registry forgot the engine.
    registry.engines.clear();
    await vi.waitFor(() => expect(registry.registerCalls).toHaveLength(2), { timeout: 5_000 });
    await vi.waitFor(() => expect(engine.registration?.registrations).toBe(2), { timeout: 5_000 });
    expect(registry.engines.get("acme-engine")?.endpoint).toBe(engine.endpoint);

    // The registry restarts without its state: unreachable for a while, then back and empty.
    const port = Number(address.split(":")[1]);
    registry.stop();
    await sleep(500);
    const { registry: restarted } = await startRegistry(port);
    await vi.waitFor(() => expect(restarted.registerCalls).toHaveLength(1), { timeout: 10_000 });
    await vi.waitFor(() => expect(restarted.engines.get("acme-engine")?.endpoint).toBe(engine.endpoint), { timeout: 5_000 });
    await vi.waitFor(() => expect(engine.registration).toMatchObject({ state: "registered", registrations: 3 }), { timeout: 5_000 });
  });

  it("leaves the id to another endpoint that took it (warning once), and registers again once that one deregisters", async () => {
    const { registry, address } = await startRegistry();
    const lines: { level: number; msg: string; registeredEndpoint?: string }[] = [];
    const captured = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const engine = await serve({ registry: address, logger: captured });
    await engine.registered;
    const takeover = (l: { msg: string }) => l.msg.includes("another instance now holds the registration of acme-engine at 127.0.0.1:1");

    // Another instance of the engine (same id and owner) took the id.
    registry.engines.set("acme-engine", { owner: "acme", endpoint: "127.0.0.1:1" });
    const beats = registry.getEngineCalls.length;
    await vi.waitFor(() => expect(registry.getEngineCalls.length).toBeGreaterThanOrEqual(beats + 5), { timeout: 5_000 });
    // Heartbeats go on, but no registration takes the id back.
    expect(registry.registerCalls).toHaveLength(1);
    expect(registry.engines.get("acme-engine")?.endpoint).toBe("127.0.0.1:1");
    expect(engine.registration).toMatchObject({ state: "registered", registrations: 1 });
    expect(lines.filter(takeover)).toEqual([expect.objectContaining({ level: 40, registeredEndpoint: "127.0.0.1:1" })]);

    // The other instance deregisters: NOT_FOUND, so this one registers again.
    registry.engines.delete("acme-engine");
    await vi.waitFor(() => expect(registry.registerCalls).toHaveLength(2), { timeout: 5_000 });
    await vi.waitFor(() => expect(engine.registration?.registrations).toBe(2), { timeout: 5_000 });
    expect(registry.engines.get("acme-engine")?.endpoint).toBe(engine.endpoint);

    // A later takeover is reported again (once).
    registry.engines.set("acme-engine", { owner: "acme", endpoint: "127.0.0.1:1" });
    const again = registry.getEngineCalls.length;
    await vi.waitFor(() => expect(registry.getEngineCalls.length).toBeGreaterThanOrEqual(again + 3), { timeout: 5_000 });
    expect(registry.registerCalls).toHaveLength(2);
    expect(lines.filter(takeover)).toHaveLength(2);
  });

  it("two live instances under the same id do not keep re-registering over each other", async () => {
    const { registry, address } = await startRegistry();
    const first = await serve({ registry: address });
    await first.registered;
    const second = await serve({ registry: address });
    await second.registered;
    expect(registry.engines.get("acme-engine")?.endpoint).toBe(second.endpoint);

    // Both heartbeat (every 100 ms) for a second: the registration stays with the second one.
    await sleep(1_000);
    expect(registry.registerCalls).toHaveLength(2);
    expect(registry.engines.get("acme-engine")?.endpoint).toBe(second.endpoint);

    // The second stops and deregisters (the registry points at it): the first takes the id over.
    await second.stop();
    expect(registry.deregisterCalls).toHaveLength(1);
    await vi.waitFor(() => expect(registry.engines.get("acme-engine")?.endpoint).toBe(first.endpoint), { timeout: 5_000 });
    expect(registry.registerCalls).toHaveLength(3);
    await vi.waitFor(() => expect(first.registration).toMatchObject({ state: "registered", registrations: 2 }), { timeout: 5_000 });
  });

  it("deregisters on stop() with the owner token, and stops heartbeating", async () => {
    const { registry, address } = await startRegistry();
    const engine = await serve({ registry: address });
    await engine.registered;
    await engine.stop();
    // Its own instance only (a registry without instances ignores the field, as this one does).
    expect(registry.deregisterCalls).toEqual([{ req: { engineId: "acme-engine", instanceId: engine.endpoint }, auth: "Bearer owner-secret" }]);
    expect(registry.engines.size).toBe(0);
    expect(engine.registration?.state).toBe("stopped");
    const heartbeats = registry.getEngineCalls.length;
    await sleep(400);
    expect(registry.getEngineCalls.length).toBe(heartbeats);
  });

  it("does not deregister a registration that now points at another instance", async () => {
    const { registry, address } = await startRegistry();
    const engine = await serve({ registry: address, heartbeatMs: 60_000 });
    await engine.registered;
    registry.engines.set("acme-engine", { owner: "acme", endpoint: "127.0.0.1:1" });
    await engine.stop();
    expect(registry.deregisterCalls).toHaveLength(0);
    expect(registry.engines.get("acme-engine")?.endpoint).toBe("127.0.0.1:1");
  });

  it("keeps retrying while the registry refuses with UNREACHABLE", async () => {
    const { registry, address } = await startRegistry();
    registry.behaviour = (_req, n) => (n <= 2 ? { refusal: Refusal.REFUSAL_UNREACHABLE, message: "GetInfo timed out" } : undefined);
    const engine = await serve({ registry: address });
    const res = await engine.registered;
    expect(res?.ok).toBe(true);
    expect(registry.registerCalls).toHaveLength(3);
  });

  it.each([
    [Refusal.REFUSAL_OWNED_BY_OTHER, /OWNED_BY_OTHER \(held by owner "globex"\): taken/],
    [Refusal.REFUSAL_ALREADY_REGISTERED, /ALREADY_REGISTERED/],
    [Refusal.REFUSAL_ENDPOINT_NOT_ALLOWED, /ENDPOINT_NOT_ALLOWED/],
  ])("rejects `registered` on a permanent refusal (%s) and keeps serving", async (refusal, message) => {
    const { registry, address } = await startRegistry();
    registry.behaviour = () => ({ refusal, existingOwner: refusal === Refusal.REFUSAL_OWNED_BY_OTHER ? "globex" : "", message: "taken" });
    const engine = await serve({ registry: address });
    const err = await engine.registered.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RegistrationError);
    expect((err as RegistrationError).refusal).toBe(refusal);
    expect((err as Error).message).toMatch(message);
    expect(engine.registration?.state).toBe("failed");
    await sleep(400);
    expect(registry.registerCalls).toHaveLength(1);
    // Still serving.
    const client = new ContextEngineServiceClient(engine.address, credentials.createInsecure());
    const info = await new Promise<EngineInfo | undefined>((resolve, reject) =>
      client.getInfo(GetInfoRequest.fromPartial({}), (e: ServiceError | null, r) => (e ? reject(e) : resolve(r.info))),
    );
    client.close();
    expect(info?.id).toBe("acme-engine");
  });

  it.each([
    [status.UNIMPLEMENTED, "RegisterEngine is not built yet"],
    [status.UNAUTHENTICATED, "bad owner token"],
    [status.PERMISSION_DENIED, "owner mismatch"],
  ])("rejects `registered` on gRPC status %s", async (code, details) => {
    const { registry, address } = await startRegistry();
    registry.behaviour = () => ({ error: code, details });
    const engine = await serve({ registry: address });
    const err = (await engine.registered.catch((e: unknown) => e)) as RegistrationError;
    expect(err).toBeInstanceOf(RegistrationError);
    expect(err.code).toBe(code);
    expect(err.message).toContain(details);
    await sleep(300);
    expect(registry.registerCalls).toHaveLength(1);
  });

  it("stop() before the registry ever answered ends retries and rejects `registered`", async () => {
    const port = await freePort();
    const engine = await serve({ registry: `127.0.0.1:${port}` });
    await sleep(200);
    const started = Date.now();
    await engine.stop();
    expect(Date.now() - started).toBeLessThan(3_000);
    await expect(engine.registered).rejects.toThrow(/stopped before it was registered/);
  });

  it("reads the registry settings from the environment", async () => {
    const { registry, address } = await startRegistry();
    const engine = await serve({
      owner: undefined,
      ownerToken: undefined,
      env: { CONTEXTD_REGISTRY: address, CONTEXTD_OWNER: " acme ", CONTEXTD_OWNER_TOKEN: "env-token", CONTEXTD_ENGINE_LISTEN: "127.0.0.1:0" },
    });
    await engine.registered;
    expect(registry.registerCalls[0].auth).toBe("Bearer env-token");
    expect(registry.registerCalls[0].req.owner).toBe("acme");
  });

  it("needs an owner to register", async () => {
    await expect(serve({ registry: "127.0.0.1:1", owner: "", env: {} })).rejects.toThrow(/needs an owner/);
  });

  it("on SIGTERM: deregisters, reports NOT_SERVING, drains and exits 0", async () => {
    const { registry, address } = await startRegistry();
    const before = new Set(process.listeners("SIGTERM"));
    const engine = await serve({ registry: address, handleSignals: true });
    await engine.registered;
    const mine = process.listeners("SIGTERM").filter((l) => !before.has(l));
    expect(mine).toHaveLength(1);
    const exit = vi.spyOn(process, "exit").mockImplementation((() => undefined) as never);
    // Call the SDK's handler directly (emitting a real signal would reach the test runner too).
    (mine[0] as (signal: NodeJS.Signals) => void)("SIGTERM");
    await vi.waitFor(() => expect(exit).toHaveBeenCalledWith(0), { timeout: 10_000 });
    expect(registry.deregisterCalls).toHaveLength(1);
    expect(process.listeners("SIGTERM").filter((l) => !before.has(l))).toHaveLength(0);
    expect(engine.registration?.state).toBe("stopped");
  });
});
