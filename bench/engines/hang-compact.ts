/**
 * A sidecar engine whose Compact never answers and ignores cancellation (the promise it returns
 * never settles, whatever the call's AbortSignal says); Assemble passes the messages through.
 * contextd must end such a call at its compact deadline on its own. Engine id: env BENCH_ENGINE_ID
 * (default `hang-compact`).
 */
import { runBenchEngine } from "./ready.js";

await runBenchEngine({
  info: { id: process.env.BENCH_ENGINE_ID || "hang-compact", name: "Bench engine that hangs on Compact", version: "1.0.0" },
  assemble(req) {
    return { messages: req.messages };
  },
  compact() {
    return new Promise<never>(() => undefined);
  },
});
