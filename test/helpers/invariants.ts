import { Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText, toolCallIds } from "../../src/contract/messages.js";

/**
 * The tool-pair invariant of an assembled context: every tool result comes after the call it
 * answers, and every call has its result. Returns the violations (empty when it holds).
 */
export function toolPairViolations(messages: Message[]): string[] {
  const problems: string[] = [];
  const called = new Set<string>();
  const answered = new Set<string>();
  messages.forEach((m, i) => {
    if (m.role === Role.ROLE_ASSISTANT) for (const id of toolCallIds(m)) called.add(id);
    if (m.role === Role.ROLE_TOOL_RESULT) {
      if (!called.has(m.toolCallId)) problems.push(`messages[${i}] answers tool call ${m.toolCallId}, which is not before it`);
      answered.add(m.toolCallId);
    }
  });
  for (const id of called) if (!answered.has(id)) problems.push(`tool call ${id} has no result`);
  return problems;
}

/** All text the model would see. */
export function contextText(messages: Message[]): string {
  return messages.map(messageText).join("\n");
}
