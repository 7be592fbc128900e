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
/**
 * Checks an engine's assembly and returns its size as the host counts it: stored counts for
 * messages of the view, the tokenizer for anything the engine made — never the engine's own
 * figures, which are only its claim.
 */
export function checkAssembled(
  answer: ContextEngineServiceAssembleResponse,
  budget: number,
  countMessage: (message: Message) => number,
): number {
  answer.messages.forEach((m, i) => {
    if (m.role === Role.ROLE_UNSPECIFIED || Role[m.role] === undefined) {
      throw new ContractViolation(`assembled messages[${i}] has no valid role`);
    }
  });
  const tokens = answer.messages.reduce((sum, m) => sum + countMessage(m), 0);
  if (tokens > budget && answer.promptAuthority !== PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW) {
    throw new ContractViolation(`assembled ${tokens} tokens, over the token_budget of ${budget} it was given`);
  }
  return tokens;
}

export function checkCompaction(answer: ContextEngineServiceCompactResponse, view: Message[]): void {
  if (!answer.compacted) return;
  if (!answer.result) throw new ContractViolation("compact answered compacted=true without a result");
  const first = answer.result.firstKeptEntryId;
  if (first && !view.some((m) => m.id === first && !isSummaryMessage(m))) {
    throw new ContractViolation(`first_kept_entry_id "${first}" is not an entry of the session's active view`);
  }
}
