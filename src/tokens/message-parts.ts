import type { Message } from "../contract/gen/contextd/v1/types.js";

/**
 * Per-message overhead of chat formats (role marker and separators), as OpenAI documents for its
 * chat models. Counted so that a context of many short messages is not underestimated.
 */
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** What a message's token count is made of: texts to run through the BPE, plus fixed tokens. */
export interface MessageParts {
  texts: string[];
  fixed: number;
  /** Characters of `texts`: what counting costs. */
  chars: number;
}

/**
 * The one definition of what counts in a message, shared by inline counting and the worker pool
 * (which gets only the texts, never the whole message, across the thread boundary).
 */
export function messageParts(message: Message, imageTokens: number): MessageParts {
  const texts: string[] = [];
  let fixed = MESSAGE_OVERHEAD_TOKENS;
  for (const block of message.content) {
    const b = block.block;
    if (!b) continue;
    switch (b.$case) {
      case "text":
        texts.push(b.value.text);
        break;
      case "thinking":
        texts.push(b.value.thinking);
        break;
      case "toolCall":
        texts.push(b.value.name, b.value.argumentsJson);
        fixed += 3;
        break;
      case "image":
        fixed += imageTokens;
        break;
    }
  }
  if (message.toolName) texts.push(message.toolName);
  let chars = 0;
  for (const t of texts) chars += t.length;
  return { texts, fixed, chars };
}
