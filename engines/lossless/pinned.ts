/**
 * Pinned system messages in the lossless engine (docs/pinned-messages.md).
 *
 * A system message is stored like any other (it keeps its place in the history, so summary spans
 * stay contiguous), but it is never folded into a summary and the model always sees it: assembly
 * puts every system message of the session first, in history order, counted in the budget. So for
 * compaction a system message weighs nothing (it is shown whatever the cut) and a chunk of only
 * system messages is not worth a leaf.
 */
import { isSummaryMessage, Role, type Message } from "contextd/engine-sdk";

export function isSystem(message: { role: Role }): boolean {
  return message.role === Role.ROLE_SYSTEM;
}

/** The messages with every system message weighing 0 tokens, for choosing chunks and the protected tail. */
export function weightless<T extends { role: Role; tokenCount: number }>(messages: readonly T[]): T[] {
  return messages.map((m) => (isSystem(m) ? { ...m, tokenCount: 0 } : m));
}

/** Whether a leaf over `chunk` would summarize anything (it holds a message that is not a system message). */
export function foldsSomething(chunk: ReadonlyArray<{ role: Role }>): boolean {
  return chunk.some((m) => !isSystem(m));
}

/**
 * The part of the host's active view after its compaction summary (the whole view without one):
 * the host's pinned system messages head the view before the summary (host/active-view.ts), and
 * only what follows the summary lines up with this engine's raw tail.
 */
export function hostKeptPart(view: readonly Message[]): { head: Message[]; kept: Message[] } {
  const at = view.findIndex(isSummaryMessage);
  return at < 0 ? { head: [], kept: view.slice() } : { head: view.slice(0, at), kept: view.slice(at + 1) };
}
