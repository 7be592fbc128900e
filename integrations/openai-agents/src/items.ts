import { Message, Role, textBlock as text, thinkingBlock, toolCallBlock as toolCall, type ContentBlock } from "contextd/client";
import type { AgentInputItem } from "@openai/agents";

/**
 * One mapping between the Agents SDK's items (`AgentInputItem`) and contextd Messages.
 *
 * Each item becomes one Message that engines, compaction and search understand: user, assistant
 * and system messages keep their role and text; a function call (handoffs are function calls too:
 * `transfer_to_<agent>`) is an assistant message with one tool-call block; its output is a
 * ROLE_TOOL_RESULT naming the call; reasoning is an assistant message of thinking blocks. Every
 * other item (hosted, computer, shell, apply-patch calls, compaction items, unknown items) is a
 * ROLE_CUSTOM message `openai-agents:<type>` whose text is the item as JSON.
 *
 * Lossless: `extra_json` keeps the whole item as a skeleton in which every text that went into a
 * content block is replaced by a reference to that block (`{"$b": i}`, with `"f"` naming a
 * tool-call block's field). Decoding puts the blocks' current text back, so an item comes back
 * exactly as it was added — and a block an engine rewrote comes back rewritten, not as the original.
 * Messages contextd made itself (the compaction summary, an engine's own messages) carry no
 * skeleton and decode by role.
 */

/** The `extra_json` key of the skeleton. */
export const SKELETON_KEY = "openaiAgents";
export const CUSTOM_TYPE_PREFIX = "openai-agents:";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };
type BlockRef = { $b: number; f?: "id" | "name" | "arguments" };

const thinking = (t: string): ContentBlock => thinkingBlock(t);

/** The contextd Message for one item; `timestampMs` is when it was added (0: unset). */
export function itemToMessage(item: AgentInputItem, timestampMs = 0): Message {
  const skeleton = structuredClone(item) as unknown as Obj;
  const content: ContentBlock[] = [];
  const ref = (block: ContentBlock, f?: BlockRef["f"]): Json => {
    content.push(block);
    return (f ? { $b: content.length - 1, f } : { $b: content.length - 1 }) as Json;
  };
  /** Moves every `text` (and `refusal`) string of a parts array into text blocks. */
  const partsToBlocks = (parts: Json[], make: (t: string) => ContentBlock) => {
    for (const part of parts) {
      if (!isObj(part)) continue;
      for (const field of ["text", "refusal"]) {
        if (typeof part[field] === "string") part[field] = ref(make(part[field] as string));
      }
    }
  };

  const type = typeof skeleton.type === "string" ? skeleton.type : "message";
  let role: Role;
  let extra: Partial<Message> = {};
  if (type === "message" && (skeleton.role === "user" || skeleton.role === "assistant" || skeleton.role === "system")) {
    role = skeleton.role === "user" ? Role.ROLE_USER : skeleton.role === "assistant" ? Role.ROLE_ASSISTANT : Role.ROLE_SYSTEM;
    if (typeof skeleton.content === "string") {
      skeleton.content = ref(text(skeleton.content));
      extra.contentIsText = true;
    } else if (Array.isArray(skeleton.content)) {
      partsToBlocks(skeleton.content, text);
    }
  } else if (type === "function_call") {
    role = Role.ROLE_ASSISTANT;
    content.push(toolCall(String(skeleton.callId ?? ""), String(skeleton.name ?? ""), String(skeleton.arguments ?? "")));
    skeleton.callId = { $b: 0, f: "id" };
    skeleton.name = { $b: 0, f: "name" };
    skeleton.arguments = { $b: 0, f: "arguments" };
  } else if (type === "function_call_result") {
    role = Role.ROLE_TOOL_RESULT;
    extra = { toolCallId: String(skeleton.callId ?? ""), toolName: String(skeleton.name ?? ""), isError: skeleton.status === "incomplete" };
    const output = skeleton.output;
    if (typeof output === "string") skeleton.output = ref(text(output));
    else if (Array.isArray(output)) partsToBlocks(output, text);
    else if (isObj(output)) partsToBlocks([output], text);
  } else if (type === "reasoning") {
    role = Role.ROLE_ASSISTANT;
    if (Array.isArray(skeleton.content)) partsToBlocks(skeleton.content, thinking);
  } else {
    role = Role.ROLE_CUSTOM;
    extra.customType = CUSTOM_TYPE_PREFIX + type;
    content.push(text(JSON.stringify(item)));
  }
  if (content.length === 0 && role !== Role.ROLE_ASSISTANT && role !== Role.ROLE_TOOL_RESULT) {
    // contextd refuses an empty user or system message; a message of only images or files gets a
    // text naming its parts (what engines and search see). No reference points at it: decoding ignores it.
    const parts = Array.isArray(skeleton.content) ? skeleton.content.map((p) => (isObj(p) ? String(p.type) : "part")) : [];
    content.push(text(`[${parts.join(", ") || "empty"}]`));
  }
  return Message.fromPartial({ role, content, ...extra, timestampMs, extraJson: JSON.stringify({ [SKELETON_KEY]: skeleton }) });
}

