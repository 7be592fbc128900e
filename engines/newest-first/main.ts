/**
 * newest-first: the minimal engine of docs/engines.md ("Write your own engine"), runnable. Keeps the pinned messages (system messages
 * and the host's compaction summary, docs/pinned-messages.md), then the newest messages that fit
 * what they leave of the budget (never starting with an orphaned tool result), and lets the host
 * compact.
 *
 *   CONTEXTD_REGISTRY=127.0.0.1:50051 CONTEXTD_OWNER=acme CONTEXTD_OWNER_TOKEN=... node dist/engines/newest-first/main.js
 *
 * Outside this repository, import from "contextd/engine-sdk" instead of the relative path.
 */
import { pathToFileURL } from "node:url";
import {
  delegateCompactionToHost,
  keepMessages,
  PromptAuthority,
  Role,
  serveEngine,
  splitPinned,
  type EngineDefinition,
  type Message,
} from "../../src/sdk/engine-sdk.js";

/** The engine (test/unit/sdk/engine-sdk.test.ts serves this very object). */
export const newestFirst: EngineDefinition = {
  info: { id: process.env.ENGINE_ID ?? "newest-first", name: "Newest messages that fit", version: "1.0.0" },

  // The host's active view arrives oldest first, each message with its token count.
  assemble(req) {
    // System messages and the compaction summary are pinned: always kept, first.
    const [pinned, rest] = splitPinned(req.messages);
    const budget = req.tokenBudget ?? Number.POSITIVE_INFINITY;
    let tokens = pinned.reduce((sum, m) => sum + m.tokenCount, 0);
    const kept: Message[] = [];
    for (let i = rest.length - 1; i >= 0 && tokens + rest[i].tokenCount <= budget; i--) {
      kept.unshift(rest[i]);
      tokens += rest[i].tokenCount;
    }
    // Never start with a tool result whose tool call was cut off.
    while (kept[0]?.role === Role.ROLE_TOOL_RESULT) tokens -= kept.shift()!.tokenCount;
    // Over the budget only if the pinned messages alone are: say so rather than break the contract.
    const promptAuthority = tokens > budget ? PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW : PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED;
    // Answered by reference: the ids of the request's messages it keeps, not the messages again.
    return { ...keepMessages(req, [...pinned, ...kept]), estimatedTokens: tokens, promptAuthority };
  },

  // This engine does not own compaction: the host runs its native compaction and commits it.
  compact: delegateCompactionToHost,
};

// Run as a program (`node dist/engines/newest-first/main.js`), not when a test imports the definition.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await serveEngine(newestFirst);
