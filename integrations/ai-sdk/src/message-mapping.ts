import type {
  LanguageModelV3Content,
  LanguageModelV3DataContent,
  LanguageModelV3FilePart,
  LanguageModelV3TextPart,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3ToolResultOutput,
  LanguageModelV3ToolResultPart,
  LanguageModelV3ToolApprovalResponsePart,
} from "@ai-sdk/provider";
import {
  ImageBlock,
  Message as MessageCodec,
  Role,
  TextBlock,
  ThinkingBlock,
  ToolCallBlock,
  type ContentBlock,
  type Message,
  messageText,
} from "contextd/client";
import { contentHash } from "../../shared/src/message-hash.js";

/**
 * The one mapping between the AI SDK's prompt messages (LanguageModelV3Message, what a middleware
 * sees) and contextd's Message, lossless both ways: what contextd's fields model goes into them (so
 * engines, the tokenizer and compaction read it), everything else of a part or message — provider
 * options, file names, the output kind of a tool result, binary data of non-image files — goes into
 * the block's or message's `extra_json` under `aiSdk`, and comes back unchanged.
 */

/** A part of a user or assistant message (a user message holds only text and file parts). */
type Part = Extract<LanguageModelV3Message, { role: "assistant" }>["content"][number];
type ToolPart = LanguageModelV3ToolResultPart | LanguageModelV3ToolApprovalResponsePart;

/** ROLE_CUSTOM kind of a tool-approval response (contextd has no role for it). */
export const APPROVAL_CUSTOM_TYPE = "ai-sdk.tool-approval-response";

// ---------------------------------------------------------------- extra_json

type Json = Record<string, unknown>;

/** `{"aiSdk": fields}` without undefined fields, or "" when there is nothing to keep. */
function extra(fields: Json): string {
  const kept = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
  return Object.keys(kept).length === 0 ? "" : JSON.stringify({ aiSdk: kept });
}

function readExtra(extraJson: string): Json {
  if (!extraJson) return {};
  try {
    const parsed = JSON.parse(extraJson) as { aiSdk?: Json };
    return parsed.aiSdk && typeof parsed.aiSdk === "object" ? parsed.aiSdk : {};
  } catch {
    return {};
  }
}

/** Binary data and URLs as JSON, tagged so that they come back as the same kind of value. */
function encodeData(data: LanguageModelV3DataContent): Json {
  if (data instanceof URL) return { url: data.href };
  if (typeof data === "string") return { string: data };
  return { bytes: Buffer.from(data).toString("base64") };
}

function decodeData(d: Json): LanguageModelV3DataContent {
  if (typeof d.url === "string") return new URL(d.url);
  if (typeof d.string === "string") return d.string;
  return new Uint8Array(Buffer.from(String(d.bytes ?? ""), "base64"));
}

/** A part kept whole in extra_json (its `data`, when it has one, encoded). */
function encodePart(part: Json): Json {
  return "data" in part ? { ...part, data: encodeData(part.data as LanguageModelV3DataContent) } : part;
}

function decodePart<T>(part: Json): T {
  return ("data" in part ? { ...part, data: decodeData(part.data as Json) } : part) as T;
}

// ---------------------------------------------------------------- AI SDK → contextd

const text = (t: string, extraJson = ""): ContentBlock => ({ block: { $case: "text", value: TextBlock.fromPartial({ text: t, extraJson }) } });

function message(role: Role, content: ContentBlock[], fields: Partial<Message> = {}): Message {
  return { ...MessageCodec.fromPartial({}), role, content, ...fields };
}

/** What a model reads of a tool's output. */
export function outputText(output: LanguageModelV3ToolResultOutput): string {
  switch (output.type) {
    case "text":
    case "error-text":
      return output.value;
    case "json":
    case "error-json":
      return JSON.stringify(output.value);
    case "execution-denied":
      return output.reason ?? "Tool execution denied.";
    case "content":
      return output.value.map((v) => (v.type === "text" ? v.text : `[${v.type}]`)).join("\n");
    default:
      return "";
  }
}