/** The item a contextd Message stands for: its skeleton with the blocks' text put back, else by role. */
export function messageToItem(message: Message): AgentInputItem {
  const skeleton = skeletonOf(message);
  if (skeleton) return fill(skeleton, message.content) as unknown as AgentInputItem;
  const body = message.content.map(blockText).filter(Boolean).join("\n");
  switch (message.role) {
    case Role.ROLE_ASSISTANT: {
      const call = message.content.find((b) => b.block?.$case === "toolCall");
      if (call?.block?.$case === "toolCall") {
        const c = call.block.value;
        return { type: "function_call", callId: c.id, name: c.name, arguments: c.argumentsJson, status: "completed" };
      }
      return { role: "assistant", status: "completed", content: [{ type: "output_text", text: body }] };
    }
    case Role.ROLE_SYSTEM:
      return { role: "system", content: body };
    case Role.ROLE_TOOL_RESULT:
      return { type: "function_call_result", callId: message.toolCallId, name: message.toolName, status: "completed", output: body };
    default:
      // The compaction summary is a ROLE_USER message; anything else contextd made reads as the user's.
      return { role: "user", content: body };
  }
}

function skeletonOf(message: Message): Obj | undefined {
  if (!message.extraJson) return undefined;
  try {
    const extra = JSON.parse(message.extraJson) as unknown;
    return isObj(extra) && isObj(extra[SKELETON_KEY]) ? (extra[SKELETON_KEY] as Obj) : undefined;
  } catch {
    return undefined;
  }
}

function fill(node: Json, blocks: ContentBlock[]): Json {
  if (Array.isArray(node)) return node.map((n) => fill(n, blocks));
  if (!isObj(node)) return node;
  if (isRef(node)) {
    const b = blocks[node.$b]?.block;
    if (!b) return "";
    if (b.$case === "toolCall") return node.f === "id" ? b.value.id : node.f === "name" ? b.value.name : b.value.argumentsJson;
    return blockText(blocks[node.$b]);
  }
  const out: Obj = {};
  for (const [k, v] of Object.entries(node)) out[k] = fill(v, blocks);
  return out;
}

function isRef(o: Obj): o is Obj & BlockRef {
  const keys = Object.keys(o);
  return typeof o.$b === "number" && keys.every((k) => k === "$b" || k === "f");
}

function blockText(block: ContentBlock): string {
  const b = block.block;
  if (!b) return "";
  if (b.$case === "text") return b.value.text;
  if (b.$case === "thinking") return b.value.thinking;
  if (b.$case === "toolCall") return `${b.value.name}(${b.value.argumentsJson})`;
  return "";
}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
