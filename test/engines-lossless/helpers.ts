/**
 * In-process helpers for the lossless engine's unit tests: an engine over an in-memory store, a
 * call context, a fake HostClient serving a transcript, and messages with entry ids and real
 * o200k_base token counts (as the host would store them).
 */
import { status } from "@grpc/grpc-js";
import pino from "pino";
import { HostCallError, type EngineCallContext, type HostClient } from "../../src/sdk/engine-sdk.js";
import { CompleteResponse, type DeepPartial } from "../../src/contract/gen/contextd/v1/host.js";
import { Metadata } from "@grpc/grpc-js";
import { TranscriptEntry, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { createTokenizer } from "../../src/tokens/create-tokenizer.js";
import { LosslessEngine } from "../../engines/lossless/engine.js";
import type { LosslessOptions } from "../../engines/lossless/config.js";
import { LosslessStore } from "../../engines/lossless/store.js";

export const tokenizer = createTokenizer("o200k_base");

/** Gives every message an entry id (`e0001`, …) and the host's token count. */
export function stored(messages: Message[], prefix = "e", from = 1): Message[] {
  return messages.map((m, i) => ({ ...m, id: `${prefix}${String(from + i).padStart(4, "0")}`, tokenCount: tokenizer.countMessage(m) }));
}

export function newEngine(options: Partial<LosslessOptions> = {}, store = LosslessStore.open(":memory:")): LosslessEngine {
  return new LosslessEngine(store, { dbPath: ":memory:", ...options });
}

export interface FakeHost extends HostClient {
  transcript: Message[];
  reads: number;
  completes: number;
}

/**
 * A HostClient whose ReadTranscript serves `transcript` (plus an optional compaction entry id) and
 * whose Complete answers FAILED_PRECONDITION (no summarizer model) unless `complete` is given.
 */
export function fakeHost(transcript: Message[], opts: { compactionId?: string; complete?: (req: unknown) => string } = {}): FakeHost {
  const host: FakeHost = {
    endpoint: "fake-host",
    expiresAtMs: 0,
    transcript,
    reads: 0,
    completes: 0,
    async readTranscript() {
      throw new Error("use readWholeTranscript");
    },
    async readWholeTranscript(): Promise<TranscriptEntry[]> {
      host.reads++;
      const entries: TranscriptEntry[] = host.transcript.map((m, i) =>
        TranscriptEntry.fromPartial({ id: m.id, seq: i + 1, entry: { $case: "message", value: m } }),
      );
      if (opts.compactionId) {
        entries.push(
          TranscriptEntry.fromPartial({
            id: opts.compactionId,
            seq: entries.length + 1,
            entry: { $case: "compaction", value: { summary: "x", engineId: "legacy" } },
          }),
        );
      }
      return entries;
    },
    async searchTranscript() {
      throw new Error("not used");
    },
    async rewriteTranscriptEntries() {
      throw new Error("not used");
    },
    async delegateCompaction() {
      throw new Error("not used");
    },
    async complete(req: DeepPartial<unknown>) {
      host.completes++;
      if (!opts.complete) throw new HostCallError(status.FAILED_PRECONDITION, "Complete", "no summarizer model configured");
      return CompleteResponse.fromPartial({ text: opts.complete(req) });
    },
  };
  return host;
}

export function ctx(opts: { host?: HostClient; signal?: AbortSignal; deadlineMs?: number } = {}): EngineCallContext {
  return {
    signal: opts.signal ?? new AbortController().signal,
    deadlineMs: opts.deadlineMs ?? Number.POSITIVE_INFINITY,
    host: opts.host,
    log: pino({ level: "silent" }),
    method: "test",
    metadata: new Metadata(),
  };
}

export const session = (sessionId = "s1") => ({ sessionId, sessionKey: "", agentId: "" });
