/**
 * newest-first: the README's minimal engine, runnable. Keeps the newest messages that fit the
 * budget (never starting with an orphaned tool result) and lets the host compact.
 *
 *   CONTEXTD_REGISTRY=127.0.0.1:50051 CONTEXTD_OWNER=acme CONTEXTD_OWNER_TOKEN=... node dist/engines/newest-first/main.js
 *
 * Outside this repository, import from "contextd/engine-sdk" instead of the relative path.
 */
import { delegateCompactionToHost, Role, serveEngine, type Message } from "../../src/sdk/engine-sdk.js";

await serveEngine({
  info: { id: process.env.ENGINE_ID ?? "newest-first", name: "Newest messages that fit", version: "1.0.0" },

  // The host's active view arrives oldest first, each message with its token count.
  assemble(req) {
    const budget = req.tokenBudget ?? Number.POSITIVE_INFINITY;
    const kept: Message[] = [];
    let tokens = 0;
    for (let i = req.messages.length - 1; i >= 0; i--) {
      const message = req.messages[i];
      if (tokens + message.tokenCount > budget) break;
      kept.unshift(message);
      tokens += message.tokenCount;
    }
    // Never start with a tool result whose tool call was cut off.
    while (kept[0]?.role === Role.ROLE_TOOL_RESULT) tokens -= kept.shift()!.tokenCount;
    return { messages: kept, estimatedTokens: tokens };
  },

  // This engine does not own compaction: the host runs its native compaction and commits it.
  compact: delegateCompactionToHost,
});
