import { isSummaryMessage } from "../contract/messages.js";
import type { AssembleResponse, ContextOverview } from "../contract/gen/contextd/v1/session.js";
import { CompactionResult, Message, PromptAuthority, Role, type SessionRef } from "../contract/gen/contextd/v1/types.js";
import { modeName } from "./format.js";
import { messageBody, roleName } from "./preview.js";

/** Where an assembled message is accounted, as in GetSession's context overview. */
export type Section = "summary" | "message" | "tool_result";

/** One message of an assembly, as `contextctl context --json` prints it. */
export interface ContextItem {
  /** Position in what the model is sent, from 1. */
  index: number;
  section: Section;
  role: string;
  id: string;
  tokens: number;
  /**
   * `host`: the count contextd stored at append (or, for the summary, at compaction). `contextctl`:
   * the message has no stored count (an engine made it), so contextctl counted it with o200k_base —
   * what the host does too unless its `tokenizer` is configured otherwise.
   */
  tokensCountedBy: "host" | "contextctl";
  /** Everything the model reads of it, block by block (see preview.ts messageBody). */
  text: string;
  /** The message itself, proto JSON. */
  message: unknown;
}

/** `contextctl context --json`. */
export interface AssembledContext {
  session: { sessionId: string; agentId: string; sessionKey: string };
  budget: number;
  autoCompact: boolean;
  engineId: string;
  mode: string;
  fallbackReason: string;
  promptAuthority: string;
  /** The host's count of `messages` (AssembleResponse.estimated_tokens; the addition not included). */
  estimatedTokens: number;
  /** Set when this call compacted first (only with --compact). */
  compaction: unknown;
  systemPromptAddition: { text: string; tokens: number };
  messages: ContextItem[];
  /** Tokens by section, named as GetSession's ContextOverview (so the two compare field by field). */
  sections: ContextOverview;
}

export function sectionOf(m: Message): Section {
  if (isSummaryMessage(m)) return "summary";
  return m.role === Role.ROLE_TOOL_RESULT ? "tool_result" : "message";
}

export function promptAuthorityName(p: PromptAuthority): string {
  return PromptAuthority[p]?.replace(/^PROMPT_AUTHORITY_/, "") ?? String(p);
}

/**
 * Accounts an Assemble answer: each message with its tokens (the stored count when it carries one
 * and an id — an engine's own figures for messages it made are only its claim, as for the host —
 * else `count`), and the totals by section.
 */
export function accountContext(
  ref: SessionRef,
  budget: number,
  autoCompact: boolean,
  res: AssembleResponse,
  additionTokens: number,
  count: (m: Message) => number,
): AssembledContext {
  const sections: ContextOverview = { summaryTokens: 0, messageTokens: 0, toolResultTokens: 0, systemAdditionTokens: additionTokens, totalTokens: 0 };
  const messages = res.messages.map((m, i): ContextItem => {
    const stored = m.id !== "" && m.tokenCount > 0;
    const tokens = stored ? m.tokenCount : count(m);
    const section = sectionOf(m);
    if (section === "summary") sections.summaryTokens += tokens;
    else if (section === "tool_result") sections.toolResultTokens += tokens;
    else sections.messageTokens += tokens;
    return {
      index: i + 1,
      section,
      role: roleName(m.role),
      id: m.id,
      tokens,
      tokensCountedBy: stored ? "host" : "contextctl",
      text: messageBody(m),
      message: Message.toJSON(m),
    };
  });
  sections.totalTokens = sections.summaryTokens + sections.messageTokens + sections.toolResultTokens + sections.systemAdditionTokens;
  return {
    session: { sessionId: ref.sessionId, agentId: ref.agentId, sessionKey: ref.sessionKey },
    budget,
    autoCompact,
    engineId: res.engineId,
    mode: modeName(res.mode),
    fallbackReason: res.fallbackReason,
    promptAuthority: promptAuthorityName(res.promptAuthority),
    estimatedTokens: res.estimatedTokens,
    compaction: res.compaction ? CompactionResult.toJSON(res.compaction) : null,
    systemPromptAddition: { text: res.systemPromptAddition, tokens: additionTokens },
    messages,
    sections,
  };
}
