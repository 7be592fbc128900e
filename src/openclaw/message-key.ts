import { createHash } from "node:crypto";

/**
 * The message key (AppendMessagesRequest.message_keys, TranscriptEntry.message_key) of an OpenClaw
 * transcript entry: `openclaw:<entry id>`. OpenClaw's entry id is what identifies a message for
 * good — the same whether the plugin commits the turn, catches it up after an outage or a fallback,
 * or contextd imports the session file — so contextd stores each OpenClaw message once, whichever
 * path brings it first. An id too long for a key (keys are at most 256 characters) is hashed.
 */
export const OPENCLAW_MESSAGE_KEY_PREFIX = "openclaw:";

const MAX_PLAIN_ID = 240;

export function openclawMessageKey(entryId: string): string {
  if (entryId.length <= MAX_PLAIN_ID && !/[\u0000-\u001f\u007f\ufffd]/.test(entryId)) return `${OPENCLAW_MESSAGE_KEY_PREFIX}${entryId}`;
  return `${OPENCLAW_MESSAGE_KEY_PREFIX}sha256:${createHash("sha256").update(entryId).digest("hex")}`;
}
