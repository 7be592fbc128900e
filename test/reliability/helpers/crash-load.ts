/**
 * The load of the crash-safety test (issue 11): runtimes that append under idempotency keys and
 * retry every failed call with the same key until it is answered (test/helpers/runtime-load.ts
 * SessionWriter), plus one compactor per session that keeps a compaction in flight nearly all the
 * time (SessionService.Compact with force, alternating with an Assemble whose small budget makes
 * the host compact first), so that a SIGKILL of contextd lands in the middle of both.
 *
 * `verifySession` checks what must hold after the last restart: every entry decodes and the seqs
 * are gapless; every acknowledged message is there exactly once, in each writer's order, under the
 * acknowledged ids, each batch whole and contiguous; every compaction entry is whole (summary,
 * a first-kept pointer to an earlier message of the active view) and every acknowledged one is
 * there; the session row's counters agree with the entries; Assemble answers exactly the active view.
 */
import { expect } from "vitest";
import type { CompactionResult, TranscriptEntry } from "../../../src/contract/gen/contextd/v1/types.js";
import { Mode } from "../../../src/contract/gen/contextd/v1/types.js";
import { summaryOf } from "../../../src/contract/messages.js";
import type { ContextdClient } from "../../../src/sdk/runtime-client.js";
import { expectExactlyOnce, readEntries, RuntimeStats, SessionWriter, withRetries } from "../../helpers/runtime-load.js";

/** Long enough to span every restart of the loop: a call is retried until it is answered. */
const RETRY_WINDOW_MS = 45_000;
const CALL_TIMEOUT_MS = 10_000;

export interface CrashLoadOptions {
  /** One client per writer / compactor: separate channels, as separate runtimes would have. */
  client: () => ContextdClient;
  /** Session ids: `${prefix}-own-0`, `${prefix}-own-1`, `${prefix}-shared`. */
  prefix: string;
  /** Compact's token_budget (force: true) and the Assemble budget that makes the host compact first. */
  compactBudget: number;
  assembleBudget: number;
}

/** One session's compactor: keeps calling, counts acknowledged compactions and whether it is in flight. */
export class Compactor {
  inFlight = false;
  readonly acked: CompactionResult[] = [];
  private n = 0;

  constructor(
    private readonly client: ContextdClient,
    readonly sessionId: string,
    private readonly stats: RuntimeStats,
    private readonly o: CrashLoadOptions,
  ) {}

  async step(): Promise<void> {
    const session = { sessionId: this.sessionId, agentId: "load" };
    const opts = { timeoutMs: CALL_TIMEOUT_MS };
    this.inFlight = true;
    try {
      if (this.n++ % 2 === 0) {
        const res = await withRetries(
          this.stats,
          "Compact",
          true,
          () => this.client.compact({ session, tokenBudget: this.o.compactBudget, force: true }, opts),
          RETRY_WINDOW_MS,
        );
        expect(res.ok, `Compact answered not ok: ${res.reason}`).toBe(true);
        if (res.compacted && res.result) this.acked.push(res.result);
      } else {
        const res = await withRetries(
          this.stats,
          "Assemble",
          true,
          () => this.client.assemble({ session, tokenBudget: this.o.assembleBudget }, opts),
          RETRY_WINDOW_MS,
        );
        if (res.compaction) this.acked.push(res.compaction);
      }
    } finally {
      this.inFlight = false;
    }
  }
}

export class CrashLoad {
  readonly stats = new RuntimeStats();
  readonly writers: SessionWriter[];
  readonly compactors: Compactor[];
  private readonly clients: ContextdClient[] = [];
  private readonly stop = new AbortController();
  private readonly errors: unknown[] = [];
  private running: Promise<void> | undefined;
  /** Rejects with the first error of any loop (never resolves otherwise), for racing waits against. */
  private failed: Promise<never>;
  private fail!: (err: unknown) => void;

