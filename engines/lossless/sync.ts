/**
 * Keeping the engine's store in step with the host's transcript (bootstrap and catch-up).
 *
 * The host owns the transcript; the engine keeps its own copy because it must be able to rebuild
 * any span verbatim. The copy can fall behind: a session started before the engine was selected,
 * messages appended while the engine was down or quarantined (the host then calls `legacy`), or a
 * crash between the host's append and our Ingest. So the engine reads the host's whole transcript
 * (HostService.ReadTranscript) and merges it in:
 * - the first time this process touches a session (covers "unknown session" = bootstrap, and
 *   anything appended while this process was not running);
 * - when a request's active view shows a message the store lacks, or a host compaction entry it
 *   has not seen (the host compacted without us, e.g. legacy served meanwhile).
 * Without a HostContext (or if the read fails) it falls back to storing the unknown messages of the
 * request's view, in view order. Host compaction summaries are never stored as conversation.
 */
import { isSummaryMessage, type HostClient, type Message } from "contextd/engine-sdk";
import type { Logger } from "pino";
import type { Tokenizer } from "../../src/tokens/index.js";
import { isLosslessSummary } from "./render.js";
import type { LosslessStore } from "./store.js";

export interface SyncCall {
  host?: HostClient;
  signal: AbortSignal;
  log?: Logger;
}

export interface SyncOutcome {
  /** Messages newly stored. */
  imported: number;
  /** Whether the host's transcript was read. */
  readTranscript: boolean;
}

/** Sessions remembered as synced in this process at most (oldest forgotten first). */
const MAX_REMEMBERED = 10_000;

export class TranscriptSync {
  /** Sessions whose transcript this process has merged at least once. */
  private readonly synced = new Set<string>();

  constructor(
    private readonly store: LosslessStore,
    private readonly tokenizer: Tokenizer,
  ) {}

  /** A message of the conversation (not a summary), ready to store: entry id and token count set. */
  conversational(message: Message, entryId = message.id): Message | undefined {
    if (!entryId || isSummaryMessage(message) || isLosslessSummary(message)) return undefined;
    const tokenCount = message.tokenCount > 0 ? message.tokenCount : this.tokenizer.countMessage(message);
    return { ...message, id: entryId, tokenCount };
  }

  /** Reads the host's whole transcript and merges it into the store. Returns how many messages were new. */
  async importTranscript(sessionId: string, host: HostClient): Promise<number> {
    const entries = await host.readWholeTranscript();
    const messages: Message[] = [];
    let hostSummaryId = "";
    for (const e of entries) {
      if (e.entry?.$case === "compaction") hostSummaryId = e.id;
      if (e.entry?.$case !== "message") continue;
      const m = this.conversational(e.entry.value, e.id);
      if (m) messages.push(m);
    }
    const imported = this.store.mergeTranscript(sessionId, messages);
    this.store.setHostSummaryId(sessionId, hostSummaryId);
    this.remember(sessionId);
    return imported;
  }

  /** Brings the store up to date before an engine call works on `sessionId` (see the file comment). */
  async catchUp(sessionId: string, call: SyncCall, view?: readonly Message[]): Promise<SyncOutcome> {
    const store = this.store;
    const conversation = (view ?? []).map((m) => this.conversational(m)).filter((m): m is Message => m !== undefined);
    const viewSummaryId = view?.find(isSummaryMessage)?.id ?? "";
    const needed =
      !this.synced.has(sessionId) ||
      conversation.some((m) => !store.hasMessage(sessionId, m.id)) ||
      (viewSummaryId !== "" && viewSummaryId !== store.hostSummaryId(sessionId));
    const outcome: SyncOutcome = { imported: 0, readTranscript: false };
    if (needed && call.host) {
      try {
        outcome.imported += await this.importTranscript(sessionId, call.host);
        outcome.readTranscript = true;
      } catch (err) {
        if (call.signal.aborted) throw err;
        call.log?.warn({ err, sessionId }, "reading the host's transcript failed; catching up from the request's messages only");
      }
    }
    const missing = conversation.filter((m) => !store.hasMessage(sessionId, m.id));
    if (missing.length > 0) outcome.imported += store.append(sessionId, missing);
    return outcome;
  }

  private remember(sessionId: string): void {
    this.synced.delete(sessionId);
    this.synced.add(sessionId);
    if (this.synced.size > MAX_REMEMBERED) this.synced.delete(this.synced.values().next().value as string);
  }
}
