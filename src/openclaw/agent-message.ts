import { InvalidArgumentError } from "../contract/errors.js";
import { Message, Role, Usage } from "../contract/gen/contextd/v1/types.js";
import { isSummaryMessage, SUMMARY_TOKENS_BEFORE_KEY, summaryOf, textBlock } from "../contract/messages.js";
import { fromContentBlock, toContentBlock } from "./content-blocks.js";
import { fromJsonText, isCount, isFiniteNumber, isMillis, isRecord, isString, jsonEqual, toJsonText, type Json, type JsonObject } from "./json.js";
import { compact, EXACTLY_REBUILT, extraJsonOf, parseExtra, restore } from "./lossless.js";
import { bashExecutionText, branchSummaryText, compactionSummaryText } from "./render.js";

/**
 * OpenClaw's `AgentMessage` (2026.9.x: roles user, assistant, toolResult, custom, bashExecution,
 * branchSummary, compactionSummary) ↔ contextd's Message, losslessly: `fromContextdMessage(
 * toContextdMessage(m))` deep-equals `m` for every JSON object `m` with a known role (the property
 * test in test/unit/openclaw/ checks it with random messages).
 *
 * Explicit proto fields hold what engines read — role, content (the text the model reads),
 * timestamp, tool call id/name, is_error, details, custom type, the assistant's api, provider,
 * model, stop reason, response id, error message and usage with cost, and the blocks' signatures —
 * and every other field stays verbatim in `extra_json` (lossless.ts). For bashExecution,
 * branchSummary and compactionSummary, whose fields are not content blocks, `content` is OpenClaw's
 * own rendering for the model (render.ts), and their fields are in `extra_json`.
 *
 * Normalizations, documented in the contract: a message appended without a timestamp gets the
 * time it was stored (OpenClaw always sets one).
 */
export type AgentMessage = JsonObject & { role: string };

const ROLE_OF: Record<string, Role> = {
  user: Role.ROLE_USER,
  assistant: Role.ROLE_ASSISTANT,
  toolResult: Role.ROLE_TOOL_RESULT,
  custom: Role.ROLE_CUSTOM,
  bashExecution: Role.ROLE_BASH_EXECUTION,
  branchSummary: Role.ROLE_BRANCH_SUMMARY,
  compactionSummary: Role.ROLE_COMPACTION_SUMMARY,
};
const NAME_OF = new Map<Role, string>(Object.entries(ROLE_OF).map(([name, role]) => [role, name]));

/** OpenClaw's message roles, in the order of its types. */
export const OPENCLAW_ROLES = Object.keys(ROLE_OF);

/**
 * An OpenClaw message as a contextd Message. Throws InvalidArgumentError naming `field` when it is
 * not an object or its role is not an OpenClaw role.
 */
export function toContextdMessage(input: unknown, field = "message"): Message {
  if (!isRecord(input)) throw new InvalidArgumentError(`${field} must be a JSON object`);
  const role = isString(input.role) ? ROLE_OF[input.role] : undefined;
  if (role === undefined) {
    throw new InvalidArgumentError(`${field}.role ${JSON.stringify(input.role ?? null)} is not an OpenClaw message role (${OPENCLAW_ROLES.join(", ")})`);
  }
  const m = Message.fromPartial({ role });
  if (isMillis(input.timestamp) && input.timestamp !== 0) m.timestampMs = input.timestamp;
  if (input.excludeFromContext === true) m.excludeFromContext = true;
  switch (role) {
    case Role.ROLE_USER:
    case Role.ROLE_CUSTOM:
      if (isString(input.content)) {
        m.content = [textBlock(input.content)];
        m.contentIsText = true;
      } else if (Array.isArray(input.content)) m.content = input.content.map(toContentBlock);
      if (role === Role.ROLE_CUSTOM) {
        m.customType = str(input.customType);
        m.detailsJson = toJsonText(input.details);
      }
      break;
    case Role.ROLE_ASSISTANT:
      if (Array.isArray(input.content)) m.content = input.content.map(toContentBlock);
      m.api = str(input.api);
      m.provider = str(input.provider);
      m.model = str(input.model);
      m.stopReason = str(input.stopReason);
      m.responseId = str(input.responseId);
      m.errorMessage = str(input.errorMessage);
      if (isRecord(input.usage)) m.usage = usageOf(input.usage);
      break;
    case Role.ROLE_TOOL_RESULT:
      if (Array.isArray(input.content)) m.content = input.content.map(toContentBlock);
      m.toolCallId = str(input.toolCallId);
      m.toolName = str(input.toolName);
      m.isError = input.isError === true;
      m.detailsJson = toJsonText(input.details);
      break;
    case Role.ROLE_BASH_EXECUTION:
      m.content = [textBlock(bashExecutionText(input))];
      break;
    case Role.ROLE_BRANCH_SUMMARY:
      m.content = [textBlock(branchSummaryText(input.summary))];
      break;
    case Role.ROLE_COMPACTION_SUMMARY:
      m.content = [textBlock(compactionSummaryText(input.summary))];
      break;
  }
  const rebuilt = rebuild(m);
  // Without an extra the way back completes the message as one from elsewhere (`complete`): a
  // message from OpenClaw that the proto fields describe whole but that lacks what completion adds
  // (a custom message without `display`) carries an empty extra instead, which says "exactly this".
  m.extraJson = extraJsonOf(input, rebuilt) || (jsonEqual(complete(m, rebuilt), rebuilt) ? "" : EXACTLY_REBUILT);
  return m;
}

