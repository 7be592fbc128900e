import { isSummaryMessage, messageText, summaryMessage } from "../contract/messages.js";
import { Role, type Message } from "../contract/gen/contextd/v1/types.js";
import type { ContextOverview } from "../contract/gen/contextd/v1/session.js";
import type { ActiveTotals, ActiveView } from "../store/types.js";

/**
 * The active view as engines and the model see it: the pinned system messages from before the
 * latest compaction's cut (docs/pinned-messages.md), then its summary as a user message, then the
 * kept entries (system messages among them in place). Message ids are entry ids; token counts are
 * the stored ones.
 */
export function viewMessages(view: ActiveView): Message[] {
  const out: Message[] = [];
  for (const m of view.messages.slice(0, view.pinnedCount)) out.push(m.message);
  if (view.compaction) {
    const { entry, summaryTokens } = view.compaction;
    const c = entry.entry?.$case === "compaction" ? entry.entry.value : undefined;
    out.push(summaryMessage(c?.summary ?? "", entry.id, summaryTokens, entry.timestampMs, c?.tokensBefore));
  }
  for (const m of view.messages.slice(view.pinnedCount)) out.push(m.message);
  return out;
}

/** Tokens of the active view by section, for GetSession and `contextctl session` (pinned system messages are message tokens). */
export function contextOverview(totals: ActiveTotals): ContextOverview {
  let messageTokens = 0;
  let toolResultTokens = 0;
  for (const [role, tokens] of totals.tokensByRole) {
    if (role === Role.ROLE_TOOL_RESULT) toolResultTokens += tokens;
    else messageTokens += tokens;
  }
  const summaryTokens = totals.summaryTokens;
  const systemAdditionTokens = totals.session.systemAdditionTokens;
  return {
    summaryTokens,
    messageTokens,
    toolResultTokens,
    systemAdditionTokens,
    totalTokens: summaryTokens + messageTokens + toolResultTokens + systemAdditionTokens,
  };
}

/**
 * The prompt an engine gets when the runtime sent none (AssembleRequest.prompt unset): the text of
 * the latest user message of the view — the message about to be answered when the runtime appended
 * it before assembling. The compaction summary is a user message too, but nobody's prompt.
 */
export function latestUserText(messages: readonly Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role === Role.ROLE_USER && !isSummaryMessage(m)) return messageText(m);
  }
  return "";
}
