/**
 * A steady Append/Assemble load as an agent runtime would send it, with the retry policy a runtime
 * may safely use against several replicas:
 *
 * - a call that failed with UNAVAILABLE — or whose stream the proxy reset without a status (INTERNAL
 *   "RST_STREAM … Call ended without gRPC status": the replica died while the call was in flight, so
 *   it may or may not have been processed) — is sent again ONLY when that cannot do harm: an append
 *   that carries an idempotency key (a repeat writes nothing and answers the first ids), or a read
 *   (Assemble, GetTranscript, GetSession). Everything else fails at once;
 * - retries back off (50 ms doubling to 500 ms) within `retryWindowMs`;
 * - every call that finally failed is counted (`stats.failures`), with its status and message.
 *
 *   const stats = new RuntimeStats();
 *   const writers = ["w1", "w2"].map((w) => new SessionWriter({ client: cx, sessionId: `s-${w}`, writer: w, stats }));
 *   const load = runLoad(writers, stop.signal);
 *   ...
 *   stop.abort(); await load;
 *   for (const w of writers) expectExactlyOnce(await readMessages(cx, w.sessionId), w.acked);
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { expect } from "vitest";
import { Role, type TranscriptEntry } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText, textMessage } from "../../src/contract/messages.js";
import type { ContextdClient } from "../../src/sdk/runtime-client.js";

export interface Failure {
  method: string;
  code: number | undefined;
  details: string;
  attempts: number;
}

export class RuntimeStats {
  /** Calls made (a retried call counts once). */
  calls = 0;
  /** Attempts after the first. */
  retries = 0;
  /** Calls that finally failed. */
  failures: Failure[] = [];
  /** The message of each UNAVAILABLE answer seen (retried or not), at most 200 kept. */
  unavailable: string[] = [];
  unavailableCount = 0;
  byMethod: Record<string, { calls: number; retries: number }> = {};

  summary(): Record<string, unknown> {
    return {
      calls: this.calls,
      retries: this.retries,
      failed: this.failures.length,
      unavailable_answers: this.unavailableCount,
      by_method: this.byMethod,
      first_failures: this.failures.slice(0, 5),
      unavailable_samples: [...new Set(this.unavailable)].slice(0, 5),
    };
  }
}

const isServiceError = (e: unknown): e is ServiceError => typeof e === "object" && e !== null && "code" in e && "details" in e;

/**
 * Runs `fn`, retrying UNAVAILABLE answers when `retryable`, until it succeeds or `retryWindowMs`
 * has passed since the first attempt. Counts into `stats`; rethrows the last error.
 */
export async function withRetries<T>(stats: RuntimeStats, method: string, retryable: boolean, fn: () => Promise<T>, retryWindowMs = 60_000): Promise<T> {
  stats.calls++;
  const m = (stats.byMethod[method] ??= { calls: 0, retries: 0 });
  m.calls++;
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const code = isServiceError(err) ? err.code : undefined;
      const details = isServiceError(err) ? err.details : String(err);
      if (code === status.UNAVAILABLE) {
        stats.unavailableCount++;
        if (stats.unavailable.length < 200) stats.unavailable.push(details);
      }
      const backoff = Math.min(500, 50 * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
      const lostInFlight = code === status.INTERNAL && /RST_STREAM|without gRPC status/.test(details);
      if (retryable && (code === status.UNAVAILABLE || lostInFlight) && Date.now() - started + backoff < retryWindowMs) {
        stats.retries++;
        m.retries++;
        await new Promise((r) => setTimeout(r, backoff));
        continue;
      }
      stats.failures.push({ method, code, details, attempts: attempt });
      throw err;
    }
  }
}

export interface AckedAppend {
  key: string;
  texts: string[];
  entryIds: string[];
  replayed: boolean;
}

export interface SessionWriterOptions {
  client: ContextdClient;
  sessionId: string;
  /** Prefix of every text this writer appends (`<writer>-<n>.<i>`). */
  writer: string;
  stats: RuntimeStats;
  /** Assemble after each append with this budget (default 200 000: no compaction); 0: no Assemble. */
  tokenBudget?: number;
  /** Deadline of each attempt (default 15 s). */
  callTimeoutMs?: number;
  retryWindowMs?: number;
}

/**
 * One runtime writing one session: each step appends 1–2 messages under a fresh idempotency key
 * (retried on UNAVAILABLE with the same key) and then assembles (a read, retried too). `acked` is
 * every append that was answered, in order.
 */
