import { SystemMessage, type BaseMessage } from "@langchain/core/messages";

/**
 * The system message the model gets: the assembled context's leading system messages (the agent's
 * own, as contextd holds it) with contextd's system-prompt addition before them — an empty one
 * (which LangChain leaves out) when there is neither.
 */
export function modelSystemMessage(leading: BaseMessage[], addition: string): SystemMessage {
  const first = leading[0];
  if (leading.length === 1 && !addition) return first as SystemMessage;
  const texts = [addition, ...leading.map((m) => m.text)].filter(Boolean);
  if (leading.length === 0 || (leading.length === 1 && typeof first.content === "string"))
    return new SystemMessage({
      ...(first ? { id: first.id, additional_kwargs: first.additional_kwargs, response_metadata: first.response_metadata } : {}),
      content: texts.join("\n\n"),
    });
  // Several, or content blocks (cache control): the blocks in order, the addition first.
  const blocks = leading.flatMap((m) => (typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content));
  return new SystemMessage({ content: [...(addition ? [{ type: "text", text: addition }] : []), ...blocks] });
}
