import { readFile } from "node:fs/promises";
import { Role, type Message } from "../contract/gen/contextd/v1/types.js";
import { parseConversation } from "../host/conversation-lines.js";

/**
 * Reads a conversation for `contextctl replay` and `contextctl import`: JSONL, one message per line,
 * in the simple chat, OpenClaw session or proto JSON form. The line parsing lives in
 * src/host/conversation-lines.ts (shared with SessionService.ImportTranscript); it is re-exported
 * here so the CLI's API stays as it was.
 */
export { ConversationLineError, parseConversation, parseConversationLines, type ConversationLine } from "../host/conversation-lines.js";

export async function readConversationFile(path: string): Promise<Message[]> {
  return parseConversation(await readFile(path, "utf8"), path);
}

/**
 * Splits a conversation into turns: a turn starts at each user message (messages before the first
 * user message, such as a system prompt, belong to the first turn).
 */
export function splitTurns(messages: Message[]): Message[][] {
  const turns: Message[][] = [];
  for (const message of messages) {
    const current = turns[turns.length - 1];
    if (!current || (message.role === Role.ROLE_USER && current.some((m) => m.role === Role.ROLE_USER))) turns.push([]);
    turns[turns.length - 1].push(message);
  }
  return turns;
}
