import type * as E from "../contract/gen/contextd/v1/engine.js";
import { MESSAGE_OVERHEAD_TOKENS } from "../tokens/index.js";

/**
 * How large an engine's answer may be (`engines.answer_limits`). An engine is one tenant's plugin in
 * a process every tenant shares: an answer is decoded, validated and counted on contextd's event
 * loop, so its size must be bounded by what the request can justify before any of that happens —
 * a 40 MB Assemble answer once kept contextd at 100 % CPU for minutes.
 */
export interface AnswerLimits {
  /**
   * No answer is larger, whatever its request: the engine channels' receive limit, which grpc-js
   * enforces on the message's length prefix, before it reads the message.
   */
  maxBytes: number;
  /** What any answer may take whatever its budget: ids, reasons, a short summary. */
  baseBytes: number;
  /**
   * Per token of the request's budget (Assemble, Compact): a token is ~4 bytes of text, but a
   * message also carries ids, metadata and tool-call JSON that count few tokens, hence the margin.
   */
  bytesPerBudgetToken: number;
}

export const DEFAULT_ANSWER_LIMITS: AnswerLimits = { maxBytes: 64 * 1024 * 1024, baseBytes: 1024 * 1024, bytesPerBudgetToken: 64 };

/** What one answer may hold, checked on its wire bytes before they are decoded. */
export interface AnswerBound {
  bytes: number;
  /** Top-level repeated fields, by field number: at most `max` entries each. */
  repeated: Array<{ field: number; name: string; max: number }>;
}

/** Messages an engine may add beyond one per MESSAGE_OVERHEAD_TOKENS of its budget (a summary, notes). */
const ADDED_MESSAGES = 64;

/**
 * An Assemble answer may be as large as its request (an engine may echo the whole view back) or
 * as the budget justifies, whichever is more, and never over `maxBytes`. Every message counts at
 * least MESSAGE_OVERHEAD_TOKENS, so more messages than the budget can hold (or than the view had)
 * is over budget already; kept_entry_ids name messages of the request, each once.
 */
export function assembleBound(limits: AnswerLimits, req: E.ContextEngineServiceAssembleRequest): (requestBytes: number) => AnswerBound {
  const budget = req.tokenBudget;
  const byBudget = budget === undefined ? Infinity : limits.baseBytes + limits.bytesPerBudgetToken * budget;
  const messages = Math.max(req.messages.length, budget === undefined ? Infinity : Math.ceil(budget / MESSAGE_OVERHEAD_TOKENS)) + ADDED_MESSAGES;
  return (requestBytes) => ({
    bytes: Math.min(limits.maxBytes, Math.max(requestBytes, byBudget)),
    repeated: [
      { field: 1, name: "messages", max: messages },
      { field: 5, name: "kept_entry_ids", max: req.messages.length },
    ],
  });
}

/** A Compact answer carries a summary, which must fit the budget it was given (else the view's size). */
export function compactBound(limits: AnswerLimits, req: E.ContextEngineServiceCompactRequest): () => AnswerBound {
  const tokens = req.tokenBudget || req.currentTokenCount;
  return () => ({ bytes: Math.min(limits.maxBytes, limits.baseBytes + limits.bytesPerBudgetToken * tokens), repeated: [] });
}

/** Every other answer holds flags, counts, ids and reasons. */
export function smallBound(limits: AnswerLimits): () => AnswerBound {
  return () => ({ bytes: Math.min(limits.maxBytes, limits.baseBytes), repeated: [] });
}

/**
 * Why `answer` (protobuf wire bytes) breaks `bound`, or undefined. Reads only the top-level field
 * tags and lengths — never a nested message — so its cost is the number of top-level fields, and it
 * stops at the first entry over a limit. Malformed bytes are left to the decoder to refuse.
 */
export function answerProblem(answer: Uint8Array, bound: AnswerBound): string | undefined {
  if (answer.length > bound.bytes) return `is ${answer.length} bytes, over the ${bound.bytes} its request allows (engines.answer_limits)`;
  if (bound.repeated.length === 0) return undefined;
  const counts = new Map<number, number>();
  let pos = 0;
  const varint = (): number => {
    let value = 0;
    for (let shift = 1; pos < answer.length; shift *= 128) {
      const byte = answer[pos++];
      value += (byte & 0x7f) * shift;
      if (byte < 0x80) return value;
      if (shift > 2 ** 56) return NaN;
    }
    return NaN;
  };
  while (pos < answer.length) {
    const tag = varint();
    if (Number.isNaN(tag)) return undefined;
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (wire === 0) varint();
    else if (wire === 1) pos += 8;
    else if (wire === 2) pos += varint();
    else if (wire === 5) pos += 4;
    else return undefined;
    if (Number.isNaN(pos)) return undefined;
    const limit = bound.repeated.find((r) => r.field === field);
    if (!limit) continue;
    const n = (counts.get(field) ?? 0) + 1;
    counts.set(field, n);
    if (n > limit.max) return `holds more than ${limit.max} ${limit.name}, more than its request allows (engines.answer_limits)`;
  }
  return undefined;
}
