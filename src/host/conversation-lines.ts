import { Message, Role, type ContentBlock } from "../contract/gen/contextd/v1/types.js";
import { imageBlock, textBlock, thinkingBlock, toolCallBlock } from "../contract/messages.js";
import { toContextdMessage } from "../openclaw/agent-message.js";
import { eachLine, runAll, type Steps } from "../contract/time-slices.js";
import { quote } from "../contract/quote.js";

/**
 * Conversation lines as JSONL, one message per line, in any of three forms (they may be mixed; each
 * line is recognised on its own). Shared by `contextctl replay` (src/cli/conversation-file.ts) and
 * SessionService.ImportTranscript (src/host/import-transcript.ts); it lives in the host layer
 * because the host must never import from src/cli.
 *
 * - simple, OpenAI-chat-like: `{"role": "user"|"assistant"|"tool"|"tool_result"|"system", "content":
 *   "text" | [blocks], "tool_calls"?: [{"id","name","arguments"}], "tool_call_id"?, "name"?}`.
 *   `tool_calls` may also use the OpenAI `{"id", "function": {"name", "arguments"}}` shape, and
 *   `arguments` may be a JSON string or an object. `developer` counts as `system`.
 * - an OpenClaw session JSONL line: `{"type": "message", "message": {AgentMessage}}`, mapped
 *   losslessly by src/openclaw/agent-message.ts (every OpenClaw role). Only lines of type
 *   `"message"` become messages; lines of any other `type` (the session header, compaction,
 *   model/thinking changes, custom entries) are ignored here — ImportTranscript reads whole
 *   OpenClaw session files through src/openclaw/ instead.
 * - the proto JSON form of `contextd.v1.Message` (`{"role": "ROLE_USER", "content": [{"text": {"text": "..."}}]}`).
 *
 * Blocks (simple form): a string, `{type:"text",text}`, `{type:"thinking",thinking,
 * signature|thinkingSignature}`, `{type:"toolCall"|"tool_use",id,name,arguments|input}`, `{type:"image",
 * data|source.data, mimeType|mime_type|source.media_type}`. Blank lines are skipped.
 */

/** A line that could not be read: `line` is 1-based, `reason` says why (without the line number). */
export class ConversationLineError extends Error {
  constructor(
    readonly source: string,
    readonly line: number,
    readonly reason: string,
  ) {
    super(`${source}:${line}: ${reason}`);
    this.name = "ConversationLineError";
  }
}

/** A message and the 1-based line it came from. */
export interface ConversationLine {
  line: number;
  message: Message;
}

/**
 * Reads every message line (see the module comment); lines that are not messages are skipped. Any
 * other problem throws a {@link ConversationLineError} naming the line number.
 */
export function parseConversationLines(text: string, source = "conversation"): ConversationLine[] {
  return runAll(conversationLineSteps(text, source));
}

/**
 * {@link parseConversationLines} as steps, one per line, so ImportTranscript can read a large file a
 * time slice at a time (src/contract/time-slices.ts) without holding the event loop.
 */
export function* conversationLineSteps(text: string, source = "conversation"): Steps<ConversationLine[]> {
  const messages: ConversationLine[] = [];
  for (const [line, n] of eachLine(text)) {
    yield;
    if (line.trim() === "") continue;
    let message: Message | undefined;
    try {
      message = parseLine(JSON.parse(line) as unknown);
    } catch (err) {
      const why = err instanceof SyntaxError ? `invalid JSON (${err.message})` : (err as Error).message;
      throw new ConversationLineError(source, n, why);
    }
    if (message) messages.push({ line: n, message });
  }
  return messages;
}

/** {@link parseConversationLines} without the line numbers. */
export function parseConversation(text: string, source = "conversation"): Message[] {
  return parseConversationLines(text, source).map((l) => l.message);
}

type Json = Record<string, unknown>;