function partToBlock(part: Part): ContentBlock {
  switch (part.type) {
    case "text": {
      const { type: _t, text: t, ...rest } = part;
      return text(t, extra(rest));
    }
    case "reasoning": {
      const { type: _t, text: t, ...rest } = part;
      return { block: { $case: "thinking", value: ThinkingBlock.fromPartial({ thinking: t, extraJson: extra(rest) }) } };
    }
    case "tool-call": {
      const { type: _t, toolCallId, toolName, input, ...rest } = part;
      const value = ToolCallBlock.fromPartial({
        id: toolCallId,
        name: toolName,
        argumentsJson: JSON.stringify(input ?? null),
        extraJson: extra({ ...rest, noInput: input === undefined ? true : undefined }),
      });
      return { block: { $case: "toolCall", value } };
    }
    case "file": {
      const { type: _t, mediaType, data, ...rest } = part;
      if (mediaType.startsWith("image")) {
        // An image is an image block (counted as one by contextd); how its data was given is kept.
        const inline = typeof data !== "string" && !(data instanceof URL);
        const value = ImageBlock.fromPartial({
          mimeType: mediaType,
          data: inline ? Buffer.from(data) : Buffer.alloc(0),
          uri: data instanceof URL ? data.href : "",
          extraJson: extra({ ...rest, ...(typeof data === "string" ? { stringData: data } : {}) }),
        });
        return { block: { $case: "image", value } };
      }
      // contextd has no block for other files: the model-readable stand-in is a line naming the
      // file; the file itself is kept whole in extra_json.
      return text(`[file${part.filename ? ` ${part.filename}` : ""}: ${mediaType}]`, extra({ part: encodePart(part as unknown as Json) }));
    }
    case "tool-result":
      // A provider-executed tool's result inside an assistant message.
      return text(outputText(part.output), extra({ part: part as unknown as Json }));
  }
}

function toolPartToMessage(part: ToolPart, first: boolean, messageOptions: unknown): Message {
  const common = { joinPrevious: first ? undefined : true, messageProviderOptions: first ? messageOptions : undefined };
  if (part.type === "tool-approval-response") {
    const said = `Tool approval ${part.approved ? "granted" : "denied"}${part.reason ? `: ${part.reason}` : ""}`;
    return message(Role.ROLE_CUSTOM, [text(said)], { customType: APPROVAL_CUSTOM_TYPE, extraJson: extra({ ...common, part: part as unknown as Json }) });
  }
  const { output } = part;
  const isError = output.type === "error-text" || output.type === "error-json" || output.type === "execution-denied";
  // text/json outputs are restored from the block's text; the rest is kept whole.
  const fromText = output.type === "text" || output.type === "error-text" || output.type === "json" || output.type === "error-json";
  const { value: _v, ...outputRest } = output as { value?: unknown };
  const content = output.type === "content" ? output.value.map((v) => (v.type === "text" ? text(v.text) : text(`[${v.type}]`))) : [text(outputText(output))];
  return message(Role.ROLE_TOOL_RESULT, content, {
    toolCallId: part.toolCallId,
    toolName: part.toolName,
    isError,
    extraJson: extra({ ...common, output: fromText ? outputRest : output, partProviderOptions: part.providerOptions }),
  });
}

/** One AI SDK message as contextd messages: one, or one per part for a tool message. */
export function toContextd(m: LanguageModelV3Message): Message[] {
  switch (m.role) {
    case "system":
      return [message(Role.ROLE_SYSTEM, [text(m.content)], { contentIsText: true, extraJson: extra({ providerOptions: m.providerOptions }) })];
    case "user":
    case "assistant":
      return [
        message(m.role === "user" ? Role.ROLE_USER : Role.ROLE_ASSISTANT, m.content.map(partToBlock), {
          extraJson: extra({ providerOptions: m.providerOptions }),
        }),
      ];
    case "tool":
      return m.content.map((p, j) => toolPartToMessage(p, j === 0, m.providerOptions));
  }
}

/**
 * The model's answer (a generate result's content) as the assistant message the AI SDK puts in the
 * next step's prompt: empty text dropped, tool-call input parsed, provider metadata as options.
 */
export function answerMessage(content: LanguageModelV3Content[]): LanguageModelV3Message & { role: "assistant" } {
  const parts: Extract<LanguageModelV3Message, { role: "assistant" }>["content"] = [];
  for (const c of content) {
    if (c.type === "text" && c.text.length > 0) parts.push({ type: "text", text: c.text, providerOptions: c.providerMetadata });
    else if (c.type === "reasoning") parts.push({ type: "reasoning", text: c.text, providerOptions: c.providerMetadata });
    else if (c.type === "tool-call")
      parts.push({
        type: "tool-call",
        toolCallId: c.toolCallId,
        toolName: c.toolName,
        input: parseJson(c.input),
        providerExecuted: c.providerExecuted,
        providerOptions: c.providerMetadata,
      });
    else if (c.type === "file") parts.push({ type: "file", data: c.data, mediaType: c.mediaType });
  }
  return { role: "assistant", content: parts };
}

function parseJson(s: string): unknown {
  try {
    return s.trim() ? JSON.parse(s) : {};
  } catch {
    return s;
  }
}

// ---------------------------------------------------------------- contextd → AI SDK

