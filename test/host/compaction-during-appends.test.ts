/**
 * Appends racing compactions at the SessionHost, where the race is real: an append awaits its token
 * count, then the store's write (SQLite: the group commit, one transaction per turn of the event
 * loop; PostgreSQL: a transaction on the pool), then the engine's Ingest; a Compact reads the view,
 * waits for the engine's answer, then commits. Several runtimes' appends are in flight at once, and
 * while a compaction is out at the engine (held until the test answers it: held-compaction-host.ts)
 * appends are acknowledged before and after its commit.
 *
 * What must hold: nothing a runtime appended is lost, hidden from the active view or altered; a
 * compaction covers exactly what it was sent (later appends stay active after its summary), and one
 * answered over a view another compaction has since replaced is discarded; limits.max_session_entries
 * is not overshot by appends in flight together.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ResourceExhaustedError } from "../../src/contract/errors.js";
import { AppendMessagesRequest, AssembleRequest, CompactRequest } from "../../src/contract/gen/contextd/v1/session.js";
import { CompactionTarget, Role, type CompactionEntry, type SessionRef, type TranscriptEntry } from "../../src/contract/gen/contextd/v1/types.js";
import { isSummaryMessage, messageText, summaryOf, textMessage } from "../../src/contract/messages.js";
import type { SessionHost } from "../../src/host/session-host.js";
import { ENGINE_ID, heldCompactionHost, resolved, runtimeCall, type HostFixtureOptions, type StoreKind } from "./held-compaction-host.js";

const SESSION: SessionRef = { sessionId: "s1", sessionKey: "agent:main:s1", agentId: "main" };
const WORDS = "the build fails in src/app.ts because parseConfig throws ENOENT for config.yaml";

type Fixture = Awaited<ReturnType<typeof heldCompactionHost>>;
const fixtures: Fixture[] = [];
afterEach(async () => {
  for (const f of fixtures.splice(0)) await f.close();
});

/** One acknowledged append: who sent it, what, and the entry ids the host answered. */
interface Acked {
  writer: number;
  texts: string[];
  entryIds: string[];
}

async function append(host: SessionHost, texts: string[], options: { writer?: number; key?: string; session?: SessionRef } = {}): Promise<Acked> {
  const messages = texts.map((t, i) => textMessage(i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER, t));
  const req = AppendMessagesRequest.fromPartial({ session: options.session ?? SESSION, messages, idempotencyKey: options.key ?? "" });
  const res = await host.appendMessages(req, runtimeCall(), await resolved(host, req.session!, "create"));
  expect(res.entryIds).toHaveLength(texts.length);
  return { writer: options.writer ?? -1, texts, entryIds: res.entryIds };
}

/**
 * A runtime's next request arrives in a later turn of the event loop (it comes off a socket). In
 * process, an append with an idempotency key completes in microtasks alone (its store transaction is
 * synchronous), so a writer looping on them would otherwise never let the others' group commits run.
 */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

const texts = (label: string, n: number, words = WORDS) => Array.from({ length: n }, (_, k) => `${label} m${k}: ${words}`);

/** Lets the test wait for the writers' progress (each acknowledged append calls `notify`), never for time. */
function progress() {
  let wake = () => {};
  return {
    notify: () => wake(),
    async until(done: () => boolean): Promise<void> {
      while (!done()) await new Promise<void>((resolve) => (wake = resolve));
    },
  };
}

