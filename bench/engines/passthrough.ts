/**
 * A pass-through sidecar engine: Assemble keeps the messages it was given (the host's active
 * view; answered by their ids), Compact delegates to the host. It does no work of its own, so what a call through contextd
 * to it costs is contextd's overhead plus one gRPC hop. Engine id: env BENCH_ENGINE_ID
 * (default `passthrough`).
 */
import { delegateCompactionToHost, keepMessages } from "../../src/sdk/engine-sdk.js";
import { runBenchEngine } from "./ready.js";

await runBenchEngine({
  info: { id: process.env.BENCH_ENGINE_ID || "passthrough", name: "Bench pass-through engine", version: "1.0.0" },
  assemble(req) {
    let tokens = 0;
    for (const m of req.messages) tokens += m.tokenCount;
    // Every message kept, answered by id as any SDK engine can (engine.proto kept_entry_ids).
    return { ...keepMessages(req, req.messages), estimatedTokens: tokens };
  },
  compact: delegateCompactionToHost,
});
