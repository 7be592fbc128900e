import { createHash } from "node:crypto";
import type { AgentMessage } from "contextd/openclaw";
import type { Message } from "contextd/client";

/**
 * Which of OpenClaw's history messages contextd does not have yet.
 *
 * Turns normally reach contextd through commitTurn, which OpenClaw retries from its own outbox
 * until it succeeds. But while a commit is pending OpenClaw runs the next turns on its built-in
 * engine, and those never reach this plugin; nor does the history of a session that began before
 * the plugin was enabled. Both show up as messages in the history OpenClaw hands to assemble that
 * are newer than anything in contextd's view (whose newest messages are always kept verbatim).
 * Message timestamps come from OpenClaw's clock on both sides, so "newer" is a fair test.
 *
 * Summaries OpenClaw derives from its own entries (branchSummary, compactionSummary) are not
 * messages of the turn: they are never sent.
 */
export function missingFromContextd(history: AgentMessage[], view: Message[]): AgentMessage[] {
  let newest = Number.NEGATIVE_INFINITY;
  for (const m of view) if (!m.metadata?.["contextd.kind"] && m.timestampMs > newest) newest = m.timestampMs;
  return history.filter((m) => !DERIVED.has(m.role) && typeof m.timestamp === "number" && m.timestamp > newest);
}

const DERIVED = new Set(["branchSummary", "compactionSummary"]);

/** A deterministic idempotency key for messages that arrive without one (at most 256 characters). */
export function keyFor(kind: string, sessionId: string, messages: unknown[]): string {
  const digest = createHash("sha256").update(sessionId).update("\0").update(JSON.stringify(messages)).digest("hex");
  return `openclaw:${kind}:${digest}`;
}

/** commitTurn's advancement key as contextd's idempotency key (hashed when it is too long). */
export function turnKey(advancementKey: string): string {
  const key = `openclaw:turn:${advancementKey}`;
  return key.length <= 256 && !/[\u0000-\u001f]/.test(key) ? key : `openclaw:turn:${createHash("sha256").update(advancementKey).digest("hex")}`;
}