function blockToPart(block: ContentBlock): Part {
  const b = block.block;
  if (!b) return { type: "text", text: "" };
  switch (b.$case) {
    case "text": {
      const x = readExtra(b.value.extraJson);
      if (x.part) return decodePart<Part>(x.part as Json);
      return { type: "text", text: b.value.text, ...x };
    }
    case "thinking":
      return { type: "reasoning", text: b.value.thinking, ...readExtra(b.value.extraJson) };
    case "toolCall": {
      const { noInput, ...x } = readExtra(b.value.extraJson);
      const input = noInput ? undefined : parseJson(b.value.argumentsJson);
      return { type: "tool-call", toolCallId: b.value.id, toolName: b.value.name, input, ...x };
    }
    case "image": {
      const { stringData, ...x } = readExtra(b.value.extraJson);
      const data: LanguageModelV3DataContent = typeof stringData === "string" ? stringData : b.value.uri ? new URL(b.value.uri) : new Uint8Array(b.value.data);
      return { type: "file", mediaType: b.value.mimeType, data, ...x } as Part;
    }
  }
}

function toolPart(m: Message): ToolPart {
  const x = readExtra(m.extraJson);
  if (m.role === Role.ROLE_CUSTOM) return x.part as LanguageModelV3ToolApprovalResponsePart;
  const body = messageText(m);
  const kept = x.output as Json | undefined;
  let output: LanguageModelV3ToolResultOutput;
  if (!kept) output = { type: m.isError ? "error-text" : "text", value: body };
  else if (kept.type === "text" || kept.type === "error-text") output = { ...kept, value: body } as LanguageModelV3ToolResultOutput;
  else if (kept.type === "json" || kept.type === "error-json") output = { ...kept, value: parseJson(body) } as LanguageModelV3ToolResultOutput;
  else output = kept as unknown as LanguageModelV3ToolResultOutput;
  return {
    type: "tool-result",
    toolCallId: m.toolCallId,
    toolName: m.toolName,
    output,
    ...(x.partProviderOptions ? { providerOptions: x.partProviderOptions as LanguageModelV3ToolResultPart["providerOptions"] } : {}),
  };
}

/**
 * contextd messages (an assembled context, a transcript) as an AI SDK prompt. Messages contextd or
 * an engine made (a compaction summary, a recalled note) come back in the nearest SDK form: a
 * summary is a user message, a role the SDK lacks is a user message with the message's text.
 */
export function fromContextd(messages: readonly Message[]): LanguageModelV3Prompt {
  const out: LanguageModelV3Prompt = [];
  for (const m of messages) {
    const x = readExtra(m.extraJson);
    const providerOptions = x.providerOptions ? { providerOptions: x.providerOptions as LanguageModelV3Message["providerOptions"] } : {};
    if (m.role === Role.ROLE_TOOL_RESULT || (m.role === Role.ROLE_CUSTOM && m.customType === APPROVAL_CUSTOM_TYPE)) {
      const part = toolPart(m);
      const last = out[out.length - 1];
      if (x.joinPrevious && last?.role === "tool") last.content.push(part);
      else
        out.push({
          role: "tool",
          content: [part],
          ...(x.messageProviderOptions ? { providerOptions: x.messageProviderOptions as LanguageModelV3Message["providerOptions"] } : {}),
        });
    } else if (m.role === Role.ROLE_SYSTEM) out.push({ role: "system", content: messageText(m), ...providerOptions });
    else if (m.role === Role.ROLE_ASSISTANT) out.push({ role: "assistant", content: m.content.map(blockToPart), ...providerOptions });
    else if (m.role === Role.ROLE_USER) {
      const content = m.content
        .map(blockToPart)
        .map((p): LanguageModelV3TextPart | LanguageModelV3FilePart => (p.type === "text" || p.type === "file" ? p : { type: "text", text: partText(p) }));
      out.push({ role: "user", content, ...providerOptions });
    } else out.push({ role: "user", content: [{ type: "text", text: messageText(m) }] });
  }
  return out;
}

function partText(p: Part): string {
  if (p.type === "reasoning") return p.text;
  if (p.type === "tool-call") return `${p.toolName}(${JSON.stringify(p.input)})`;
  if (p.type === "tool-result") return outputText(p.output);
  return "";
}

// ---------------------------------------------------------------- message keys

/**
 * The message key of the `j`th contextd message of the prompt message at `position`: its position
 * and a hash of what the model reads of it (role, text, reasoning, tool calls with their arguments
 * in key order, tool result; integrations/shared/src/message-hash.ts) — never provider metadata,
 * which the SDK may carry differently in a later step's prompt than in the answer it came from.
 */
export function messageKey(position: number, j: number, m: Message): string {
  return `ai-sdk:${position}.${j}:${contentHash(m)}`;
}
