import {
  AIMessage,
  HumanMessage,
  SystemMessage,
  ToolMessage,
  mapStoredMessageToChatMessage,
  type BaseMessage,
  type InvalidToolCall,
  type MessageContent,
  type UsageMetadata,
} from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { ImageBlock, Message as MessageCodec, Role, TextBlock, ThinkingBlock, ToolCallBlock, type ContentBlock, type Message } from "contextd/client";
import { contentHash } from "../../shared/src/message-hash.js";

/**
 * The one mapping between LangChain messages (HumanMessage, AIMessage with its tool calls,
 * ToolMessage, SystemMessage, and any other kind) and contextd's Message, lossless both ways for
 * what they carry: what contextd's fields model goes into them (so engines, the tokenizer and
 * compaction read it: text, reasoning, images, tool calls and their arguments, a tool result's call
 * id, name and error status), everything else — message ids and names, `additional_kwargs`,
 * `response_metadata`, `usage_metadata`, `invalid_tool_calls`, a tool result's `artifact` and
 * `metadata`, the fields of content blocks — goes into `extra_json` under `langchain`, and comes
 * back unchanged.
 */

type Json = Record<string, unknown>;
type Block = Json & { type: string };

/** ROLE_CUSTOM kind of a LangChain message of another type than human, ai, system and tool: `langchain.<type>`. */
export const CUSTOM_TYPE_PREFIX = "langchain.";

// ---------------------------------------------------------------- extra_json

/** `{"langchain": fields}` without undefined fields, or "" when there is nothing to keep. */
function extra(fields: Json): string {
  const kept = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
  return Object.keys(kept).length === 0 ? "" : JSON.stringify({ langchain: kept });
}

/** A field LangChain defaults to `{}` or `[]` when not given: undefined then (it comes back as the default). */
function unlessDefault<T>(v: T): T | undefined {
  if (Array.isArray(v)) return v.length === 0 ? undefined : v;
  return v !== null && typeof v === "object" && Object.keys(v).length === 0 ? undefined : v;
}

function readExtra(extraJson: string): Json {
  if (!extraJson) return {};
  try {
    const parsed = JSON.parse(extraJson) as { langchain?: Json };
    return parsed.langchain && typeof parsed.langchain === "object" ? parsed.langchain : {};
  } catch {
    return {};
  }
}

// ---------------------------------------------------------------- LangChain → contextd

const text = (t: string, extraJson = ""): ContentBlock => ({ block: { $case: "text", value: TextBlock.fromPartial({ text: t, extraJson }) } });

const DATA_URL = /^data:([^;,]+)?(?:;[^;,]*)*;base64,(.*)$/s;

/** One block of a message's content list. */
function blockToContextd(block: Block | string): ContentBlock {
  if (typeof block === "string") return text(block, extra({ bare: true }));
  switch (block.type) {
    case "text": {
      const { type: _t, text: t, ...rest } = block;
      if (typeof t === "string") return text(t, extra(rest));
      break;
    }
    case "reasoning": {
      const { type: _t, reasoning, ...rest } = block;
      if (typeof reasoning === "string")
        return { block: { $case: "thinking", value: ThinkingBlock.fromPartial({ thinking: reasoning, extraJson: extra(rest) }) } };
      break;
    }
    case "image_url": {
      // OpenAI's form: `image_url` is the URL, or `{ url, detail }`; a data URL is the image itself.
      const { type: _t, image_url: imageUrl, ...rest } = block;
      const { url, ...urlRest } = typeof imageUrl === "string" ? { url: imageUrl } : ((imageUrl ?? {}) as Json);
      if (typeof url !== "string") break;
      const data = DATA_URL.exec(url);
      const value = ImageBlock.fromPartial({
        mimeType: data?.[1] ?? "",
        data: data ? Buffer.from(data[2], "base64") : Buffer.alloc(0),
        uri: data ? "" : url,
        extraJson: extra({
          form: "image_url",
          urlString: typeof imageUrl === "string" ? true : undefined,
          urlFields: unlessDefault(urlRest),
          rest: unlessDefault(rest),
        }),
      });
      // Only a data URL that re-encodes to itself is kept as bytes.
      if (!data || imageUrlOf(value) === url) return { block: { $case: "image", value } };
      break;
    }
    case "image": {
      // LangChain's standard block: `url`, or base64 `data` with `mimeType`.
      const { type: _t, url, data, mimeType, ...rest } = block;
      const b64 = typeof data === "string" ? data : undefined;
      if (b64 !== undefined && Buffer.from(b64, "base64").toString("base64") !== b64) break;
      if (typeof url !== "string" && b64 === undefined) break;
      const value = ImageBlock.fromPartial({
        mimeType: typeof mimeType === "string" ? mimeType : "",
        data: b64 !== undefined ? Buffer.from(b64, "base64") : Buffer.alloc(0),
        uri: typeof url === "string" ? url : "",
        extraJson: extra({ form: "image", noMimeType: mimeType === undefined ? true : undefined, rest: unlessDefault(rest) }),
      });
      return { block: { $case: "image", value } };
    }
  }
  // A block contextd has no kind for (a file, audio, a provider's own block): its text, or a line
  // naming its type, for the model-readable part; the block itself is kept whole.
  return text(typeof block.text === "string" ? block.text : `[${block.type}]`, extra({ whole: block }));
}

