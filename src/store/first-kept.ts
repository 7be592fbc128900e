import { InvalidArgumentError } from "../contract/errors.js";
import { Role } from "../contract/gen/contextd/v1/types.js";

/** What commitCompaction reads about the entry a compaction names as its first kept one. */
export interface FirstKeptRow {
  seq: number;
  kind: string;
  role: number | null;
  hidden: boolean | number;
}

/**
 * The seq of a compaction's first kept entry, or the InvalidArgumentError both stores refuse it
 * with (the same words in each). It must be a visible message entry at or after the view's cut: a
 * pinned system message from before the cut is in the view, but it heads the view whatever the cut
 * (docs/pinned-messages.md), so starting the kept part there would bring back the history the
 * earlier compaction summarized.
 */
export function firstKeptSeq(sessionId: string, firstKeptId: string, kept: FirstKeptRow | undefined, activeFromSeq: number): number {
  if (kept && kept.kind === "message" && !kept.hidden) {
    if (kept.seq >= activeFromSeq) return kept.seq;
    if (kept.role === Role.ROLE_SYSTEM) {
      throw new InvalidArgumentError(
        `first_kept_entry_id ${firstKeptId} is a pinned system message of session ${sessionId}, from before the active view's cut: ` +
          "it heads the view whatever the cut, so name the first kept entry after the summary (or none)",
      );
    }
  }
  throw new InvalidArgumentError(`first_kept_entry_id ${firstKeptId} is not a message of session ${sessionId}'s active view`);
}