  constructor(o: CrashLoadOptions) {
    const client = () => {
      const c = o.client();
      this.clients.push(c);
      return c;
    };
    const own = [0, 1].map((i) => `${o.prefix}-own-${i}`);
    const shared = `${o.prefix}-shared`;
    const writer = (sessionId: string, name: string) =>
      new SessionWriter({
        client: client(),
        sessionId,
        writer: name,
        stats: this.stats,
        tokenBudget: 0,
        callTimeoutMs: CALL_TIMEOUT_MS,
        retryWindowMs: RETRY_WINDOW_MS,
      });
    // Two runtimes on sessions of their own, two interleaving on one shared session.
    this.writers = [writer(own[0]!, "a"), writer(own[1]!, "b"), writer(shared, "c"), writer(shared, "d")];
    this.compactors = [...own, shared].map((s) => new Compactor(client(), s, this.stats, o));
    this.failed = new Promise<never>((_, reject) => (this.fail = reject));
    this.failed.catch(() => undefined);
  }

  get sessionIds(): string[] {
    return this.compactors.map((c) => c.sessionId);
  }

  acked(): number {
    return this.writers.reduce((n, w) => n + w.acked.length, 0);
  }

  compactionsInFlight(): number {
    return this.compactors.filter((c) => c.inFlight).length;
  }

  compactionsAcked(): number {
    return this.compactors.reduce((n, c) => n + c.acked.length, 0);
  }

  /** Starts every loop; a compactor starts once its session exists (its first append was answered). */
  start(): void {
    const loop = async (step: () => Promise<void>, ready: () => boolean, pauseMs: number) => {
      while (!this.stop.signal.aborted && this.errors.length === 0) {
        if (ready()) {
          try {
            await step();
          } catch (err) {
            this.errors.push(err);
            this.fail(err);
            return;
          }
        }
        await new Promise((r) => setTimeout(r, pauseMs));
      }
    };
    const sessionExists = (id: string) => () => this.writers.some((w) => w.sessionId === id && w.acked.length > 0);
    this.running = Promise.all([
      ...this.writers.map((w) =>
        loop(
          () => w.step(),
          () => true,
          5,
        ),
      ),
      ...this.compactors.map((c) => loop(() => c.step(), sessionExists(c.sessionId), 1)),
    ]).then(() => undefined);
  }

