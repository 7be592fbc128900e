// The context bar's segments: an assembled context (what `contextctl context --json` prints,
// src/sdk/assembled-context.ts) split by what each message is. Every token of the answer lands in
// exactly one segment, so the segments add up to its total; free space is what the budget leaves.

export interface ContextItem {
  index: number;
  section: "summary" | "message" | "tool_result";
  role: string;
  id: string;
  tokens: number;
  tokensCountedBy: string;
  text: string;
  message: {
    metadata?: Record<string, string>;
    toolCallId?: string;
    toolName?: string;
    content?: Array<{ toolCall?: { id: string; name: string; argumentsJson?: string } }>;
  };
}

export interface AssembledContext {
  session: { sessionId: string; agentId: string; sessionKey: string };
  budget: number;
  engineId: string;
  mode: string;
  fallbackReason: string;
  promptAuthority: string;
  estimatedTokens: number;
  systemPromptAddition: { text: string; tokens: number };
  messages: ContextItem[];
  sections: { summaryTokens: number; messageTokens: number; toolResultTokens: number; systemAdditionTokens: number; totalTokens: number };
}

export type SegmentKind = "pinned" | "summary" | "history" | "recalled" | "addition" | "free";

export const SEGMENT_LABELS: Record<SegmentKind, string> = {
  pinned: "pinned system",
  summary: "summary",
  history: "kept history",
  recalled: "recalled",
  addition: "system prompt addition",
  free: "free",
};

/**
 * Which segment a message is: the compaction summary; a system message (pinned: never summarized);
 * recalled material — a message an engine brought back out of order (it says so in its metadata,
 * as the recall engine's `recall.recalled_for`) or made itself (no transcript id); else kept history.
 */
export function segmentOf(m: ContextItem): SegmentKind {
  if (m.section === "summary") return "summary";
  if (m.role === "system") return "pinned";
  const meta = m.message.metadata ?? {};
  if (m.id === "" || Object.keys(meta).some((k) => k.endsWith("recalled_for"))) return "recalled";
  return "history";
}

export interface Segment {
  kind: SegmentKind;
  tokens: number;
}

export function segments(ctx: AssembledContext): Segment[] {
  const sum: Record<SegmentKind, number> = { pinned: 0, summary: 0, history: 0, recalled: 0, addition: ctx.systemPromptAddition.tokens, free: 0 };
  for (const m of ctx.messages) sum[segmentOf(m)] += m.tokens;
  sum.free = Math.max(0, ctx.budget - ctx.sections.totalTokens);
  return (Object.keys(SEGMENT_LABELS) as SegmentKind[]).map((kind) => ({ kind, tokens: sum[kind] }));
}
