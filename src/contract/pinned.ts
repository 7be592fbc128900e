import { Role, type Message } from "./gen/contextd/v1/types.js";
import { isSummaryMessage } from "./messages.js";

/**
 * Pinned messages (docs/pinned-messages.md): what an engine that chooses a subset of the host's
 * active view must always keep.
 *
 * - Every ROLE_SYSTEM message. The host never summarizes one away: after a compaction the system
 *   messages from before its cut head the view, verbatim, and those after it stay in place.
 * - The host's compaction summary (SUMMARY_METADATA_KEY): it is the only account of what came
 *   before it.
 *
 * Pinned messages count against the token budget like any other; an engine fits the rest into
 * what they leave. These helpers are what the sample engines use, and what `contextd.pinned` is in
 * the Python package.
 */

/** A system message: never summarized, never dropped by the sample engines. */
export function isSystemMessage(message: Message): boolean {
  return message.role === Role.ROLE_SYSTEM;
}

/** A message an engine keeps whatever the budget: a system message or the host's compaction summary. */
export function isPinned(message: Message): boolean {
  return isSystemMessage(message) || isSummaryMessage(message);
}

/**
 * The view split into `[pinned, rest]`, each in view order (a pair, as `split_pinned` in Python):
 * `const [pinned, rest] = splitPinned(req.messages)`.
 */
export function splitPinned<M extends Message>(messages: readonly M[]): [pinned: M[], rest: M[]] {
  const pinned: M[] = [];
  const rest: M[] = [];
  for (const m of messages) (isPinned(m) ? pinned : rest).push(m);
  return [pinned, rest];
}
