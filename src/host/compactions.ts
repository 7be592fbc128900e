import { ConflictError } from "../contract/errors.js";
import { summaryMessage } from "../contract/messages.js";
import { isSystemMessage } from "../contract/pinned.js";
import type { CompactionResult } from "../contract/gen/contextd/v1/types.js";
import { compactNative, type CompactionSettings, type NativeCompactionDeps, type NativeCompactionInput } from "../compaction/native-compaction.js";
import type { ActiveView, TranscriptStore } from "../store/types.js";
import { viewMessages } from "./active-view.js";
import { NO_OBSERVER, type HostObserver } from "./host-observer.js";

export interface CommitOutcome {
  committed: boolean;
  /** Not committed because another compaction was committed first (re-read and retry may help). */
  conflict?: boolean;
  reason: string;
  /** The compaction entry's id when committed. */
  entryId?: string;
}

export interface NativeRun {
  compacted: boolean;
  /** Refused by native compaction: no useful summary fits (native-compaction.ts). */
  refused?: boolean;
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
   *
   * A compaction that would not make the active view smaller — as the host counts it: the new
   * summary plus the kept messages' stored counts, against the view's stored tokens, never the
   * engine's `tokens_before/after` — is not committed either, forced or not: it would grow the
   * transcript with an entry that makes the context no smaller (a summary of one short message, a
   * cut that keeps everything). The decision is the host's, here, because every compaction is
   * committed through this one method — the legacy engine's answers, a sidecar's, DelegateCompaction
   * and auto-compaction alike; the legacy engine only proposes (a forced compaction with something
   * to summarize always proposes one).
   */
  async commit(view: ActiveView, result: CompactionResult, engineId: string, seconds?: number): Promise<CommitOutcome> {
    // An engine's summary is as long as its answer bound allows: counted on the pool, by turns with
    // other tenants' counts (src/tokens/count-pool.ts), never on the event loop.
    const [summaryTokens] = await this.native.tokenizer.countMessages([summaryMessage(result.summary)], { tenant: `engine:${engineId}` });
    if (result.firstKeptEntryId && view.messages.slice(0, view.pinnedCount).some((m) => m.entryId === result.firstKeptEntryId)) {
      // The engine's mistake, not the runtime's: the store would refuse it as INVALID_ARGUMENT.
      this.observer.compaction(engineId, "nothing", view.tokens, view.tokens, seconds);
      return {
        committed: false,
        reason: `not committed: first_kept_entry_id ${result.firstKeptEntryId} is a pinned system message from before the active view's cut (docs/pinned-messages.md)`,
      };
    }
    const after = activeTokensAfter(view, result.firstKeptEntryId, summaryTokens);
    if (after !== undefined && after >= view.tokens) {
      this.observer.compaction(engineId, "nothing", view.tokens, view.tokens, seconds);
      return { committed: false, reason: `not committed: no progress — the active view would be ${after} tokens, not fewer than its ${view.tokens}` };
    }
    const outcome = await this.commitOnce(view, result, engineId, summaryTokens);
    this.observer.compaction(engineId, outcome.committed ? "committed" : "conflict", result.tokensBefore, result.tokensAfter, seconds);
    return outcome;
  }

  private async commitOnce(view: ActiveView, result: CompactionResult, engineId: string, summaryTokens: number): Promise<CommitOutcome> {
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
        return { committed: false, conflict: true, reason: `discarded: another compaction of this session was committed first (${err.message})` };
      }
      throw err;
    }
  }

  /** The native compaction's settings (auto-compaction reads `coldCacheCompactRatio`). */
  get settings(): CompactionSettings {
    return this.native.settings;
  }

  /** The host's native compaction of `view`, committed under `engineId`. */
  async runNative(view: ActiveView, req: NativeRequest, engineId: string): Promise<NativeRun> {
    const { mayCommit, ...input } = req;
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    const outcome = await compactNative({ ...input, agentId: view.session.agentId, messages: viewMessages(view) }, this.native);
    if (!outcome.compacted || !outcome.result) {
      this.observer.compaction(engineId, "nothing", view.tokens, view.tokens, seconds());
      return { ...outcome, committed: false, conflict: false };
    }
    const { tokensBefore, tokensAfter } = outcome.result;
    if (mayCommit && !mayCommit()) {
      this.observer.compaction(engineId, "discarded", tokensBefore, tokensAfter, seconds());
      return { compacted: false, committed: false, conflict: false, reason: "discarded: the call that asked for it ended before it could be committed" };
    }
    const commit = await this.commit(view, outcome.result, engineId, seconds());
    return commit.committed
      ? { ...outcome, committed: true, conflict: false, entryId: commit.entryId }
      : { compacted: false, reason: commit.reason, committed: false, conflict: commit.conflict === true };
  }
}

/**
 * The active view's tokens once `firstKeptEntryId` starts it after the new summary (empty: no
 * message of this view kept); undefined when the id is not a kept entry of the view (the store
 * refuses that). System messages are never summarized away (docs/pinned-messages.md): the pinned
 * ones stay, and those before the new cut become pinned, so all of them count.
 */
function activeTokensAfter(view: ActiveView, firstKeptEntryId: string, summaryTokens: number): number | undefined {
  const kept = view.messages.slice(view.pinnedCount);
  const from = firstKeptEntryId ? kept.findIndex((m) => m.entryId === firstKeptEntryId) : kept.length;
  if (from < 0) return undefined;
  let after = summaryTokens;
  for (const m of view.messages.slice(0, view.pinnedCount)) after += m.tokenCount;
  kept.forEach((m, i) => {
    if (i >= from || isSystemMessage(m.message)) after += m.tokenCount;
  });
  return after;
}
