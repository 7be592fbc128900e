import { PromptCacheRetention, Role, type Message, type PromptCache, type SessionRef } from "../contract/gen/contextd/v1/types.js";
import { encodedSize } from "../contract/received-messages.js";
import { fieldError, LimitExceededError } from "../contract/errors.js";
import { ROLE_NAMES } from "../contract/messages.js";

export interface AppendLimits {
  maxMessageBytes: number;
  maxMessagesPerAppend: number;
  maxSessionEntries: number;
  /** `limits.max_import_bytes`: the largest ImportTranscript file. */
  maxImportBytes: number;
}

const MAX_ID_LENGTH = 256;
/** The furthest a JavaScript Date reaches from the epoch, either way (ECMA-262 §21.4.1.1). */
const MAX_DATE_MS = 8.64e15;

/**
 * An id-like string: at most 256 characters, no control characters, and valid UTF-8 on the wire.
 * Protobuf decoding replaces each invalid UTF-8 sequence with U+FFFD, so two different byte strings
 * would arrive as one id (and name one session): an id holding U+FFFD is refused, since no client
 * can tell whether it sent that character or broken bytes.
 */
export function checkIdText(value: string, field: string): string {
  if (value.length > MAX_ID_LENGTH) throw fieldError(field, `is longer than ${MAX_ID_LENGTH} characters (it has ${value.length})`);
  if (/[\u0000-\u001f\u007f]/.test(value)) throw fieldError(field, "contains control characters");
  if (value.includes("\ufffd")) throw fieldError(field, "is not valid UTF-8 (or holds U+FFFD, which contextd takes for broken bytes)");
  return value;
}

/** A session reference must name a session; its id is the key everything else hangs off. */
export function requireSession(session: SessionRef | undefined, field = "session"): SessionRef {
  const id = session?.sessionId?.trim() ?? "";
  if (!id) throw fieldError(`${field}.session_id`, "is required");
  checkIdText(id, `${field}.session_id`);
  const sessionKey = checkIdText(session?.sessionKey ?? "", `${field}.session_key`);
  const agentId = checkIdText(session?.agentId ?? "", `${field}.agent_id`);
  return { sessionId: id, sessionKey, agentId };
}

/**
 * An enum field must hold one of its enum's values: proto3 keeps an unknown number as it came,
 * and code that switches on the value would treat it as some default. `required` also refuses 0.
 */
export function requireEnum(value: number, values: Record<string, string | number>, field: string, required = false): number {
  const name = values[value];
  const known = () =>
    Object.entries(values)
      .filter(([, v]) => typeof v === "number" && v >= 0 && (!required || v !== 0))
      .map(([k]) => k)
      .join(", ");
  if (required && value === 0) throw fieldError(field, `is required (${known()})`);
  if (typeof name !== "string" || name === "UNRECOGNIZED") {
    throw fieldError(field, `${Number.isSafeInteger(value) ? value : "?"} is not a known value (${known()})`);
  }
  return value;
}

export function requireBudget(tokenBudget: number | undefined): number {
  if (!tokenBudget || tokenBudget <= 0) throw fieldError("token_budget", "must be greater than 0");
  return tokenBudget;
}

/** An idempotency key is optional; when set it is at most 256 characters of printable text. */
export function checkIdempotencyKey(key: string | undefined): string {
  return checkIdText(key ?? "", "idempotency_key");
}

/**
 * AppendMessagesRequest.message_keys: none at all (undefined), or one per message — each at most
 * 256 characters of printable text, "" for a message without a key, none repeated.
 */
export function checkMessageKeys(keys: readonly string[] | undefined, messageCount: number): string[] | undefined {
  if (!keys || keys.length === 0) return undefined;
  if (keys.length !== messageCount) {
    throw fieldError("message_keys", `has ${keys.length} keys for ${messageCount} messages: give one per message ("" for none), or none at all`);
  }
  const first = new Map<string, number>();
  keys.forEach((key, i) => {
    checkIdText(key, `message_keys[${i}]`);
    if (key === "") return;
    const j = first.get(key);
    if (j !== undefined) throw fieldError(`message_keys[${i}]`, `repeats message_keys[${j}] ("${key}")`);
    first.set(key, i);
  });
  return keys.some((k) => k !== "") ? [...keys] : undefined;
}

