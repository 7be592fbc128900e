/**
 * The summary DAG's two growth steps.
 *
 * - `addLeaf`: the oldest raw messages (a chunk, see chunking.ts) become one leaf summary (depth 0).
 * - `condense`: whenever `fanout` consecutive roots share a depth d, they become children of one
 *   new summary of depth d+1. Roots then behave like the digits of a base-`fanout` counter: at
 *   most fanout−1 roots per depth, so the number of summaries the model sees grows with the
 *   logarithm of the history's length, not with the length.
 *
 * Nothing is removed: the children stay stored, pointing at their parent.
 */
import type { Tokenizer } from "../../src/tokens/index.js";
import { isSystem } from "./pinned.js";
import { summaryMessage } from "./render.js";
import type { LosslessStore } from "./store.js";
import type { SummarizeCall, SummaryWriter } from "./summarizer.js";
import { sumTokens, type MessageMeta, type SummaryDraft, type SummaryRecord } from "./types.js";

/** Condensation passes per call at most (each pass removes fanout−1 roots, so this is never reached in practice). */
const MAX_CONDENSE_PASSES = 1000;

export interface DagDeps {
  store: LosslessStore;
  writer: SummaryWriter;
  tokenizer: Tokenizer;
  fanout: number;
}

export class SummaryDag {
  constructor(private readonly deps: DagDeps) {}

  /** Tokens of a summary as the model sees it (header included). */
  countTokens = (summary: SummaryRecord): number => this.deps.tokenizer.countMessage(summaryMessage(summary));

  /** Summarizes `chunk` — the oldest raw messages, oldest first — into a leaf. */
  async addLeaf(sessionId: string, chunk: readonly MessageMeta[], call: SummarizeCall): Promise<SummaryRecord> {
    const { store, writer } = this.deps;
    if (chunk.length === 0) throw new Error("lossless: an empty chunk cannot be summarized");
    const first = chunk[0];
    const last = chunk[chunk.length - 1];
    // System messages keep their place in the span but are never summarized (pinned.ts).
    const messages = store.messageBodies(sessionId, first.ord, last.ord).filter((m) => !isSystem(m));
    const folded = chunk.filter((m) => !isSystem(m));
    if (messages.length === 0) throw new Error("lossless: a chunk of only system messages cannot be summarized");
    const written = await writer.leaf(messages, call);
    call.signal.throwIfAborted();
    const draft: SummaryDraft = {
      sessionId,
      depth: 0,
      firstOrd: first.ord,
      lastOrd: last.ord,
      firstEntryId: first.entryId,
      lastEntryId: last.entryId,
      messageCount: folded.length,
      sourceTokens: sumTokens(folded),
      childIds: [],
      text: written.text,
      summarizer: written.summarizer,
    };
    return store.insertSummary(draft, this.countTokens);
  }

  /** Condenses runs of `fanout` same-depth roots, lowest depth first, until none is left. */
  async condense(sessionId: string, call: SummarizeCall): Promise<SummaryRecord[]> {
    const { store, writer, fanout } = this.deps;
    const created: SummaryRecord[] = [];
    for (let pass = 0; pass < MAX_CONDENSE_PASSES; pass++) {
      call.signal.throwIfAborted();
      const run = condensableRun(store.roots(sessionId), fanout);
      if (!run) break;
      const written = await writer.condense(
        run.map((s) => s.text),
        call,
      );
      call.signal.throwIfAborted();
      const draft: SummaryDraft = {
        sessionId,
        depth: run[0].depth + 1,
        firstOrd: run[0].firstOrd,
        lastOrd: run[run.length - 1].lastOrd,
        firstEntryId: run[0].firstEntryId,
        lastEntryId: run[run.length - 1].lastEntryId,
        messageCount: run.reduce((n, s) => n + s.messageCount, 0),
        sourceTokens: run.reduce((n, s) => n + s.sourceTokens, 0),
        childIds: run.map((s) => s.id),
        text: written.text,
        summarizer: written.summarizer,
      };
      created.push(store.insertSummary(draft, this.countTokens));
    }
    return created;
  }
}

/**
 * The oldest run of `fanout` consecutive roots (oldest first) of the lowest depth that has one;
 * undefined when no depth has `fanout` consecutive roots.
 */
export function condensableRun<T extends { depth: number }>(roots: readonly T[], fanout: number): T[] | undefined {
  let best: T[] | undefined;
  for (let start = 0; start < roots.length;) {
    // roots[start..end) share a depth.
    let end = start + 1;
    while (end < roots.length && roots[end].depth === roots[start].depth) end++;
    if (end - start >= fanout && (!best || roots[start].depth < best[0].depth)) best = roots.slice(start, start + fanout);
    start = end;
  }
  return best;
}
