/**
 * Where a run of messages may be cut without separating a tool call from its result.
 *
 * Both compaction (where a leaf's span ends) and assembly (where the verbatim tail begins) cut the
 * history in two. A cut before messages[i] is valid when messages[i] is not a tool result and no
 * tool call made before i has its result at or after i — so a model never sees a result without
 * its call, nor a call without its result. A tool result whose call is unknown belongs to the
 * nearest assistant message before it (as in contextd's native compaction).
 */
import { Role, toolCallIds, type Message } from "contextd/engine-sdk";

/** The fields the cut analysis reads (MessageMeta and Message both have them). */
export interface PairFields {
  role: Role;
  toolCallIds: readonly string[];
  toolCallId: string;
}

/** Ids of the tool calls an assistant message makes. */
export function toolCallIdsOf(message: Message): string[] {
  return toolCallIds(message);
}

/**
 * `starts[i]` for 0 ≤ i ≤ n: may a suffix (or the part after a cut) begin at messages[i]?
 * `starts[n]` is true (cutting after the last message). O(n).
 */
export function validStarts(messages: readonly PairFields[]): boolean[] {
  const n = messages.length;
  // open[i] > 0 ⇔ some call/result pair straddles the gap before i (difference array).
  const diff = new Int32Array(n + 1);
  const owner = new Map<string, number>();
  let lastAssistant = -1;
  for (let j = 0; j < n; j++) {
    const m = messages[j];
    if (m.role === Role.ROLE_ASSISTANT) lastAssistant = j;
    for (const id of m.toolCallIds) owner.set(id, j);
    if (m.role !== Role.ROLE_TOOL_RESULT) continue;
    const from = owner.get(m.toolCallId) ?? lastAssistant;
    if (from >= 0 && from < j) {
      diff[from + 1]++;
      diff[j + 1]--;
    }
  }
  const starts = new Array<boolean>(n + 1);
  let open = 0;
  for (let i = 0; i < n; i++) {
    open += diff[i];
    starts[i] = open === 0 && messages[i].role !== Role.ROLE_TOOL_RESULT;
  }
  starts[n] = true;
  return starts;
}
