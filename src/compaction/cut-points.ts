import { toolCallIds } from "../contract/messages.js";
import { Role, type Message } from "../contract/gen/contextd/v1/types.js";

/**
 * Where an active view may be cut: the kept tail starts at the cut, everything before it is
 * summarized. A cut at index i is valid when messages[i] is not a tool result and no tool call made
 * before i has its result at or after i, so a tool call is never separated from its result.
 * A tool result whose call is missing belongs to the nearest preceding assistant message.
 */

/** messages[i] cannot start the kept tail. */
export const NOT_A_CUT = 0;
/** A turn boundary: messages[i] is a user message. Preferred. */
export const TURN_CUT = 1;
/**
 * Inside a turn (before an assistant, system or custom message), i.e. at a tool-pair boundary:
 * chooseCut uses one only when no turn boundary fits; chooseFillingCut whenever a turn boundary
 * would keep much less.
 */
export const INTRA_TURN_CUT = 2;

export type CutKind = "turn" | "intra_turn" | "none";

export interface Cut {
  /** Index of the first kept message; messages.length when nothing is kept. */
  index: number;
  kind: CutKind;
}

/** One entry per message: NOT_A_CUT, TURN_CUT or INTRA_TURN_CUT. O(n). */
export function analyzeCutPoints(messages: readonly Message[]): Uint8Array {
  const n = messages.length;
  // blocked[i] > 0 ⇔ some tool call/result pair straddles the gap before i; built as a difference array.
  const diff = new Int32Array(n + 1);
  const callOwner = new Map<string, number>();
  let lastAssistant = -1;
  for (let j = 0; j < n; j++) {
    const m = messages[j];
    if (m.role === Role.ROLE_ASSISTANT) lastAssistant = j;
    for (const id of toolCallIds(m)) callOwner.set(id, j);
    if (m.role !== Role.ROLE_TOOL_RESULT) continue;
    const owner = callOwner.get(m.toolCallId) ?? lastAssistant;
    if (owner >= 0 && owner < j) {
      diff[owner + 1]++;
      diff[j + 1]--;
    }
  }
  const kinds = new Uint8Array(n);
  let blocked = 0;
  for (let i = 0; i < n; i++) {
    blocked += diff[i];
    const role = messages[i].role;
    if (blocked > 0 || role === Role.ROLE_TOOL_RESULT) kinds[i] = NOT_A_CUT;
    else kinds[i] = role === Role.ROLE_USER ? TURN_CUT : INTRA_TURN_CUT;
  }
  return kinds;
}

/** suffix[i] = sum of tokens[i..n-1]; suffix[n] = 0. */
export function suffixSums(tokens: readonly number[]): Float64Array {
  const suffix = new Float64Array(tokens.length + 1);
  for (let i = tokens.length - 1; i >= 0; i--) suffix[i] = suffix[i + 1] + tokens[i];
  return suffix;
}

/**
 * The earliest cut (keeping the most) at or after `from` whose kept tail fits `keepTokens`:
 * a turn boundary if any fits, otherwise an intra-turn cut, otherwise nothing is kept. O(n).
 * Because suffix sums only shrink, a smaller keep budget never yields an earlier cut.
 */
export function chooseCut(kinds: Uint8Array, suffix: Float64Array, keepTokens: number, from = 1): Cut {
  const n = kinds.length;
  const start = Math.max(0, from);
  for (let i = start; i < n; i++) {
    if (kinds[i] === TURN_CUT && suffix[i] <= keepTokens) return { index: i, kind: "turn" };
  }
  for (let i = start; i < n; i++) {
    if (kinds[i] === INTRA_TURN_CUT && suffix[i] <= keepTokens) return { index: i, kind: "intra_turn" };
  }
  return { index: n, kind: "none" };
}

/**
 * Share of the keep budget a turn boundary may give up against the best tool-pair boundary and
 * still be preferred by chooseFillingCut. A turn boundary keeps whole exchanges, which reads better,
 * but not at any price: in an agent's session of few user turns with dozens of tool calls each, the
 * only turn boundary that fits is often the latest user message, and preferring it would keep
 * nothing of the recent tool work.
 */
export const TURN_PREFERENCE_SLACK = 0.1;

/**
 * The cut that keeps the most within `keepTokens` (the earliest at or after `from` that fits, of
 * any kind), unless the earliest turn boundary that fits keeps nearly as much — at most
 * `slack × keepTokens` less — then that turn boundary. For a BUDGET target, where what matters is
 * filling the budget: the kept tail is never more than `slack × keepTokens` short of the largest
 * one that fits and cuts no tool pair. O(n).
 */
export function chooseFillingCut(kinds: Uint8Array, suffix: Float64Array, keepTokens: number, from = 1, slack = TURN_PREFERENCE_SLACK): Cut {
  const n = kinds.length;
  let best = -1;
  for (let i = Math.max(0, from); i < n; i++) {
    if (kinds[i] === NOT_A_CUT || suffix[i] > keepTokens) continue;
    if (best < 0) best = i;
    if (kinds[i] === TURN_CUT) {
      if (suffix[best] - suffix[i] <= slack * Math.max(0, keepTokens)) return { index: i, kind: "turn" };
      break;
    }
  }
  if (best < 0) return { index: n, kind: "none" };
  return { index: best, kind: kinds[best] === TURN_CUT ? "turn" : "intra_turn" };
}