function contentToContextd(content: MessageContent, required: boolean): { content: ContentBlock[]; contentIsText: boolean } {
  if (typeof content === "string") return { content: content || required ? [text(content)] : [], contentIsText: true };
  return { content: (content as (Block | string)[]).map(blockToContextd), contentIsText: false };
}

function toolCallToContextd(call: ToolCall): ContentBlock {
  const { id, name, args, type, ...rest } = call as ToolCall & Json;
  const value = ToolCallBlock.fromPartial({
    id: id ?? "",
    name,
    argumentsJson: JSON.stringify(args ?? {}),
    extraJson: extra({ ...rest, type, noId: id === undefined ? true : undefined }),
  });
  return { block: { $case: "toolCall", value } };
}

function message(role: Role, fields: Partial<Message>): Message {
  return { ...MessageCodec.fromPartial({}), role, ...fields };
}

/** The fields every LangChain message has, for extra_json. */
function baseFields(m: BaseMessage): Json {
  return { id: m.id, name: m.name, additional_kwargs: unlessDefault(m.additional_kwargs), response_metadata: unlessDefault(m.response_metadata) };
}

/** One LangChain message as a contextd message. */
export function toContextd(m: BaseMessage): Message {
  if (AIMessage.isInstance(m)) {
    const { content, contentIsText } = contentToContextd(m.content, false);
    return message(Role.ROLE_ASSISTANT, {
      content: [...content, ...(m.tool_calls ?? []).map(toolCallToContextd)],
      contentIsText,
      extraJson: extra({ ...baseFields(m), invalid_tool_calls: unlessDefault(m.invalid_tool_calls), usage_metadata: m.usage_metadata }),
    });
  }
  if (ToolMessage.isInstance(m)) {
    const { content, contentIsText } = contentToContextd(m.content, false);
    return message(Role.ROLE_TOOL_RESULT, {
      content,
      contentIsText,
      toolCallId: m.tool_call_id,
      toolName: m.name ?? "",
      isError: m.status === "error",
      extraJson: extra({
        ...baseFields(m),
        name: undefined,
        noName: m.name === undefined ? true : undefined,
        status: m.status,
        artifact: m.artifact,
        metadata: m.metadata,
      }),
    });
  }
  if (HumanMessage.isInstance(m) || SystemMessage.isInstance(m)) {
    const { content, contentIsText } = contentToContextd(m.content, true);
    return message(HumanMessage.isInstance(m) ? Role.ROLE_USER : Role.ROLE_SYSTEM, { content, contentIsText, extraJson: extra(baseFields(m)) });
  }
  // Any other kind (ChatMessage with its own role, FunctionMessage, ...): its text for the model,
  // the message kept whole as LangChain stores it.
  const stored = m.toDict();
  const { content } = contentToContextd(m.content, true);
  return message(Role.ROLE_CUSTOM, { content, customType: `${CUSTOM_TYPE_PREFIX}${stored.type}`, extraJson: extra({ stored }) });
}

/**
 * The message key of the LangChain message at `position` of the conversation (the agent's system
 * message first, when it has one, then its state's messages): the position and a hash of what the
 * model reads of it (integrations/shared/src/message-hash.ts) — never ids or metadata, which
 * LangChain gives a message afresh when an application hands the same conversation in again.
 */
export function messageKey(position: number, m: Message): string {
  return `langchain:${position}:${contentHash(m)}`;
}

// ---------------------------------------------------------------- contextd → LangChain

function imageUrlOf(b: ImageBlock): string {
  return b.uri || `data:${b.mimeType};base64,${b.data.toString("base64")}`;
}

