import { ConflictError } from "../contract/errors.js";
import { summaryMessage } from "../contract/messages.js";
import type { CompactionResult } from "../contract/gen/contextd/v1/types.js";
import { compactNative, type NativeCompactionDeps, type NativeCompactionInput } from "../legacy/compaction/native-compaction.js";
import type { ActiveView, TranscriptStore } from "../store/types.js";
import { viewMessages } from "./active-view.js";
import { NO_OBSERVER, type HostObserver } from "./host-observer.js";

export interface CommitOutcome {
  committed: boolean;
  reason: string;
  /** The compaction entry's id when committed. */
  entryId?: string;
}

export interface NativeRun {
  compacted: boolean;
  committed: boolean;
  /** Another compaction of the session was committed first; re-read the view and try again. */
  conflict: boolean;
  reason: string;
  result?: CompactionResult;
  entryId?: string;
}

/** A native compaction request: the compaction input without the messages (the host reads the view). */
export type NativeRequest = Omit<NativeCompactionInput, "messages"> & {
  /** Asked right before committing; false discards the result (e.g. the engine call that asked has ended). */
  mayCommit?: () => boolean;
};

/**
 * Commits compaction results to the store with optimistic concurrency, and runs the host's native
 * compaction (auto-compaction before Assemble, and later HostService.DelegateCompaction).
 */
export class Compactions {
  constructor(
    private readonly store: TranscriptStore,
    private readonly native: NativeCompactionDeps,
    private readonly observer: HostObserver = NO_OBSERVER,
  ) {}

  /**
   * Appends the compaction entry unless another compaction of the session was committed since the
   * view was read; then the result is discarded and the transcript is untouched.
   */
  async commit(view: ActiveView, result: CompactionResult, engineId: string, seconds?: number): Promise<CommitOutcome> {
    const outcome = await this.commitOnce(view, result, engineId);
    this.observer.compaction(engineId, outcome.committed ? "committed" : "conflict", result.tokensBefore, result.tokensAfter, seconds);
    return outcome;
  }

  private async commitOnce(view: ActiveView, result: CompactionResult, engineId: string): Promise<CommitOutcome> {
    const summaryTokens = this.native.tokenizer.countMessage(summaryMessage(result.summary));
    try {
      const entry = await this.store.commitCompaction(
        view.session.sessionId,
        {
          summary: result.summary,
          firstKeptEntryId: result.firstKeptEntryId,
          tokensBefore: result.tokensBefore,
          tokensAfter: result.tokensAfter,
          engineId,
          details: result.details,
        },
        view.session.latestCompactionId,
        summaryTokens,
        view.session.lastSeq,
      );
      return { committed: true, reason: "", entryId: entry.id };
    } catch (err) {
      if (err instanceof ConflictError) {
        return { committed: false, reason: `discarded: another compaction of this session was committed first (${err.message})` };
      }
      throw err;
    }
  }

  /** The host's native compaction of `view`, committed under `engineId`. */
  async runNative(view: ActiveView, req: NativeRequest, engineId: string): Promise<NativeRun> {
    const { mayCommit, ...input } = req;
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    const outcome = await compactNative({ ...input, messages: viewMessages(view) }, this.native);
    if (!outcome.compacted || !outcome.result) {
      this.observer.compaction(engineId, "nothing", view.tokens, view.tokens, seconds());
      return { ...outcome, committed: false, conflict: false };
    }
    const { tokensBefore, tokensAfter } = outcome.result;
    if (!req.force && tokensAfter >= tokensBefore) {
      // Nothing would shrink (e.g. a budget smaller than the latest turn): do not grow the
      // transcript with a compaction entry that changes nothing.
      this.observer.compaction(engineId, "nothing", tokensBefore, tokensAfter, seconds());
      return { compacted: false, committed: false, conflict: false, reason: `no progress: ${tokensBefore} → ${tokensAfter} tokens; not committed` };
    }
    if (mayCommit && !mayCommit()) {
      this.observer.compaction(engineId, "discarded", tokensBefore, tokensAfter, seconds());
      return { compacted: false, committed: false, conflict: false, reason: "discarded: the call that asked for it ended before it could be committed" };
    }
    const commit = await this.commit(view, outcome.result, engineId, seconds());
    return commit.committed
      ? { ...outcome, committed: true, conflict: false, entryId: commit.entryId }
      : { compacted: false, reason: commit.reason, committed: false, conflict: true };
  }
}
