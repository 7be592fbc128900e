import { InvalidArgumentError } from "../contract/errors.js";
import { checkTimeMs } from "./rows.js";
import type { NewMessage } from "./types.js";

/** What both stores refuse before any transaction: a session id that is no id. */
export function checkSessionId(sessionId: string): void {
  if (typeof sessionId !== "string" || sessionId === "") {
    throw new InvalidArgumentError("session_id is required");
  }
}

/** What an append is refused for before any transaction (both stores). */
export function checkAppend(sessionId: string, messages: NewMessage[]): void {
  checkSessionId(sessionId);
  if (!Array.isArray(messages)) throw new InvalidArgumentError("messages must be a list");
  const seen = new Map<string, number>();
  messages.forEach((m, i) => {
    if (!m?.key) return;
    const first = seen.get(m.key);
    if (first !== undefined) throw new InvalidArgumentError(`message_keys[${i}] repeats message_keys[${first}] ("${m.key}")`);
    seen.set(m.key, i);
  });
}

/** An end needs a SubagentEndReason (0, unspecified, too) and a time (a time of 0 would read as "not ended"). */
export function checkEnd(reason: number, atMs: number): void {
  if (!Number.isInteger(reason) || reason < 0) throw new InvalidArgumentError(`an end needs a SubagentEndReason, got ${String(reason)}`);
  checkTimeMs(atMs, "atMs");
  if (atMs === 0) throw new InvalidArgumentError("atMs must be a time after the epoch");
}