function parseLine(value: unknown): Message | undefined {
  if (!isObject(value)) throw new Error("a line must be a JSON object");
  if (typeof value.type === "string") {
    if (value.type !== "message") return undefined;
    if (!isObject(value.message)) throw new Error(`"message" must be an object`);
    return check(toContextdMessage(value.message, "message"));
  }
  if (typeof value.role === "number" || (typeof value.role === "string" && value.role.startsWith("ROLE_"))) {
    return check(Message.fromJSON(value));
  }
  return fromSimple(value);
}

const SIMPLE_ROLES: Record<string, Role> = {
  user: Role.ROLE_USER,
  assistant: Role.ROLE_ASSISTANT,
  tool: Role.ROLE_TOOL_RESULT,
  tool_result: Role.ROLE_TOOL_RESULT,
  system: Role.ROLE_SYSTEM,
  developer: Role.ROLE_SYSTEM,
};

function fromSimple(line: Json): Message {
  const role = typeof line.role === "string" ? SIMPLE_ROLES[line.role] : undefined;
  if (role === undefined) throw new Error(`unknown role ${quote(String(line.role))}`);
  const content = blocks(line.content);
  if (line.tool_calls !== undefined) {
    if (!Array.isArray(line.tool_calls)) throw new Error(`"tool_calls" must be an array`);
    for (const call of line.tool_calls) content.push(simpleToolCall(call));
  }
  return check(
    Message.fromPartial({
      role,
      content,
      toolCallId: str(line.tool_call_id),
      toolName: role === Role.ROLE_TOOL_RESULT ? str(line.name) : "",
      isError: line.is_error === true,
    }),
  );
}

function simpleToolCall(call: unknown): ContentBlock {
  if (!isObject(call)) throw new Error("a tool call must be an object");
  const fn = isObject(call.function) ? call.function : call;
  return toolCall(call.id, fn.name, fn.arguments);
}

function blocks(content: unknown): ContentBlock[] {
  if (content === undefined || content === null) return [];
  if (typeof content === "string") return [text(content)];
  if (!Array.isArray(content)) throw new Error(`"content" must be a string or an array of blocks`);
  return content.map(block);
}

function block(b: unknown): ContentBlock {
  if (typeof b === "string") return text(b);
  if (!isObject(b)) throw new Error("a content block must be an object or a string");
  switch (b.type) {
    case "text":
    case "input_text":
    case "output_text":
      return text(str(b.text));
    case "thinking":
      return thinkingBlock(str(b.thinking), str(b.signature ?? b.thinkingSignature));
    case "toolCall":
    case "tool_use":
      return toolCall(b.id, b.name, b.arguments ?? b.input);
    case "image": {
      const src = isObject(b.source) ? b.source : b;
      return imageBlock(str(src.mimeType ?? src.mime_type ?? src.media_type), Buffer.from(str(src.data), "base64"), str(src.uri ?? src.url));
    }
    default:
      throw new Error(`unknown content block type ${quote(String(b.type))}`);
  }
}

function text(t: string): ContentBlock {
  return textBlock(t);
}

function toolCall(id: unknown, name: unknown, args: unknown): ContentBlock {
  if (typeof id !== "string" || id === "") throw new Error("a tool call needs an id");
  if (typeof name !== "string" || name === "") throw new Error(`tool call ${quote(String(id))} needs a name`);
  const argumentsJson = typeof args === "string" ? args : JSON.stringify(args ?? {});
  return toolCallBlock(id, name, argumentsJson);
}

/** What the server would refuse anyway, caught early with the line number. */
function check(message: Message): Message {
  if (message.role === Role.ROLE_CUSTOM && !message.customType) throw new Error("a custom message needs a customType");
  if (message.role === Role.ROLE_UNSPECIFIED || message.role === Role.UNRECOGNIZED) throw new Error("the message has no valid role");
  if (message.role === Role.ROLE_TOOL_RESULT && !message.toolCallId) throw new Error("a tool result needs a tool call id");
  return message;
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}
