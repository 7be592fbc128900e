import { Message, Role, type SessionRef } from "../contract/gen/contextd/v1/types.js";
import { InvalidArgumentError, ResourceExhaustedError } from "../contract/errors.js";
import { ROLE_NAMES } from "../contract/messages.js";

const ROLE_LIST = Object.keys(Role)
  .filter((k) => k.startsWith("ROLE_") && k !== "ROLE_UNSPECIFIED")
  .join(", ");

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

/** A session reference must name a session; its id is the key everything else hangs off. */
export function requireSession(session: SessionRef | undefined, field = "session"): SessionRef {
  const id = session?.sessionId?.trim() ?? "";
  if (!id) throw new InvalidArgumentError(`${field}.session_id is required`);
  if (id.length > MAX_ID_LENGTH) throw new InvalidArgumentError(`${field}.session_id is longer than ${MAX_ID_LENGTH} characters`);
  if (/[\u0000-\u001f]/.test(id)) throw new InvalidArgumentError(`${field}.session_id contains control characters`);
  return { sessionId: id, sessionKey: session?.sessionKey ?? "", agentId: session?.agentId ?? "" };
}

export function requireBudget(tokenBudget: number | undefined): number {
  if (!tokenBudget || tokenBudget <= 0) throw new InvalidArgumentError("token_budget must be greater than 0");
  return tokenBudget;
}

/** An idempotency key is optional; when set it is at most 256 characters of printable text. */
export function checkIdempotencyKey(key: string | undefined): string {
  const k = key ?? "";
  if (k.length > MAX_ID_LENGTH) throw new InvalidArgumentError(`idempotency_key is longer than ${MAX_ID_LENGTH} characters`);
  if (/[\u0000-\u001f]/.test(k)) throw new InvalidArgumentError("idempotency_key contains control characters");
  return k;
}

/**
 * Checks a whole batch before anything is written, so a bad message rejects the batch and leaves
 * the transcript as it was. Returns each message's encoded size.
 */
export function validateAppend(messages: Message[], limits: AppendLimits): void {
  if (messages.length === 0) throw new InvalidArgumentError("messages is empty: append at least one message");
  if (messages.length > limits.maxMessagesPerAppend) {
    throw new ResourceExhaustedError(
      `messages has ${messages.length} messages, over limits.max_messages_per_append (${limits.maxMessagesPerAppend})`,
    );
  }
  messages.forEach((m, i) => validateMessage(m, `messages[${i}]`, limits.maxMessageBytes));
}

/** One message, its errors naming `field` (e.g. `messages[3]`, `rewrites[0].message`). */
export function validateMessage(m: Message, field: string, maxBytes: number): void {
  if (m.role === Role.ROLE_UNSPECIFIED || m.role === Role.UNRECOGNIZED || Role[m.role] === undefined) {
    throw new InvalidArgumentError(`${field}.role is required (${ROLE_LIST})`);
  }
  // An assistant message may be empty (a provider error before any output), and so may a tool
  // result; anything else without content is a client bug.
  if (m.content.length === 0 && m.role !== Role.ROLE_ASSISTANT && m.role !== Role.ROLE_TOOL_RESULT) {
    throw new InvalidArgumentError(`${field}.content is empty: a ${ROLE_NAMES[m.role]} message needs at least one content block`);
  }
  m.content.forEach((block, j) => {
    if (!block.block) throw new InvalidArgumentError(`${field}.content[${j}] has no block set (text, image, thinking or tool_call)`);
    if (block.block.$case === "toolCall" && !block.block.value.id) {
      throw new InvalidArgumentError(`${field}.content[${j}].tool_call.id is required`);
    }
  });
  if (m.role === Role.ROLE_TOOL_RESULT && !m.toolCallId) {
    throw new InvalidArgumentError(`${field}.tool_call_id is required for a ROLE_TOOL_RESULT message`);
  }
  if (m.role === Role.ROLE_CUSTOM && !m.customType) {
    throw new InvalidArgumentError(`${field}.custom_type is required for a ROLE_CUSTOM message`);
  }
  // Exports hand details back as JSON (OpenClaw's `details`): text that is not JSON would fail them.
  if (m.detailsJson && !isJson(m.detailsJson)) throw new InvalidArgumentError(`${field}.details_json is not JSON`);
  // Exports and transcripts print timestamps as dates: one no Date can hold would fail them all later.
  if (Math.abs(m.timestampMs) > MAX_DATE_MS) {
    throw new InvalidArgumentError(`${field}.timestamp_ms ${m.timestampMs} is out of range (at most ${MAX_DATE_MS} ms from 1970-01-01 either way)`);
  }
  const bytes = Message.encode(m).finish().length;
  if (bytes > maxBytes) {
    throw new ResourceExhaustedError(`${field} is ${bytes} bytes, over limits.max_message_bytes (${maxBytes})`);
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
