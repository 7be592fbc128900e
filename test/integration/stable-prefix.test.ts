/**
 * AssembleResponse.stable_prefix_messages / _tokens through a real contextd over gRPC: the
 * figure a runtime places its prompt-cache breakpoint by. It must never claim more than is
 * identical to the session's previous answer (a false claim would put the breakpoint inside what
 * changed), and it must claim the whole unchanged prefix of an append-only history.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AssembleResponse } from "../../src/contract/gen/contextd/v1/session.js";
import { type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { isSummaryMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession, moreTurns } from "../fixtures/coding-session.js";
import { system } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

/** As a provider sees a message: what the claim is about. */
const seen = (m: Message) => JSON.stringify([m.role, m.content, m.toolCallId, m.toolName, m.isError]);

/** How many leading messages of `b` are identical, as a provider sees them, to `a`'s. */
function identicalPrefix(a: AssembleResponse, b: AssembleResponse): number {
  if (a.systemPromptAddition !== b.systemPromptAddition) return 0;
  let n = 0;
  while (n < a.messages.length && n < b.messages.length && seen(a.messages[n]) === seen(b.messages[n])) n++;
  return n;
}

describe("the stable prompt prefix an Assemble reports", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;

  beforeAll(async () => {
    cd = await startContextd({ config: { compaction: { reserve_tokens: 1_000, keep_recent_tokens: 3_000, summary_max_chars: 2_000 } } });
    cx = new ContextdClient({ address: cd.address, timeoutMs: 30_000 });
  }, 60_000);
  afterAll(async () => {
    cx?.close();
    await cd?.stop();
  });

  it("an append-only history reports every previous message as stable, with their tokens; the first call reports none", async () => {
    const session = { sessionId: "stable-append", agentId: "a" };
    const cs = codingSession({ turns: 3, seed: 5 });
    await cx.appendMessages({ session, messages: [system("You are terse."), ...cs.messages] });
    const first = await cx.assemble({ session, tokenBudget: 200_000 });
    expect(first.stablePrefixMessages).toBe(0);
    expect(first.stablePrefixTokens).toBe(0);

    await cx.appendMessages({ session, messages: moreTurns(cs.nextTurn, 1, 5) });
    const second = await cx.assemble({ session, tokenBudget: 200_000 });
    expect(second.messages.length).toBeGreaterThan(first.messages.length);
    expect(second.stablePrefixMessages).toBe(first.messages.length);
    expect(second.stablePrefixMessages).toBe(identicalPrefix(first, second));
    // No system prompt addition here: the previous answer's messages are the whole stable prefix.
    expect(second.stablePrefixTokens).toBe(first.estimatedTokens);

    // Asked again with nothing new, everything is stable.
    const third = await cx.assemble({ session, tokenBudget: 200_000 });
    expect(third.stablePrefixMessages).toBe(third.messages.length);
    expect(third.stablePrefixTokens).toBe(third.estimatedTokens);
  });

  it("after a compaction only what is still identical counts: the pinned system message, not the summary or what follows it", async () => {
    const session = { sessionId: "stable-compacted", agentId: "a" };
    const cs = codingSession({ turns: 6, seed: 6 });
    await cx.appendMessages({ session, messages: [system("You are terse."), ...cs.messages] });
    const before = await cx.assemble({ session, tokenBudget: 200_000 });
    await cx.appendMessages({ session, messages: moreTurns(cs.nextTurn, 2, 6) });
    // A budget far under the session: the host compacts first.
    const after = await cx.assemble({ session, tokenBudget: 9_000 });
    expect(after.compaction).toBeDefined();
    expect(after.messages.some(isSummaryMessage)).toBe(true);
    expect(after.stablePrefixMessages).toBe(identicalPrefix(before, after));
    expect(after.stablePrefixMessages).toBe(1);
    expect(after.stablePrefixTokens).toBe(after.messages[0].tokenCount);
  });

  it("sessions are measured apart: another session's answer never makes one look stable", async () => {
    const cs = codingSession({ turns: 2, seed: 7 });
    const a = { sessionId: "stable-a", agentId: "a" };
    const b = { sessionId: "stable-b", agentId: "a" };
    await cx.appendMessages({ session: a, messages: cs.messages });
    await cx.appendMessages({ session: b, messages: cs.messages });
    expect((await cx.assemble({ session: a, tokenBudget: 200_000 })).stablePrefixMessages).toBe(0);
    expect((await cx.assemble({ session: b, tokenBudget: 200_000 })).stablePrefixMessages).toBe(0);
  });
});
