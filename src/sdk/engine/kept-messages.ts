import type { ContextEngineServiceAssembleRequest, ContextEngineServiceAssembleResponse } from "../../contract/gen/contextd/v1/engine.js";
import type { Message } from "../../contract/gen/contextd/v1/types.js";

/**
 * An Assemble answer by reference (engine.proto `kept_entry_ids`) for what the model should see.
 *
 * `messages` is the assembled context as the engine built it: any messages the engine adds (its own
 * summary, a note) first, then messages of `req.messages` — the very objects of the request,
 * unchanged — in the request's order. Those are answered by id, so the answer is a few bytes per
 * message instead of the whole view, and the host sends its own stored copy on. When the list has
 * another shape (an added message after a kept one, a request message moved out of order, or a
 * copy the engine edited, which is a different object), the answer is the echo form `{ messages }`,
 * always valid. Never edit a request message in place and pass it here: the host would send the
 * stored message, not the edit.
 */
export function keepMessages(
  req: Pick<ContextEngineServiceAssembleRequest, "messages">,
  messages: readonly Message[],
): Pick<ContextEngineServiceAssembleResponse, "messages" | "keptEntryIds"> {
  const position = new Map<Message, number>();
  req.messages.forEach((m, i) => m.id && position.set(m, i));
  let first = 0;
  while (first < messages.length && !position.has(messages[first])) first++;
  const keptEntryIds: string[] = [];
  let last = -1;
  for (let i = first; i < messages.length; i++) {
    const at = position.get(messages[i]);
    if (at === undefined || at <= last) return { messages: [...messages], keptEntryIds: [] };
    last = at;
    keptEntryIds.push(messages[i].id);
  }
  return { messages: messages.slice(0, first), keptEntryIds };
}