/** Every acknowledged append is in the transcript once, contiguous, as it was sent; each writer's in its order. */
function expectAllStored(entries: TranscriptEntry[], acked: Acked[]): void {
  const byId = new Map(entries.map((e) => [e.id, e]));
  const messageIds = entries.filter((e) => e.entry?.$case === "message").map((e) => e.id);
  expect([...messageIds].sort()).toEqual(acked.flatMap((a) => a.entryIds).sort());
  for (const a of acked) {
    const stored = a.entryIds.map((id) => byId.get(id)!);
    expect(stored.map((e) => e.seq)).toEqual(stored.map((_, k) => stored[0].seq + k));
    expect(stored.map((e) => (e.entry?.$case === "message" ? messageText(e.entry.value) : "not a message"))).toEqual(a.texts);
  }
  for (const w of new Set(acked.map((a) => a.writer))) {
    const firsts = acked.filter((a) => a.writer === w).map((a) => byId.get(a.entryIds[0])!.seq);
    expect(firsts).toEqual([...firsts].sort((x, y) => x - y));
  }
}

const compactRequest = (tokenBudget: number) =>
  CompactRequest.fromPartial({ session: SESSION, tokenBudget, force: true, compactionTarget: CompactionTarget.COMPACTION_TARGET_BUDGET });

