/**
 * The compaction loop: grow the summary DAG until the session fits its target.
 *
 *   repeat:
 *     size = tokens of the system messages + the root summaries + the other raw messages
 *     stop when size ≤ target (or, for a THRESHOLD compaction, when nothing outside the protected
 *       fresh tail is left)
 *     summarize the oldest chunk outside the protected fresh tail into a leaf, then condense
 *     if there is no such chunk, halve the protection (down to the minimal tail: the latest user
 *       message onwards) — this is how it converges when the fresh tail alone exceeds the target
 *     if the protection is already minimal, stop: nothing is left to compact
 *
 * System messages are never summarized (pinned.ts): they weigh nothing when a chunk or the
 * protected tail is measured, and a chunk of nothing but system messages is no chunk.
 *
 * Every step shrinks the raw tail or the protection, so the loop ends; a step cap backs that up.
 * Between steps it checks the call's signal (throws on abort) and its soft deadline (stops early,
 * with everything done so far kept: each leaf is committed as it is made, so the next call goes on
 * from there).
 */
import { chunkEnd, minimalTailStart, protectedTailStart } from "./chunking.js";
import type { SummaryDag } from "./dag.js";
import type { LosslessStore } from "./store.js";
import type { SummarizeCall } from "./summarizer.js";
import { foldsSomething, isSystem, weightless } from "./pinned.js";
import { sumTokens, type MessageMeta } from "./types.js";
import { validStarts } from "./tool-pairs.js";

/** Below this, a halved protection becomes 0 (the minimal tail). */
const MIN_PROTECT_TOKENS = 256;
const MAX_STEPS = 100_000;

export type CompactGoal =
  /** Until roots + raw ≤ target tokens. */
  | { kind: "budget"; target: number }
  /** Everything outside the protected fresh tail. */
  | { kind: "threshold" };

export interface CompactRequest {
  sessionId: string;
  goal: CompactGoal;
  /** Make at least one leaf even when the goal is already met. */
  force: boolean;
  /** Stop starting new steps after this time (epoch ms); the work done so far is kept. */
  softDeadlineMs: number;
  call: SummarizeCall;
}

export type StopReason = "fits" | "nothing-left" | "deadline" | "step-limit";

export interface CompactReport {
  leafSummaries: number;
  condensedSummaries: number;
  tokensBefore: number;
  tokensAfter: number;
  /** The fresh-tail protection the loop ended with (smaller than configured when it had to shrink). */
  protectedTokens: number;
  stopped: StopReason;
}

export class Compactor {
  constructor(
    private readonly store: LosslessStore,
    private readonly dag: SummaryDag,
    private readonly settings: { freshTailTokens: number; chunkTokens: number },
  ) {}

  /**
   * Tokens of the session as assembled without dropping anything: every system message (pinned,
   * pinned.ts), root summaries, the rest of the raw tail.
   */
  size(sessionId: string, raw = this.store.rawMessages(sessionId)): number {
    const unpinned = raw.filter((m) => !isSystem(m));
    return sumTokens(this.store.systemMessages(sessionId)) + sumTokens(this.store.roots(sessionId)) + sumTokens(unpinned);
  }

  /** End of the next leaf chunk of `raw` before `limit` (chunking.ts), or 0 when it would summarize only system messages. */
  private nextChunk(raw: readonly MessageMeta[], limitOf: (weighted: MessageMeta[], starts: boolean[]) => number): number {
    const weighted = weightless(raw);
    const starts = validStarts(weighted);
    const end = chunkEnd(weighted, limitOf(weighted, starts), this.settings.chunkTokens, starts);
    return end > 0 && foldsSomething(raw.slice(0, end)) ? end : 0;
  }

  async run(req: CompactRequest): Promise<CompactReport> {
    const { sessionId, goal, call } = req;
    const report: CompactReport = {
      leafSummaries: 0,
      condensedSummaries: 0,
      tokensBefore: this.size(sessionId),
      tokensAfter: 0,
      protectedTokens: this.settings.freshTailTokens,
      stopped: "step-limit",
    };
    let protect = this.settings.freshTailTokens;
    for (let step = 0; step < MAX_STEPS; step++) {
      call.signal.throwIfAborted();
      const raw = this.store.rawMessages(sessionId);
      const size = this.size(sessionId, raw);
      const owed = req.force && report.leafSummaries === 0;
      if (goal.kind === "budget" && size <= goal.target && !owed) {
        report.stopped = "fits";
        break;
      }
      if (Date.now() >= req.softDeadlineMs) {
        report.stopped = "deadline";
        break;
      }
      const end = this.nextChunk(raw, (weighted, starts) => protectedTailStart(weighted, protect, starts));
      if (end === 0) {
        // Nothing outside the protected tail. A threshold compaction is done (unless forced);
        // otherwise protect less, until only the minimal tail is protected.
        const mayShrink = goal.kind === "budget" || owed;
        if (!mayShrink || protect === 0) {
          report.stopped = goal.kind === "threshold" && !owed ? "fits" : "nothing-left";
          break;
        }
        protect = protect >= 2 * MIN_PROTECT_TOKENS ? Math.floor(protect / 2) : 0;
        continue;
      }
      await this.dag.addLeaf(sessionId, raw.slice(0, end), call);
      report.leafSummaries++;
      report.condensedSummaries += (await this.dag.condense(sessionId, call)).length;
      // A threshold compaction shrank the protection only to honour `force`: restore it.
      if (goal.kind === "threshold") protect = this.settings.freshTailTokens;
    }
    report.protectedTokens = protect;
    report.tokensAfter = this.size(sessionId);
    return report;
  }

  /**
   * Summarizes leaves until the raw tail starts at or after the message with ord `ord` (used to
   * line the fresh tail up with the host's active view), but never into the minimal tail.
   */
  async summarizeBefore(sessionId: string, ord: number, call: SummarizeCall): Promise<{ leaves: number; condensed: number }> {
    let leaves = 0;
    let condensed = 0;
    for (let step = 0; step < MAX_STEPS; step++) {
      call.signal.throwIfAborted();
      const raw = this.store.rawMessages(sessionId);
      const limit = raw.findIndex((m) => m.ord >= ord);
      if (limit <= 0) break;
      const end = this.nextChunk(raw, (weighted, starts) => {
        let cut = limit;
        while (cut < weighted.length && !starts[cut]) cut++;
        // Never summarize the latest user turn, even to line up with the host.
        return Math.min(cut, minimalTailStart(weighted, starts));
      });
      if (end === 0) break;
      await this.dag.addLeaf(sessionId, raw.slice(0, end), call);
      leaves++;
      condensed += (await this.dag.condense(sessionId, call)).length;
    }
    return { leaves, condensed };
  }
}