/**
 * A contextd Message as an OpenClaw message: the inverse of toContextdMessage. A message an engine
 * or another runtime wrote (no `extra_json`) gets OpenClaw's required fields filled in, so that
 * OpenClaw can use it: contextd's compaction summary becomes a `compactionSummary`, ROLE_SYSTEM a
 * `custom` message of type `contextd.system`, and a bare assistant message gets empty provider
 * fields and zero usage.
 */
export function fromContextdMessage(m: Message): AgentMessage {
  if (isSummaryMessage(m)) {
    const tokensBefore = Number(m.metadata[SUMMARY_TOKENS_BEFORE_KEY] ?? 0);
    return { role: "compactionSummary", summary: summaryOf(m), tokensBefore: Number.isFinite(tokensBefore) ? tokensBefore : 0, timestamp: m.timestampMs };
  }
  const extra = parseExtra(m.extraJson);
  const out = restore(extra ? rebuild(m) : complete(m, rebuild(m)), extra);
  return out as AgentMessage;
}

/** The OpenClaw message that the proto fields alone describe. */
function rebuild(m: Message): JsonObject {
  const role = NAME_OF.get(m.role) ?? (m.role === Role.ROLE_SYSTEM ? "custom" : "user");
  const timestamp = m.timestampMs !== 0 ? m.timestampMs : undefined;
  const excludeFromContext = m.excludeFromContext ? true : undefined;
  const details = fromJsonText(m.detailsJson);
  switch (m.role) {
    case Role.ROLE_ASSISTANT:
      return compact({
        role,
        content: m.content.map(fromContentBlock),
        api: m.api,
        provider: m.provider,
        model: m.model,
        usage: m.usage ? usageJson(m.usage) : undefined,
        stopReason: m.stopReason,
        responseId: m.responseId || undefined,
        errorMessage: m.errorMessage || undefined,
        timestamp,
        excludeFromContext,
      });
    case Role.ROLE_TOOL_RESULT:
      return compact({
        role,
        toolCallId: m.toolCallId,
        toolName: m.toolName,
        content: m.content.map(fromContentBlock),
        details,
        isError: m.isError,
        timestamp,
        excludeFromContext,
      });
    case Role.ROLE_CUSTOM:
    case Role.ROLE_SYSTEM:
      return compact({
        role,
        customType: m.customType || (m.role === Role.ROLE_SYSTEM ? "contextd.system" : ""),
        content: content(m),
        details,
        timestamp,
        excludeFromContext,
      });
    case Role.ROLE_BASH_EXECUTION:
    case Role.ROLE_BRANCH_SUMMARY:
    case Role.ROLE_COMPACTION_SUMMARY:
      return compact({ role, timestamp, excludeFromContext });
    default:
      return compact({ role, content: content(m), timestamp, excludeFromContext });
  }
}

/** OpenClaw's required fields for a message that did not come from OpenClaw. */
function complete(m: Message, rebuilt: JsonObject): JsonObject {
  if (m.role === Role.ROLE_SYSTEM || m.role === Role.ROLE_CUSTOM) return { display: m.role !== Role.ROLE_SYSTEM, ...rebuilt };
  if (m.role !== Role.ROLE_ASSISTANT) return rebuilt;
  const usage = usageJson(m.usage ?? Usage.fromPartial({}));
  return { ...rebuilt, usage: (rebuilt.usage as Json | undefined) ?? usage, stopReason: m.stopReason || "stop" };
}

function content(m: Message): Json {
  const only = m.content.length === 1 ? m.content[0].block : undefined;
  if (m.contentIsText && only?.$case === "text" && !only.value.signature && !only.value.extraJson) return only.value.text;
  return m.content.map(fromContentBlock);
}

function usageOf(u: JsonObject): Usage {
  const count = (v: unknown) => (isCount(v) ? v : 0);
  const money = (v: unknown) => (isFiniteNumber(v) ? v : 0);
  const usage = Usage.fromPartial({
    input: count(u.input),
    output: count(u.output),
    cacheRead: count(u.cacheRead),
    cacheWrite: count(u.cacheWrite),
    total: count(u.totalTokens),
  });
  if (isRecord(u.cost)) {
    const c = u.cost;
    usage.cost = { input: money(c.input), output: money(c.output), cacheRead: money(c.cacheRead), cacheWrite: money(c.cacheWrite), total: money(c.total) };
  }
  return usage;
}

function usageJson(u: Usage): JsonObject {
  return compact({
    input: u.input,
    output: u.output,
    cacheRead: u.cacheRead,
    cacheWrite: u.cacheWrite,
    totalTokens: u.total,
    cost: u.cost ? { input: u.cost.input, output: u.cost.output, cacheRead: u.cost.cacheRead, cacheWrite: u.cost.cacheWrite, total: u.cost.total } : undefined,
  });
}

function str(v: unknown): string {
  return isString(v) ? v : "";
}
