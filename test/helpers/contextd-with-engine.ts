/**
 * The usual fixture of a test about one sidecar: a real contextd whose default slot is `engineId`,
 * a runtime client to it, and the TypeScript test engine registered there (owner "team").
 *
 *   const f = await startContextdWithEngine("obs-engine", { compaction: { keep_recent_tokens: 200 } });
 *   await f.cx.assemble(...);  ...  await f.close();
 *
 * `config` is merged over the slot (startContextd merges it over its base config).
 */
import { expect } from "vitest";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "./contextd-process.js";
import { startTsEngine, type EngineProcess } from "./engine-process.js";

export interface ContextdWithEngine {
  contextd: ContextdProcess;
  cx: ContextdClient;
  engine: EngineProcess;
  /** Closes the client, stops the engine (it deregisters) and contextd. */
  close(): Promise<void>;
}

export async function startContextdWithEngine(engineId: string, config: Record<string, unknown> = {}): Promise<ContextdWithEngine> {
  const contextd = await startContextd({ config: { slots: { context_engine: engineId }, ...config } });
  const cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
  const engine = await startTsEngine({ engineId, registry: contextd.address, owner: "team" });
  expect((await engine.registered).ok).toBe(true);
  return {
    contextd,
    cx,
    engine,
    async close() {
      cx.close();
      await engine.stop().catch(() => undefined);
      await contextd.cleanup();
    },
  };
}
