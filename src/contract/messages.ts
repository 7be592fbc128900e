import {
  ImageBlock,
  Message as MessageCodec,
  Role,
  TextBlock,
  ThinkingBlock,
  ToolCallBlock,
  type ContentBlock,
  type Message,
} from "./gen/contextd/v1/types.js";

/** Metadata key that marks the user message carrying a compaction summary in an active view. */
export const SUMMARY_METADATA_KEY = "contextd.kind";
export const SUMMARY_METADATA_VALUE = "compaction_summary";
/** Metadata on the summary message: the compaction's tokens_before (OpenClaw's `tokensBefore`). */
export const SUMMARY_TOKENS_BEFORE_KEY = "contextd.tokens_before";

/** The text of every text, thinking and tool-call block, one per line. */
export function messageText(message: Message): string {
  const parts: string[] = [];
  for (const block of message.content) {
    const text = blockText(block);
    if (text) parts.push(text);
  }
  return parts.join("\n");
}

export function blockText(block: ContentBlock): string {
  const b = block.block;
  if (!b) return "";
  switch (b.$case) {
    case "text":
      return b.value.text;
    case "thinking":
      return b.value.thinking;
    case "toolCall":
      return `${b.value.name}(${b.value.argumentsJson})`;
    case "image":
      return "";
  }
}

/** Ids of the tool calls an assistant message makes. */
export function toolCallIds(message: Message): string[] {
  const ids: string[] = [];
  for (const block of message.content) {
    if (block.block?.$case === "toolCall") ids.push(block.block.value.id);
  }
  return ids;
}

export function isSummaryMessage(message: Message): boolean {
  return message.metadata?.[SUMMARY_METADATA_KEY] === SUMMARY_METADATA_VALUE;
}

const MessageDefaults = (): Message => MessageCodec.fromPartial({});

/** Content blocks with every other field at its default. */
export function textBlock(text: string): ContentBlock {
  return { block: { $case: "text", value: TextBlock.fromPartial({ text }) } };
}

export function toolCallBlock(id: string, name: string, argumentsJson: string): ContentBlock {
  return { block: { $case: "toolCall", value: ToolCallBlock.fromPartial({ id, name, argumentsJson }) } };
}

export function thinkingBlock(thinking: string, signature = ""): ContentBlock {
  return { block: { $case: "thinking", value: ThinkingBlock.fromPartial({ thinking, signature }) } };
}

export function imageBlock(mimeType: string, data: Uint8Array, uri = ""): ContentBlock {
  return { block: { $case: "image", value: ImageBlock.fromPartial({ mimeType, data: Buffer.from(data), uri }) } };
}

export function textMessage(role: Role, text: string, extra: Partial<Message> = {}): Message {
  return {
    ...MessageDefaults(),
    role,
    content: [textBlock(text)],
    ...extra,
  };
}

export const ROLE_NAMES: Record<Role, string> = {
  [Role.ROLE_UNSPECIFIED]: "unspecified",
  [Role.ROLE_USER]: "user",
  [Role.ROLE_ASSISTANT]: "assistant",
  [Role.ROLE_TOOL_RESULT]: "tool_result",
  [Role.ROLE_SYSTEM]: "system",
  [Role.ROLE_CUSTOM]: "custom",
  [Role.ROLE_BASH_EXECUTION]: "bash_execution",
  [Role.ROLE_BRANCH_SUMMARY]: "branch_summary",
  [Role.ROLE_COMPACTION_SUMMARY]: "compaction_summary",
  [Role.UNRECOGNIZED]: "unrecognized",
};

/**
 * The summary reaches the model as a user message that says the earlier conversation was compacted
 * into it. Engines recognise it by its metadata (SUMMARY_METADATA_KEY), not by its wording.
 */
const SUMMARY_PREAMBLE =
  "The earlier part of this conversation was compacted into the summary below. " + "Treat it as what happened before the messages that follow.\n\n<summary>\n";
const SUMMARY_CLOSING = "\n</summary>";

export function summaryMessage(summary: string, entryId = "", tokenCount = 0, timestampMs = 0, tokensBefore?: number): Message {
  const metadata: Record<string, string> = { [SUMMARY_METADATA_KEY]: SUMMARY_METADATA_VALUE };
  if (tokensBefore !== undefined) metadata[SUMMARY_TOKENS_BEFORE_KEY] = String(tokensBefore);
  return textMessage(Role.ROLE_USER, SUMMARY_PREAMBLE + summary + SUMMARY_CLOSING, { id: entryId, tokenCount, timestampMs, metadata });
}

/** The raw summary inside a summary message (the inverse of summaryMessage). */
export function summaryOf(message: Message): string {
  const text = messageText(message);
  const start = text.startsWith(SUMMARY_PREAMBLE) ? SUMMARY_PREAMBLE.length : 0;
  const end = text.endsWith(SUMMARY_CLOSING) ? text.length - SUMMARY_CLOSING.length : text.length;
  return text.slice(start, end);
}
