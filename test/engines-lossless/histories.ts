/**
 * Synthetic agent histories with host-style entry ids and token counts, for property tests.
 * A turn is a user request, tool exchanges (an assistant message making 1–3 calls, then their
 * results) and an optional wrap-up; token counts are chosen by the test, not by a tokenizer (the
 * engine trusts the host's counts), so large sessions stay cheap to build.
 */
import fc from "fast-check";
import { type Message, Role } from "../../src/contract/gen/contextd/v1/types.js";
import { assistant, toolCall, toolResult, user } from "../fixtures/messages.js";

export interface ExchangeSpec {
  assistant: number;
  results: number[];
}

export interface TurnSpec {
  user: number;
  exchanges: ExchangeSpec[];
  wrapUp: number | null;
}

export const exchangeSpec = (maxTokens = 3000): fc.Arbitrary<ExchangeSpec> =>
  fc.record({
    assistant: fc.integer({ min: 5, max: 400 }),
    results: fc.array(fc.integer({ min: 5, max: maxTokens }), { minLength: 1, maxLength: 3 }),
  });

export const turnSpec = (maxTokens = 3000): fc.Arbitrary<TurnSpec> =>
  fc.record({
    user: fc.integer({ min: 5, max: 600 }),
    exchanges: fc.array(exchangeSpec(maxTokens), { maxLength: 4 }),
    wrapUp: fc.option(fc.integer({ min: 5, max: 400 }), { nil: null }),
  });

/** Builds the messages of `turns`, then a pending user request of `pending` tokens (unless null). */
export function buildHistory(turns: readonly TurnSpec[], pending: number | null = 50, prefix = "e"): Message[] {
  const out: Message[] = [];
  let call = 0;
  const push = (m: Message, tokens: number) => {
    out.push({ ...m, id: `${prefix}${String(out.length + 1).padStart(5, "0")}`, tokenCount: tokens });
  };
  turns.forEach((t, ti) => {
    push(user(`request ${ti}: please do task number ${ti}`), t.user);
    for (const x of t.exchanges) {
      const ids = x.results.map(() => `call_${++call}`);
      push(
        assistant(
          `working on ${ti}`,
          ids.map((id) => toolCall(id, "read_file", { path: `src/f${ti}.ts` })),
        ),
        x.assistant,
      );
      ids.forEach((id, i) => push(toolResult(id, "read_file", `contents of src/f${ti}.ts (${id})`), x.results[i]));
    }
    if (t.wrapUp !== null) push(assistant(`done with ${ti}`), t.wrapUp);
  });
  if (pending !== null) push(user(`request ${turns.length}: the next task`), pending);
  return out;
}

/** Index of the latest user message, or -1. */
export function latestUserIndex(messages: readonly Message[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].role === Role.ROLE_USER) return i;
  return -1;
}

/** A message's pair fields and token count, as the engine's pure functions take them. */
export function meta(m: Message) {
  const toolCallIds = m.content.flatMap((b) => (b.block?.$case === "toolCall" ? [b.block.value.id] : []));
  return { role: m.role, tokenCount: m.tokenCount, toolCallIds, toolCallId: m.toolCallId };
}
