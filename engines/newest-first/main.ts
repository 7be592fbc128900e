/**
 * newest-first: the README's minimal engine, runnable. Keeps the pinned messages (system messages
 * and the host's compaction summary, docs/PINNED-MESSAGES.md), then the newest messages that fit
 * what they leave of the budget (never starting with an orphaned tool result), and lets the host
 * compact.
 *
 *   CONTEXTD_REGISTRY=127.0.0.1:50051 CONTEXTD_OWNER=acme CONTEXTD_OWNER_TOKEN=... node dist/engines/newest-first/main.js
 *
 * Outside this repository, import from "contextd/engine-sdk" instead of the relative path.
 */
import { delegateCompactionToHost, PromptAuthority, Role, serveEngine, splitPinned, type Message } from "../../src/sdk/engine-sdk.js";

await serveEngine({
  info: { id: process.env.ENGINE_ID ?? "newest-first", name: "Newest messages that fit", version: "1.0.0" },

  // The host's active view arrives oldest first, each message with its token count.
  assemble(req) {
    const budget = req.tokenBudget ?? Number.POSITIVE_INFINITY;
    // System messages and the compaction summary are always kept, first, and count in the budget.
    const { pinned, rest } = splitPinned(req.messages);
    let tokens = pinned.reduce((sum, m) => sum + m.tokenCount, 0);
    const kept: Message[] = [];
    for (let i = rest.length - 1; i >= 0; i--) {
      const message = rest[i];
      if (tokens + message.tokenCount > budget) break;
      kept.unshift(message);
      tokens += message.tokenCount;
    }
    // Never start with a tool result whose tool call was cut off.
    while (kept[0]?.role === Role.ROLE_TOOL_RESULT) tokens -= kept.shift()!.tokenCount;
    // Over the budget only when the pinned messages alone are: say so (the host then compacts).
    const promptAuthority = tokens > budget ? PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW : PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED;
    return { messages: [...pinned, ...kept], estimatedTokens: tokens, promptAuthority };
  },

  // This engine does not own compaction: the host runs its native compaction and commits it.
  compact: delegateCompactionToHost,
});