/**
 * Checks a whole batch before anything is written, so a bad message rejects the batch and leaves
 * the transcript as it was. Returns each message's encoded size.
 */
export function validateAppend(messages: Message[], limits: AppendLimits): void {
  if (messages.length === 0) throw fieldError("messages", "is empty: append at least one message");
  if (messages.length > limits.maxMessagesPerAppend) {
    throw new LimitExceededError(`messages has ${messages.length} messages, over limits.max_messages_per_append (${limits.maxMessagesPerAppend})`, {
      key: "limits.max_messages_per_append",
      value: limits.maxMessagesPerAppend,
    });
  }
  messages.forEach((m, i) => validateMessage(m, `messages[${i}]`, limits.maxMessageBytes));
}

/** One message, its errors naming `field` (e.g. `messages[3]`, `rewrites[0].message`). */
export function validateMessage(m: Message, field: string, maxBytes: number): void {
  requireEnum(m.role, Role, `${field}.role`, true);
  // An assistant message may be empty (a provider error before any output), and so may a tool
  // result; anything else without content is a client bug.
  if (m.content.length === 0 && m.role !== Role.ROLE_ASSISTANT && m.role !== Role.ROLE_TOOL_RESULT) {
    throw fieldError(`${field}.content`, `is empty: a ${ROLE_NAMES[m.role]} message needs at least one content block`);
  }
  m.content.forEach((block, j) => {
    if (!block.block) throw fieldError(`${field}.content[${j}]`, "has no block set (text, image, thinking or tool_call)");
    if (block.block.$case === "toolCall" && !block.block.value.id) {
      throw fieldError(`${field}.content[${j}].tool_call.id`, "is required");
    }
  });
  if (m.role === Role.ROLE_TOOL_RESULT && !m.toolCallId) {
    throw fieldError(`${field}.tool_call_id`, "is required for a ROLE_TOOL_RESULT message");
  }
  if (m.role === Role.ROLE_CUSTOM && !m.customType) {
    throw fieldError(`${field}.custom_type`, "is required for a ROLE_CUSTOM message");
  }
  // Exports hand details back as JSON (OpenClaw's `details`): text that is not JSON would fail them.
  if (m.detailsJson && !isJson(m.detailsJson)) throw fieldError(`${field}.details_json`, "is not JSON");
  // Exports and transcripts print timestamps as dates: one no Date can hold would fail them all later.
  if (Math.abs(m.timestampMs) > MAX_DATE_MS) {
    throw fieldError(`${field}.timestamp_ms`, `${m.timestampMs} is out of range (at most ${MAX_DATE_MS} ms from 1970-01-01 either way)`);
  }
  const bytes = encodedSize(m);
  if (bytes > maxBytes) {
    throw new LimitExceededError(`${field} is ${bytes} bytes, over limits.max_message_bytes (${maxBytes})`, {
      key: "limits.max_message_bytes",
      value: maxBytes,
    });
  }
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * A runtime's prompt-cache telemetry (AssembleRequest / AfterTurnRequest.prompt_cache): passed to
 * engines as it came, so only what an engine could misread is checked — a known retention, and
 * times a JavaScript Date can hold.
 */
export function checkPromptCache(cache: PromptCache | undefined): void {
  if (!cache) return;
  requireEnum(cache.retention, PromptCacheRetention, "prompt_cache.retention");
  for (const [field, ms] of [
    ["prompt_cache.last_touch_ms", cache.lastTouchMs],
    ["prompt_cache.expires_at_ms", cache.expiresAtMs],
  ] as const)
    if (!Number.isSafeInteger(ms) || Math.abs(ms) > MAX_DATE_MS) throw fieldError(field, `is not a time in Unix milliseconds (${ms})`);
}
