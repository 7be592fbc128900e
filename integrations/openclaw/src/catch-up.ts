import { createHash } from "node:crypto";
import { jsonEqual, openclawMessageKey, OPENCLAW_MESSAGE_KEY_PREFIX, type AgentMessage } from "contextd/openclaw";
import type { TranscriptAnchor } from "./openclaw-api.js";
import type { StoredMessage } from "./openclaw-runtime.js";

/**
 * What contextd holds of an OpenClaw session is decided by identity, never by position: every
 * message the plugin appends carries the message key `openclaw:<entry id>` of its OpenClaw
 * transcript entry (contextd/openclaw's openclawMessageKey; ImportTranscript keys imported messages
 * the same way), and contextd stores a message whose key the session already holds only once. So
 * the two ways a turn reaches contextd — commitTurn, and catching up on turns that never reached
 * the plugin — can overlap without writing anything twice, in either order, on any retry.
 *
 * Catch-up reads OpenClaw's *stored* messages (openclaw-runtime.ts), never the copy OpenClaw hands
 * to assemble: that one is made for the model (tool call ids rewritten, tool results' `details`
 * dropped, some messages left out).
 */

/** Summaries OpenClaw derives from its own entries: never appended (contextd compacts on its own). */
const DERIVED = new Set(["branchSummary", "compactionSummary"]);

/** What GetSession tells of where the session's messages end. */
export interface ContextdMark {
  lastMessageKey: string;
  lastMessageTimestampMs: number;
}

/**
 * The stored messages contextd does not have yet: those after the newest one it holds by key. When
 * that key is not on OpenClaw's active branch (a session whose messages were appended before the
 * plugin keyed them, or a branch OpenClaw left), those newer than contextd's newest message; any of
 * them contextd holds by key after all is held, not stored again.
 */
export function missingFromContextd(stored: StoredMessage[], mark: ContextdMark): StoredMessage[] {
  const candidates = stored.filter((s) => !DERIVED.has(s.message.role));
  if (mark.lastMessageKey.startsWith(OPENCLAW_MESSAGE_KEY_PREFIX)) {
    for (let i = candidates.length - 1; i >= 0; i--) {
      if (openclawMessageKey(candidates[i].entryId) === mark.lastMessageKey) return candidates.slice(i + 1);
    }
  }
  return candidates.filter((s) => typeof s.message.timestamp === "number" && s.message.timestamp > mark.lastMessageTimestampMs);
}

/**
 * The message keys of a committed turn's messages. OpenClaw hands commitTurn the turn's stored
 * messages without their entry ids, but says where the turn starts and ends on the active branch
 * (`admission`, `terminal`): message i is the stored message at position admission + i. When those
 * anchors do not check out, each message is found among the stored ones by content. "" for a message
 * that cannot be placed (it is then stored as it comes).
 */
export function turnMessageKeys(messages: AgentMessage[], stored: StoredMessage[], admission?: TranscriptAnchor, terminal?: TranscriptAnchor): string[] {
  const start = admission?.activeMessagePosition;
  if (typeof start === "number" && messages.length > 0) {
    const span = stored.slice(start, start + messages.length);
    const anchored =
      span.length === messages.length &&
      (!admission?.entryId || span[0].entryId === admission.entryId) &&
      (!terminal?.entryId || span[span.length - 1].entryId === terminal.entryId) &&
      span.every((s, i) => jsonEqual(s.message, messages[i]));
    if (anchored) return span.map((s) => openclawMessageKey(s.entryId));
  }
  const byContent = new Map<string, string[]>();
  for (const s of stored) {
    const k = JSON.stringify(s.message);
    const ids = byContent.get(k);
    if (ids) ids.push(s.entryId);
    else byContent.set(k, [s.entryId]);
  }
  return messages.map((m) => {
    const id = byContent.get(JSON.stringify(m))?.shift();
    return id ? openclawMessageKey(id) : "";
  });
}

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
