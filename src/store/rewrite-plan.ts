import { InvalidArgumentError } from "../contract/errors.js";
import { quote } from "../contract/quote.js";
import type { TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import { decodeEntry } from "./rows.js";
import { rewrittenEntryRow, type EntryUpdateRow, type RewriteTargetRow } from "./rewrite-rows.js";
import type { EntryRewriteInput } from "./types.js";

/** One rewrite, resolved against its stored entry and encoded, ready to write. */
export interface PlannedRewrite {
  id: string;
  target: RewriteTargetRow;
  previous: TranscriptEntry;
  next: { row: EntryUpdateRow; entry: TranscriptEntry };
}

/**
 * Resolves and encodes every rewrite of one request, in request order, before anything is
 * written — so a bad rewrite anywhere in the request fails it whole. Both stores plan with this
 * (they differ only in how a target row is looked up and how the plan is written), which keeps their
 * checks and error messages the same.
 */
export function planRewrites(
  sessionId: string,
  rewrites: readonly EntryRewriteInput[],
  targetOf: (entryId: string) => RewriteTargetRow | undefined,
): PlannedRewrite[] {
  const seen = new Set<string>();
  return rewrites.map((r, i) => {
    const id: unknown = r?.entryId;
    if (typeof id !== "string" || id === "") throw new InvalidArgumentError(`rewrite ${i}: entry_id is required`);
    if (seen.has(id)) throw new InvalidArgumentError(`entry ${id} is rewritten more than once in one request`);
    seen.add(id);
    const target = targetOf(id);
    if (!target || target.kind !== "message") {
      throw new InvalidArgumentError(`entry ${quote(id)} is not a message entry of session ${quote(sessionId)}`);
    }
    const previous = decodeEntry(target.payload);
    const next = rewrittenEntryRow(sessionId, target.seq, previous, r.message, r.tokenCount, `rewrite of entry ${id}`);
    return { id, target, previous, next };
  });
}

/** What writing `planned` changes: the session's token total, and the payload bytes it frees. */
export function rewriteTotals(planned: readonly PlannedRewrite[]): { tokenDelta: number; bytesFreed: number } {
  let tokenDelta = 0;
  let bytesFreed = 0;
  for (const p of planned) {
    tokenDelta += p.next.row.token_count - p.target.token_count;
    bytesFreed += p.target.payload.length - p.next.row.payload.length;
  }
  return { tokenDelta, bytesFreed: Math.max(0, bytesFreed) };
}