function blockToLangChain(block: ContentBlock): Block | string | undefined {
  const b = block.block;
  if (!b) return undefined;
  switch (b.$case) {
    case "text": {
      const x = readExtra(b.value.extraJson);
      if (x.whole) return x.whole as Block;
      if (x.bare) return b.value.text;
      return { type: "text", text: b.value.text, ...x };
    }
    case "thinking":
      return { type: "reasoning", reasoning: b.value.thinking, ...readExtra(b.value.extraJson) };
    case "image": {
      const x = readExtra(b.value.extraJson);
      if (x.form === "image") {
        const out: Block = { type: "image", ...((x.rest as Json) ?? {}) };
        if (b.value.uri) out.url = b.value.uri;
        else out.data = b.value.data.toString("base64");
        if (!x.noMimeType) out.mimeType = b.value.mimeType;
        return out;
      }
      const url = imageUrlOf(b.value);
      const imageUrl = x.urlString ? url : { url, ...((x.urlFields as Json) ?? {}) };
      return { type: "image_url", image_url: imageUrl, ...((x.rest as Json) ?? {}) };
    }
    case "toolCall":
      return undefined;
  }
}

function contentFromContextd(m: Message): MessageContent {
  const blocks = m.content.map(blockToLangChain).filter((b) => b !== undefined);
  if (m.contentIsText) return blocks.map((b) => (typeof b === "string" ? b : typeof b.text === "string" ? b.text : "")).join("");
  return blocks as MessageContent;
}

function toolCallsFromContextd(m: Message): ToolCall[] {
  const calls: ToolCall[] = [];
  for (const c of m.content) {
    if (c.block?.$case !== "toolCall") continue;
    const { noId, ...x } = readExtra(c.block.value.extraJson);
    let args: unknown;
    try {
      args = JSON.parse(c.block.value.argumentsJson || "{}");
    } catch {
      args = {};
    }
    calls.push({ ...x, ...(noId ? {} : { id: c.block.value.id }), name: c.block.value.name, args: args as Record<string, unknown> } as ToolCall);
  }
  return calls;
}

/** The fields of extra_json every LangChain message has, as constructor fields. */
function baseFieldsFrom(x: Json): Json {
  const out: Json = {};
  for (const k of ["id", "name", "additional_kwargs", "response_metadata"]) if (x[k] !== undefined) out[k] = x[k];
  return out;
}

/** What contextd or another runtime made (a compaction summary, a message without LangChain fields): its text. */
function plainText(m: Message): string {
  return m.content
    .map((c) => (c.block?.$case === "text" ? c.block.value.text : c.block?.$case === "thinking" ? c.block.value.thinking : ""))
    .filter(Boolean)
    .join("\n");
}

/** One contextd message as the LangChain message it came from (or its nearest LangChain form). */
export function fromContextdMessage(m: Message): BaseMessage {
  const x = readExtra(m.extraJson);
  switch (m.role) {
    case Role.ROLE_USER:
      return new HumanMessage({ ...baseFieldsFrom(x), content: contentFromContextd(m) });
    case Role.ROLE_SYSTEM:
      return new SystemMessage({ ...baseFieldsFrom(x), content: contentFromContextd(m) });
    case Role.ROLE_ASSISTANT:
      return new AIMessage({
        ...baseFieldsFrom(x),
        content: contentFromContextd(m),
        tool_calls: toolCallsFromContextd(m),
        invalid_tool_calls: (x.invalid_tool_calls as InvalidToolCall[] | undefined) ?? [],
        ...(x.usage_metadata ? { usage_metadata: x.usage_metadata as UsageMetadata } : {}),
      });
    case Role.ROLE_TOOL_RESULT:
      return new ToolMessage({
        ...baseFieldsFrom(x),
        content: contentFromContextd(m),
        tool_call_id: m.toolCallId,
        ...(x.noName ? {} : { name: m.toolName }),
        ...(x.status !== undefined ? { status: x.status as "success" | "error" } : m.isError ? { status: "error" as const } : {}),
        ...(x.artifact !== undefined ? { artifact: x.artifact } : {}),
        ...(x.metadata !== undefined ? { metadata: x.metadata as Json } : {}),
      });
    default: {
      const stored = x.stored as Parameters<typeof mapStoredMessageToChatMessage>[0] | undefined;
      if (m.role === Role.ROLE_CUSTOM && m.customType.startsWith(CUSTOM_TYPE_PREFIX) && stored) return mapStoredMessageToChatMessage(stored);
      return new HumanMessage(plainText(m));
    }
  }
}

/**
 * contextd messages (an assembled context, a transcript) as LangChain messages. What contextd or an
 * engine made comes back in the nearest LangChain form: its compaction summary (a ROLE_USER
 * message) is a HumanMessage; a message of a role LangChain lacks is a HumanMessage with its text.
 */
export function fromContextd(messages: readonly Message[]): BaseMessage[] {
  return messages.map(fromContextdMessage);
}
