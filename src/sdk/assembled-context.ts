import { isSummaryMessage } from "../contract/messages.js";
import type { AssembleResponse, ContextOverview } from "../contract/gen/contextd/v1/session.js";
import { CompactionResult, Message, PromptAuthority, Role, type SessionRef } from "../contract/gen/contextd/v1/types.js";
import type { Tokenizer } from "../tokens/tokenizer.js";
import { messageBody, modeName, roleName } from "./message-text.js";
import type { CallOptions, ContextdClient } from "./runtime-client.js";

/**
 * What the model would be sent on a turn, accounted message by message with tokens and totals by
 * section: `contextctl context` prints it, the history tools' `context` (history-tools.ts) gives it
 * to a model. One Assemble, routed as the runtime's own is.
 */

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
   * the message has no stored count (an engine made it), so the client counted it with o200k_base —
   * what the host does too unless its `tokenizer` is configured otherwise. (The name is kept from
   * `contextctl context --json`, whose shape this is.)
   */
  tokensCountedBy: "host" | "contextctl";
  /** Everything the model reads of it, block by block (message-text.ts messageBody). */
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

/** What to preview (AssembleRequest's fields; the session's own agent id and key unless `agentId`). */
export interface PreviewOptions {
  /** AssembleRequest.token_budget. */
  budget: number;
  /**
   * false: the Assemble carries `auto_compact: false`, so looking never compacts the session; an
   * over-budget view is then shown as it is (mode DEGRADED). true: the host compacts first when
   * the view is over the budget, as a real turn would — that commits a compaction entry.
   */
  autoCompact: boolean;
  /** AssembleRequest.prompt (some engines retrieve by it); undefined: the latest user message. */
  prompt?: string;
  model?: string;
  /** Route as this agent id (default: the session's own). */
  agentId?: string;
}

/** An assembly accounted ({@link accountContext}), with the messages as they came. */
export interface PreviewedContext {
  ctx: AssembledContext;
  raw: Message[];
}

/**
 * SessionService.Assemble for `sessionId` as the runtime's turn would call it, accounted. The
 * session's own labels route it: the agent id selects the engine (slots.agents); GetSession also
 * turns an unknown id into NOT_FOUND before anything runs.
 */
export async function previewContext(client: ContextdClient, sessionId: string, opts: PreviewOptions, call?: CallOptions): Promise<PreviewedContext> {
  const info = (await client.getSession({ session: { sessionId } }, call)).info;
  const ref: SessionRef = { sessionId, sessionKey: info?.session?.sessionKey ?? "", agentId: opts.agentId ?? info?.session?.agentId ?? "" };
  const res = await client.assemble(
    { session: ref, tokenBudget: opts.budget, autoCompact: opts.autoCompact, prompt: opts.prompt, model: opts.model ?? "" },
    call,
  );
  let tokenizer: Tokenizer | undefined;
  const local = async (): Promise<Tokenizer> => {
    // Loaded only when needed: the BPE tables take a moment to load.
    const { createTokenizer } = await import("../tokens/create-tokenizer.js");
    return (tokenizer ??= createTokenizer("o200k_base"));
  };
  if (res.messages.some((m) => !(m.id && m.tokenCount > 0))) await local();
  let additionTokens = 0;
  if (res.systemPromptAddition) {
    // The host counts the addition with its own tokenizer and keeps it as the overview's
    // system_addition_tokens; read it back rather than guess which tokenizer it has. (0 only if
    // another Assemble without an addition got in between: then count it here.)
    additionTokens = (await client.getSession({ session: { sessionId } }, call)).info?.overview?.systemAdditionTokens ?? 0;
    if (!additionTokens) additionTokens = (await local()).countText(res.systemPromptAddition);
  }
  const count = (m: Message) => tokenizer?.countMessage(m) ?? 0;
  return { ctx: accountContext(ref, opts.budget, opts.autoCompact, res, additionTokens, count), raw: res.messages };
}
