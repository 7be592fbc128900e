/**
 * Shared start-up of the bench engines: serve the definition with the SDK, print one JSON line
 * `{"event":"listening","address"}` on stdout, then `{"event":"registered","ok"}` once the registry
 * (CONTEXTD_REGISTRY, when set) has answered. Exits when the parent (the bench) goes away.
 */
import { serveEngine, type EngineDefinition } from "../../src/sdk/engine-sdk.js";

export async function runBenchEngine(def: EngineDefinition): Promise<void> {
  const engine = await serveEngine(def);
  process.stdout.write(`${JSON.stringify({ event: "listening", address: engine.address, pid: process.pid })}\n`);
  try {
    const answer = await engine.registered;
    process.stdout.write(`${JSON.stringify({ event: "registered", ok: answer ? answer.ok : null, message: answer?.message ?? "" })}\n`);
  } catch (err) {
    process.stdout.write(`${JSON.stringify({ event: "registered", ok: false, message: err instanceof Error ? err.message : String(err) })}\n`);
  }
  // Do not outlive the bench if it is killed without a chance to stop us.
  const parent = process.ppid;
  setInterval(() => {
    try {
      process.kill(parent, 0);
    } catch {
      process.exit(0);
    }
  }, 1000).unref();
}
