import { isSummaryMessage } from "../contract/messages.js";
import {
  type ContextEngineServiceAssembleResponse,
  type ContextEngineServiceCompactResponse,
} from "../contract/gen/contextd/v1/engine.js";
import { PromptAuthority, Role, type Message } from "../contract/gen/contextd/v1/types.js";
import { ContractViolation } from "../registry/router.js";

/**
 * Contract checks on engine answers. A violation is the engine's fault: the router counts it,
 * quarantines the engine and retries on `legacy`.
 */
export function checkAssembled(answer: ContextEngineServiceAssembleResponse, budget: number, builtin: boolean): void {
  answer.messages.forEach((m, i) => {
    if (m.role === Role.ROLE_UNSPECIFIED || Role[m.role] === undefined) {
      throw new ContractViolation(`assembled messages[${i}] has no valid role`);
    }
  });
  if (builtin) return;
  const counted = answer.messages.reduce((sum, m) => sum + (m.tokenCount || 0), 0);
  const tokens = Math.max(answer.estimatedTokens, counted);
  if (tokens > budget && answer.promptAuthority !== PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW) {
    throw new ContractViolation(`assembled ${tokens} tokens, over the token_budget of ${budget} it was given`);
  }
}

export function checkCompaction(answer: ContextEngineServiceCompactResponse, view: Message[]): void {
  if (!answer.compacted) return;
  if (!answer.result) throw new ContractViolation("compact answered compacted=true without a result");
  const first = answer.result.firstKeptEntryId;
  if (first && !view.some((m) => m.id === first && !isSummaryMessage(m))) {
    throw new ContractViolation(`first_kept_entry_id "${first}" is not an entry of the session's active view`);
  }
}
