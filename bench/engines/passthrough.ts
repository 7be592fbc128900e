/**
 * A pass-through sidecar engine: Assemble answers the messages it was given (the host's active
 * view), Compact delegates to the host. It does no work of its own, so what a call through contextd
 * to it costs is contextd's overhead plus one gRPC hop. Engine id: env BENCH_ENGINE_ID
 * (default `passthrough`).
 */
import { delegateCompactionToHost } from "../../src/sdk/engine-sdk.js";
import { runBenchEngine } from "./ready.js";

await runBenchEngine({
  info: { id: process.env.BENCH_ENGINE_ID || "passthrough", name: "Bench pass-through engine", version: "1.0.0" },
  assemble(req) {
    let tokens = 0;
    for (const m of req.messages) tokens += m.tokenCount;
    return { messages: req.messages, estimatedTokens: tokens };
  },
  compact: delegateCompactionToHost,
});
