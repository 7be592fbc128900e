import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startPythonEngine, startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { eventually, registryClient } from "../helpers/registry-client.js";

describe("registry restart", () => {
  const processes: ContextdProcess[] = [];
  let sdkEngine: EngineProcess;
  let pyEngine: EngineProcess;
  let listen: string;

  beforeAll(async () => {
    listen = `127.0.0.1:${await getFreePort()}`;
    processes.push(
      await startContextd({ config: { listen, slots: { context_engine: "ts-engine" }, engines: { health: { interval: "300ms", timeout: "200ms" } } } }),
    );
  });
  afterAll(async () => {
    await sdkEngine?.stop().catch(() => undefined);
    await pyEngine?.stop().catch(() => undefined);
    for (const p of processes) await p.cleanup();
  });

  it("engines register again by themselves, and quarantine records survive", async () => {
    const first = processes[0];
    sdkEngine = await startTsEngine({ engineId: "ts-engine", registry: listen, owner: "team" });
    pyEngine = await startPythonEngine({ engineId: "py-engine", registry: listen, owner: "team" });
    expect((await sdkEngine.registered).ok).toBe(true);
    expect((await pyEngine.registered).ok).toBe(true);
    const registry = registryClient(listen);
    await registry.isolate("py-engine", "kept across restarts");
    registry.close();

    await first.kill9();
    const second = await first.restart({ config: { listen } });
    processes.push(second);
    expect(second.address).toBe(listen);

    const after = registryClient(listen);
    const cx = new ContextdClient({ address: listen });
    try {
      // The manual quarantine was persisted and restored.
      expect((await after.get("py-engine")).quarantine).toMatchObject({ manual: true, reason: "kept across restarts" });
      // The SDK engine notices the restart (heartbeat) and is routable again.
      await eventually(
        async () => {
          await cx.appendMessages({ session: { sessionId: "after-restart" }, messages: [user("hello again")] });
          const res = await cx.assemble({ session: { sessionId: "after-restart" }, tokenBudget: 4_000 });
          return res.engineId === "ts-engine" && res.mode === Mode.MODE_NORMAL;
        },
        20_000,
        300,
      );
      const status = await after.get("ts-engine");
      expect(status.endpoint).toBe(sdkEngine.address);
    } finally {
      after.close();
      cx.close();
    }
  });

  it("a registry that lost its state (new data dir) gets the SDK engine registered again", async () => {
    const current = processes[processes.length - 1];
    await current.kill9();
    const fresh = await startContextd({ config: { listen, slots: { context_engine: "ts-engine" } } });
    processes.push(fresh);
    const registry = registryClient(listen);
    try {
      const status = await eventually(async () => registry.get("ts-engine").catch(() => undefined), 20_000, 300);
      expect(status.owner).toBe("team");
      expect(status.endpoint).toBe(sdkEngine.address);
    } finally {
      registry.close();
    }
  });
});