export class SessionWriter {
  readonly acked: AckedAppend[] = [];
  assembles = 0;
  private n = 0;

  constructor(private readonly o: SessionWriterOptions) {}

  get sessionId(): string {
    return this.o.sessionId;
  }

  /** The prefix of this writer's texts. */
  get writer(): string {
    return this.o.writer;
  }

  async step(): Promise<void> {
    const n = this.n++;
    const texts = Array.from({ length: 1 + (n % 2) }, (_, i) => `${this.o.writer}-${n}.${i} ${"lorem ipsum dolor ".repeat(3)}`);
    const key = `${this.o.writer}-${n}`;
    const timeoutMs = this.o.callTimeoutMs ?? 15_000;
    const request = {
      session: { sessionId: this.o.sessionId, agentId: "load" },
      messages: texts.map((t) => textMessage(n % 3 === 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER, t)),
      idempotencyKey: key,
    };
    const res = await withRetries(this.o.stats, "AppendMessages", true, () => this.o.client.appendMessages(request, { timeoutMs }), this.o.retryWindowMs);
    this.acked.push({ key, texts, entryIds: res.entryIds, replayed: res.replayed });
    const budget = this.o.tokenBudget ?? 200_000;
    if (budget > 0) {
      const ctx = await withRetries(
        this.o.stats,
        "Assemble",
        true,
        () => this.o.client.assemble({ session: { sessionId: this.o.sessionId, agentId: "load" }, tokenBudget: budget }, { timeoutMs }),
        this.o.retryWindowMs,
      );
      this.assembles++;
      // The context holds at least what this writer had acknowledged (no compaction at this budget).
      const seen = new Set(ctx.messages.map(messageText));
      for (const t of texts) if (!seen.has(t)) throw new Error(`Assemble after the append of ${key} lacks "${t.slice(0, 20)}"`);
    }
  }
}

/**
 * Runs every writer's steps in a loop until `stop` fires (each writer finishes the step it is in).
 * Rejects with the first error (after all writers stopped). `pauseMs` between steps keeps the load
 * modest on a small machine.
 */
export async function runLoad(writers: SessionWriter[], stop: AbortSignal, pauseMs = 10): Promise<void> {
  const errors: unknown[] = [];
  await Promise.all(
    writers.map(async (w) => {
      while (!stop.aborted && errors.length === 0) {
        try {
          await w.step();
        } catch (err) {
          errors.push(err);
          return;
        }
        if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
      }
    }),
  );
  if (errors.length > 0) throw errors[0];
}

/** Resolves once `predicate` holds, checked after each step of any writer (polls every 20 ms). */
export async function waitUntil(predicate: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Every entry of a session (GetTranscript, all pages). */
export async function readEntries(client: ContextdClient, sessionId: string): Promise<TranscriptEntry[]> {
  const out: TranscriptEntry[] = [];
  for await (const e of client.transcript(sessionId)) out.push(e);
  return out;
}

/** The message entries' texts, in transcript order. */
export function messageTexts(entries: TranscriptEntry[]): string[] {
  return entries.flatMap((e) => (e.entry?.$case === "message" ? [messageText(e.entry.value)] : []));
}

/**
 * The transcript holds exactly the acknowledged appends, each once, in the order they were
 * acknowledged, under the entry ids the acknowledgements named; and nothing else from this writer.
 * (`unacked` lists keys whose outcome is unknown; the test must have retried them to an answer.)
 */
export function expectExactlyOnce(entries: TranscriptEntry[], acked: AckedAppend[], writer?: string): void {
  const messages = entries.filter((e) => e.entry?.$case === "message");
  const mine = writer ? messages.filter((e) => messageTextOf(e).startsWith(`${writer}-`)) : messages;
  const texts = mine.map(messageTextOf);
  const expected = acked.flatMap((a) => a.texts);
  const dupes = texts.filter((t, i) => texts.indexOf(t) !== i);
  expect(dupes, "no message is in the transcript twice").toEqual([]);
  const lost = expected.filter((t) => !texts.includes(t));
  expect(lost, "every acknowledged message is in the transcript").toEqual([]);
  expect(texts, "the transcript holds exactly the acknowledged appends, in order").toEqual(expected);
  expect(
    mine.map((e) => e.id),
    "under the entry ids the acknowledgements named",
  ).toEqual(acked.flatMap((a) => a.entryIds));
}

function messageTextOf(e: TranscriptEntry): string {
  return e.entry?.$case === "message" ? messageText(e.entry.value) : "";
}
