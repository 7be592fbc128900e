import { ROLE_NAMES } from "../contract/messages.js";
import { Mode, Role, type ContentBlock, type Message } from "../contract/gen/contextd/v1/types.js";

/**
 * What a message says, as plain text: for `contextctl context` (which escapes it for the terminal)
 * and for the history tools a model calls (src/sdk/history-tools.ts). One rendering for both, so
 * a person and a model read an assembled context the same way.
 */

export function roleName(role: Role): string {
  return ROLE_NAMES[role] ?? String(role);
}

/** `NORMAL`, `FALLBACK`, `DEGRADED`. */
export function modeName(mode: Mode): string {
  return Mode[mode]?.replace(/^MODE_/, "") ?? String(mode);
}

function blockBody(block: ContentBlock): string {
  const b = block.block;
  if (!b) return "";
  switch (b.$case) {
    case "text":
      return b.value.text;
    case "thinking":
      return b.value.redacted ? "[redacted thinking]" : `[thinking] ${b.value.thinking}`;
    case "toolCall":
      return `[tool call ${b.value.id}] ${b.value.name}(${b.value.argumentsJson})`;
    case "image":
      return `[image ${b.value.mimeType || "?"}${b.value.uri ? ` ${b.value.uri}` : `, ${b.value.data.length.toLocaleString("en-US")} bytes`}]`;
  }
}

/** Everything in a message the model reads, block by block (the whole summary message included). */
export function messageBody(m: Message): string {
  const head = m.role === Role.ROLE_TOOL_RESULT ? `[result of ${m.toolName || "tool"} ${m.toolCallId}${m.isError ? ", error" : ""}] ` : "";
  return head + m.content.map(blockBody).filter(Boolean).join("\n");
}