// Each race on both stores: a SQLite file (one connection, appends grouped per turn of the event
// loop) and a PostgreSQL database (a pool: the appends' transactions run at once, under row locks).
describe.each<StoreKind>(["sqlite", "postgres"])("SessionHost on a %s store", (kind) => {
  async function fixture(options: HostFixtureOptions): Promise<Fixture> {
    const f = await heldCompactionHost(kind, options);
    fixtures.push(f);
    return f;
  }

  it.each([
    { answer: "summarizes everything it was sent (first_kept_entry_id empty)", keep: 0 },
    { answer: "keeps the last two messages it was sent", keep: 2 },
  ])("the engine $answer: no append is lost, hidden or altered, and the compaction covers only what it saw", async ({ keep }) => {
    const f = await fixture({ ownsCompaction: true });
    const seeded = await append(f.host, texts("seed", 8));

    let compactReturned = false;
    const compacting = f.host.compact(compactRequest(100_000), runtimeCall(), await resolved(f.host, SESSION, "view")).finally(() => (compactReturned = true));
    const held = await f.engine.nextCompact();
    expect(held.messages.map((m) => m.id)).toEqual(seeded.entryIds);

    // Four runtimes append, one turn after another, until each has had an append begin after the
    // Compact returned: appends land between the engine's read of the view and the commit, and after it.
    const WRITERS = [0, 1, 2, 3];
    const acked: Acked[] = [];
    const failures: unknown[] = [];
    const events = progress();
    const writers = WRITERS.map(async (w) => {
      try {
        for (let i = 0; i < 100; i++) {
          const afterCommit = compactReturned;
          acked.push(await append(f.host, texts(`writer ${w} append ${i}`, 1 + ((w + i) % 3)), { writer: w, key: w % 2 ? `w${w}-${i}` : "" }));
          events.notify();
          if (afterCommit) return;
          await nextTurn();
        }
        throw new Error(`writer ${w}: the Compact never returned`);
      } catch (err) {
        failures.push(err);
        events.notify();
      }
    });
    await events.until(() => failures.length > 0 || WRITERS.every((w) => acked.filter((a) => a.writer === w).length >= 2));
    expect(failures).toEqual([]);

    const kept = held.messages.slice(held.messages.length - keep);
    const summary = `summary of ${held.messages
      .slice(0, held.messages.length - keep)
      .map((m) => m.id)
      .join(", ")}`;
    const firstKeptEntryId = kept[0]?.id ?? "";
    held.answer({
      ok: true,
      compacted: true,
      reason: "answered by the test",
      result: { summary, firstKeptEntryId, tokensBefore: 0, tokensAfter: 0, details: {} },
    });
    const outcome = await compacting;
    await Promise.all(writers);
    expect(failures).toEqual([]);
    expect(outcome).toMatchObject({ ok: true, compacted: true, engineId: ENGINE_ID });

    const entries = await f.store.readEntries(SESSION.sessionId, 0, 1_000);
    const compactions = entries.filter((e) => e.entry?.$case === "compaction");
    expect(compactions).toHaveLength(1);
    const entry = compactions[0];
    expect(entry.entry?.value as CompactionEntry).toMatchObject({ summary, firstKeptEntryId, engineId: ENGINE_ID });
    // The race was real: appends were acknowledged while the compaction was out, and after its commit.
    const raced = acked.flatMap((a) => a.entryIds);
    const seq = new Map(entries.map((e) => [e.id, e.seq]));
    expect(raced.filter((id) => seq.get(id)! < entry.seq).length).toBeGreaterThanOrEqual(2 * WRITERS.length);
    expect(raced.filter((id) => seq.get(id)! > entry.seq).length).toBeGreaterThanOrEqual(WRITERS.length);
    expectAllStored(entries, [seeded, ...acked]);

    // The active view: the summary, the messages it kept of those it saw, then every append it did not see.
    const racedInOrder = [...raced].sort((a, b) => seq.get(a)! - seq.get(b)!);
    const view = await f.host.readView(SESSION);
    expect(view.session.latestCompactionId).toBe(entry.id);
    expect(view.messages.map((m) => m.entryId)).toEqual([...kept.map((m) => m.id), ...racedInOrder]);

    // And that is what the runtime's next Assemble is built from.
    const assembled = await f.host.assemble(
      AssembleRequest.fromPartial({ session: SESSION, tokenBudget: 100_000 }),
      runtimeCall(),
      await resolved(f.host, SESSION, "view"),
    );
    expect(assembled.compaction).toBeUndefined();
    expect(isSummaryMessage(assembled.messages[0])).toBe(true);
    expect(summaryOf(assembled.messages[0])).toBe(summary);
    expect(assembled.messages.slice(1).map((m) => m.id)).toEqual([...kept.map((m) => m.id), ...racedInOrder]);
    const sent = new Map([seeded, ...acked].flatMap((a) => a.entryIds.map((id, k) => [id, a.texts[k]] as const)));
    expect(assembled.messages.slice(1).map((m) => messageText(m))).toEqual(assembled.messages.slice(1).map((m) => sent.get(m.id)));
  });

  it("a Compact answered after Assemble's auto-compaction replaced its view is discarded, not committed over a summary it never saw", async () => {
    // The engine does not own compaction, so Assemble compacts natively (legacy's extractive summary).
    const f = await fixture({ ownsCompaction: false });
    const seeded = await append(f.host, texts("seed", 12));
    const compacting = f.host.compact(compactRequest(100_000), runtimeCall(), await resolved(f.host, SESSION, "view"));
    const held = await f.engine.nextCompact();
    expect(held.messages.map((m) => m.id)).toEqual(seeded.entryIds);

    const during = await append(f.host, ["a question asked while the engine compacts", "an answer to it"]);
    const assembled = await f.host.assemble(
      AssembleRequest.fromPartial({ session: SESSION, tokenBudget: 300 }),
      runtimeCall(),
      await resolved(f.host, SESSION, "view"),
    );
    expect(assembled.compaction).toBeDefined();
    expect(assembled.estimatedTokens).toBeLessThanOrEqual(300);
    const nativeView = await f.host.readView(SESSION);
    expect(nativeView.session.compactionCount).toBe(1);

    held.answer({
      ok: true,
      compacted: true,
      reason: "answered by the test",
      result: { summary: "STALE: a summary of the twelve seed messages only", firstKeptEntryId: "", tokensBefore: 0, tokensAfter: 0, details: {} },
    });
    const outcome = await compacting;
    expect(outcome).toMatchObject({ ok: true, compacted: false, engineId: ENGINE_ID });
    expect(outcome.reason).toMatch(/^discarded: another compaction of this session was committed first/);

    // The transcript and the active view are as Assemble's compaction left them: one compaction, its
    // summary heading the view, the messages appended while the engine compacted still at its end.
    const view = await f.host.readView(SESSION);
    expect(view).toEqual(nativeView);
    expect(view.messages.slice(-2).map((m) => m.entryId)).toEqual(during.entryIds);
    const entries = await f.store.readEntries(SESSION.sessionId, 0, 1_000);
    expect(entries.filter((e) => e.entry?.$case === "compaction").map((e) => (e.entry?.value as CompactionEntry).summary)).toEqual([
      assembled.compaction!.summary,
    ]);
    expectAllStored(entries, [seeded, during]);
  });

  it("a burst of appends sent at once through two hosts, with and without idempotency keys, takes exactly as many as fit", async () => {
    // 12 appends of 3 messages against a limit of 20: six fit (18 entries), whichever six come first;
    // a check that read the entry count before the write would let all twelve see an empty session.
    const f = await fixture({ ownsCompaction: true, maxSessionEntries: 20 });
    const replica = await f.replica(); // its own connection (pool) on the same data, as another contextd has
    const hosts = [f.host, replica.host];
    const burst = Array.from({ length: 12 }, (_, i) => append(hosts[i % 2], texts(`burst ${i}`, 3), { writer: i, key: i % 4 < 2 ? "" : `burst-${i}` }));
    const settled = await Promise.allSettled(burst);
    const acked = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    const refused = settled.flatMap((r) => (r.status === "rejected" ? [r.reason as Error] : []));
    expect(acked).toHaveLength(6);
    expect(refused).toHaveLength(6);
    for (const err of refused) {
      expect(err).toBeInstanceOf(ResourceExhaustedError);
      expect(err.message).toContain("would have 21 entries, over limits.max_session_entries (20)");
    }
    expect((await f.store.getSession(SESSION.sessionId))!.entryCount).toBe(18);
    expectAllStored(await f.store.readEntries(SESSION.sessionId, 0, 1_000), acked);
  });

  it("writers appending turn after turn, with and without idempotency keys, fill the session exactly to the limit, never past it", async () => {
    const LIMIT = 40;
    const f = await fixture({ ownsCompaction: true, maxSessionEntries: LIMIT });
    const other: SessionRef = { ...SESSION, sessionId: "s2" };
    const acked: Acked[] = [];
    const refused: Array<{ writer: number; size: number; err: unknown }> = [];
    // Writer w appends batches of w messages until one is refused; odd ones with idempotency keys
    // (on SQLite their own transaction, at once) and even ones without (on SQLite the next group commit).
    const writers = [1, 2, 3, 4, 5].map(async (w) => {
      for (let i = 0; i <= LIMIT; i++) {
        try {
          acked.push(await append(f.host, texts(`writer ${w} append ${i}`, w), { writer: w, key: w % 2 ? `w${w}-${i}` : "" }));
          await nextTurn();
        } catch (err) {
          refused.push({ writer: w, size: w, err });
          return;
        }
      }
    });
    // Another session's appends share the group commits; its own limit is its own.
    const neighbour = (async () => {
      for (let i = 0; i < 10; i++) {
        await append(f.host, texts(`neighbour ${i}`, 3), { session: other });
        await nextTurn();
      }
    })();
    await Promise.all([...writers, neighbour]);

    expect((await f.store.getSession(SESSION.sessionId))!.entryCount).toBe(LIMIT);
    expect(acked.reduce((n, a) => n + a.entryIds.length, 0)).toBe(LIMIT);
    expect(refused.map((r) => r.writer).sort()).toEqual([1, 2, 3, 4, 5]);
    for (const r of refused) {
      expect(r.err).toBeInstanceOf(ResourceExhaustedError);
      const m = /would have (\d+) entries, over limits\.max_session_entries \(40\)/.exec((r.err as Error).message);
      expect(m, (r.err as Error).message).not.toBeNull();
      expect(Number(m![1])).toBeGreaterThan(LIMIT);
      expect(Number(m![1])).toBeLessThanOrEqual(LIMIT + r.size);
    }
    expectAllStored(await f.store.readEntries(SESSION.sessionId, 0, 1_000), acked);
    expect((await f.store.getSession(other.sessionId))!.entryCount).toBe(30);
  });
});