  /** Resolves once `predicate` holds (checked every 10 ms); rejects at once when a loop failed. */
  async until(predicate: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const poll = async () => {
      while (!predicate()) {
        if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}; ${JSON.stringify(this.stats.summary())}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    await Promise.race([poll(), this.failed]);
  }

  /** Stops the loops: each finishes (and so gets an answer for) the call it is in. */
  async finish(): Promise<void> {
    this.stop.abort();
    await this.running;
    if (this.errors.length > 0) throw this.errors[0];
  }

  close(): void {
    for (const c of this.clients) c.close();
  }
}

const caseOf = (e: TranscriptEntry) => e.entry?.$case;

/** Every invariant of one session after the crashes (see the module comment). */
export async function verifySession(
  reader: ContextdClient,
  load: CrashLoad,
  sessionId: string,
): Promise<{ entries: number; compactions: number; pointers: number }> {
  const entries = await readEntries(reader, sessionId);
  const where = `session ${sessionId}`;

  // No half-written entry: each one decodes to a known kind, and the seqs have no gap or repeat.
  for (const e of entries) expect(["message", "compaction"], `${where}: entry ${e.id} (seq ${e.seq}) decodes`).toContain(caseOf(e));
  expect(
    entries.map((e) => e.seq),
    `${where}: seqs are 1..n`,
  ).toEqual(entries.map((_, i) => i + 1));
  expect(new Set(entries.map((e) => e.id)).size, `${where}: entry ids are unique`).toBe(entries.length);

  // Exactly once, in each writer's order, under the acknowledged ids; nobody else's messages.
  const writers = load.writers.filter((w) => w.sessionId === sessionId);
  const shared = writers.length > 1;
  for (const w of writers) expectExactlyOnce(entries, w.acked, shared ? w.writer : undefined);
  const messages = entries.filter((e) => caseOf(e) === "message");
  expect(messages.length, `${where}: only acknowledged messages`).toBe(writers.reduce((n, w) => n + w.acked.reduce((m, a) => m + a.texts.length, 0), 0));

  // Whole batches: an append's entries are adjacent (one transaction), nothing between them.
  const seqOf = new Map(entries.map((e) => [e.id, e.seq]));
  for (const w of writers) {
    for (const a of w.acked) {
      const seqs = a.entryIds.map((id) => seqOf.get(id)!);
      expect(seqs, `${where}: batch ${a.key} is contiguous`).toEqual(seqs.map((_, i) => seqs[0]! + i));
    }
  }

  // Whole compactions: a summary and a first-kept pointer to an earlier message, never behind the
  // previous compaction's (the active view only moves forward). An empty pointer is native
  // compaction's "kept nothing" (native-compaction.ts: the tail did not fit the budget); the store
  // then keeps what follows the compacted view, which the entry does not record.
  const compactions = entries.filter((e) => caseOf(e) === "compaction");
  let keptFrom = 0;
  let pointers = 0;
  for (const e of compactions) {
    const c = e.entry?.$case === "compaction" ? e.entry.value : undefined;
    expect(c?.summary, `${where}: compaction ${e.id} has a summary`).toBeTruthy();
    expect(c?.engineId, `${where}: compaction ${e.id} names its engine`).toBe("legacy");
    expect(c!.tokensBefore, `${where}: compaction ${e.id} has tokens_before`).toBeGreaterThan(0);
    if (c!.firstKeptEntryId === "") continue;
    pointers++;
    const kept = entries.find((x) => x.id === c!.firstKeptEntryId);
    expect(kept && caseOf(kept), `${where}: compaction ${e.id} keeps from a message of the session (${c!.firstKeptEntryId})`).toBe("message");
    expect(kept!.seq, `${where}: compaction ${e.id} keeps from an earlier entry`).toBeLessThan(e.seq);
    expect(kept!.seq, `${where}: compaction ${e.id} does not move the view back`).toBeGreaterThanOrEqual(keptFrom);
    keptFrom = kept!.seq;
  }
  // Every acknowledged compaction was committed (and an unacknowledged one, in flight at a kill,
  // is either one of the whole entries above or absent).
  const committed = new Set(compactions.map((e) => (e.entry?.$case === "compaction" ? `${e.entry.value.firstKeptEntryId}|${e.entry.value.summary}` : "")));
  for (const r of load.compactors.find((c) => c.sessionId === sessionId)!.acked) {
    expect(
      committed.has(`${r.firstKeptEntryId}|${r.summary}`),
      `${where}: the acknowledged compaction keeping from ${r.firstKeptEntryId} is in the transcript`,
    ).toBe(true);
  }

  // The session row agrees with its entries (it is written in the same transactions).
  const info = (await reader.getSession({ session: { sessionId } })).info!;
  const messageTokens = messages.reduce((n, e) => n + (e.entry?.$case === "message" ? e.entry.value.tokenCount : 0), 0);
  expect(
    { entries: info.entryCount, messages: info.messageCount, compactions: info.compactionCount, totalTokens: Number(info.totalTokens) },
    `${where}: session counters`,
  ).toEqual({
    entries: entries.length,
    messages: messages.length,
    compactions: compactions.length,
    totalTokens: messageTokens,
  });

  // Assemble works and answers the active view: the latest summary, then every message from its first kept entry on.
  const ctx = await reader.assemble({ session: { sessionId }, tokenBudget: 1_000_000, autoCompact: false });
  expect({ engineId: ctx.engineId, mode: ctx.mode }).toEqual({ engineId: "legacy", mode: Mode.MODE_NORMAL });
  const latest = compactions.at(-1);
  const pointer = latest?.entry?.$case === "compaction" ? latest.entry.value.firstKeptEntryId : "";
  const ids = ctx.messages.map((m) => m.id);
  if (latest) {
    expect(ids[0], `${where}: Assemble starts with the latest summary`).toBe(latest.id);
    expect(summaryOf(ctx.messages[0]!)).toBe(latest.entry?.$case === "compaction" ? latest.entry.value.summary : "");
  }
  const tail = latest ? ids.slice(1) : ids;
  if (!latest || pointer) {
    const from = pointer ? seqOf.get(pointer)! : 0;
    expect(tail, `${where}: Assemble answers the active view`).toEqual(messages.filter((m) => m.seq >= from).map((m) => m.id));
  } else {
    // Kept nothing: the view goes on with the newest messages, none before the previous pointer.
    expect(tail, `${where}: Assemble answers the newest messages`).toEqual(messages.slice(messages.length - tail.length).map((m) => m.id));
    if (tail.length > 0) expect(seqOf.get(tail[0]!)!).toBeGreaterThanOrEqual(keptFrom);
  }
  expect(ctx.estimatedTokens, `${where}: Assemble's tokens are the session's active tokens`).toBe(info.activeTokens);
  return { entries: entries.length, compactions: compactions.length, pointers };
}
