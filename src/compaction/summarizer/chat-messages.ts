import { Role, type Message } from "../../contract/gen/contextd/v1/types.js";
import type { ChatMessage } from "../../llm/chat-completions.js";
import { renderMessage } from "./summary-prompt.js";

/**
 * HostService.Complete's request as chat-completions messages. User, assistant and system text
 * keep their roles; what the chat format can only carry with tool definitions (tool calls, tool
 * results, shell runs, custom messages) is sent as labelled text in the same role the transcript
 * renderer uses for summaries, so any OpenAI-compatible server accepts it.
 */
export function chatMessages(system: string, messages: readonly Message[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (system.trim()) out.push({ role: "system", content: system });
  for (const m of messages) {
    const text = m.content
      .map((c) => (c.block?.$case === "text" ? c.block.value.text : ""))
      .filter(Boolean)
      .join("\n");
    const plain = m.content.every((c) => c.block?.$case === "text");
    if (plain && text && m.role === Role.ROLE_USER) out.push({ role: "user", content: text });
    else if (plain && text && m.role === Role.ROLE_SYSTEM) out.push({ role: "system", content: text });
    else if (m.role === Role.ROLE_ASSISTANT) {
      const rendered = plain ? text : renderMessage(m).replace(/^\[Assistant\]: /, "");
      if (rendered) out.push({ role: "assistant", content: rendered });
    } else {
      const rendered = renderMessage(m);
      if (rendered) out.push({ role: "user", content: rendered });
    }
  }
  return out;
}
