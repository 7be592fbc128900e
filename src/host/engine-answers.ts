import { isSummaryMessage } from "../contract/messages.js";
import { type ContextEngineServiceAssembleResponse, type ContextEngineServiceCompactResponse } from "../contract/gen/contextd/v1/engine.js";
import { ContextProjection_Mode, PromptAuthority, Role, type ContextProjection, type Message } from "../contract/gen/contextd/v1/types.js";
import { ContractViolation } from "../contract/errors.js";
import { quote } from "../contract/quote.js";
import { hasUnsafeCharacters } from "../contract/unsafe-characters.js";

/**
 * Contract checks on engine answers. A violation is the engine's fault: the router counts it,
 * quarantines the engine and retries on `legacy`.
 */
/**
 * Checks an engine's assembly and returns its size as the host counts it: stored counts for
 * messages of the view, the tokenizer for anything the engine made — never the engine's own
 * figures, which are only its claim.
 */
export function checkAssembled(answer: ContextEngineServiceAssembleResponse, budget: number, countMessage: (message: Message) => number): number {
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

/** An epoch or fingerprint is a short, printable token: it reaches runtimes and their logs. */
const MAX_PROJECTION_TEXT = 128;

/** ContextEngineServiceAssembleResponse.context_projection, as engine.proto states it. */
export function checkProjection(projection: ContextProjection | undefined): void {
  if (!projection) return;
  if (ContextProjection_Mode[projection.mode] === undefined || projection.mode === ContextProjection_Mode.UNRECOGNIZED) {
    throw new ContractViolation(`context_projection.mode ${projection.mode} is not a known value`);
  }
  if (projection.mode === ContextProjection_Mode.MODE_THREAD_BOOTSTRAP && !projection.epoch) {
    throw new ContractViolation("context_projection is THREAD_BOOTSTRAP without an epoch");
  }
  for (const [field, text] of [
    ["epoch", projection.epoch],
    ["fingerprint", projection.fingerprint],
  ] as const) {
    if (text.length > MAX_PROJECTION_TEXT) throw new ContractViolation(`context_projection.${field} is longer than ${MAX_PROJECTION_TEXT} characters`);
    if (hasUnsafeCharacters(text)) throw new ContractViolation(`context_projection.${field} holds control or invisible characters`);
  }
}

export function checkCompaction(answer: ContextEngineServiceCompactResponse, view: Message[]): void {
  if (!answer.compacted) return;
  if (!answer.result) throw new ContractViolation("compact answered compacted=true without a result");
  const first = answer.result.firstKeptEntryId;
  if (first && !view.some((m) => m.id === first && !isSummaryMessage(m))) {
    throw new ContractViolation(`first_kept_entry_id ${quote(first)} is not an entry of the session's active view`);
  }
}

/**
 * An answer by reference (`kept_entry_ids`, engine.proto) made whole: the engine's added messages,
 * then the host's own copy of each kept message of `sent`. Ids must name messages of `sent`, once
 * each, in its order — else the engine broke the contract.
 */
export function resolveKeptEntries(answer: ContextEngineServiceAssembleResponse, sent: readonly Message[]): void {
  if (answer.keptEntryIds.length === 0) return;
  const position = new Map<string, number>();
  sent.forEach((m, i) => m.id && position.set(m.id, i));
  const kept: Message[] = [];
  let last = -1;
  answer.keptEntryIds.forEach((id, i) => {
    const at = position.get(id);
    if (at === undefined) throw new ContractViolation(`kept_entry_ids[${i}] ${quote(id)} is no message of the view the engine was sent`);
    if (at <= last) throw new ContractViolation(`kept_entry_ids[${i}] ${quote(id)} is named twice or out of the view's order`);
    last = at;
    kept.push(sent[at]);
  });
  answer.messages = answer.messages.length === 0 ? kept : [...answer.messages, ...kept];
  answer.keptEntryIds = [];
}
