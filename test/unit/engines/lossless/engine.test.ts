/**
 * The engine in process (in-memory store, fake host): the DAG it builds, compaction to a target
 * (including convergence when the fresh tail alone is over it), assembly within the budget, the
 * Compact result the host commits, and cancellation.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildEngineInfo } from "../../../../src/sdk/engine-sdk.js";
import {
  ContextEngineServiceAssembleRequest,
  ContextEngineServiceAssembleResponse,
  ContextEngineServiceCompactRequest,
  ContextEngineServiceCompactResponse,
} from "../../../../src/contract/gen/contextd/v1/engine.js";
import { CompactionTarget, PromptAuthority, Role, type Message } from "../../../../src/contract/gen/contextd/v1/types.js";
import { summaryMessage as hostSummaryMessage } from "../../../../src/contract/messages.js";
import type { LosslessEngine } from "../../../../engines/lossless/engine.js";
import { codingSession } from "../../../fixtures/coding-session.js";
import { textOf } from "../../../fixtures/messages.js";
import { contextText, toolPairViolations } from "../../../helpers/invariants.js";
import { ctx, fakeHost, newEngine, session, stored } from "../../../engines-lossless/helpers.js";
import { buildHistory, latestUserIndex, turnSpec } from "../../../engines-lossless/histories.js";

const assemble = async (engine: LosslessEngine, budget: number | undefined, c = ctx(), view: Message[] = []) =>
  ContextEngineServiceAssembleResponse.fromPartial(
    await engine.assemble(ContextEngineServiceAssembleRequest.fromPartial({ session: session(), messages: view, tokenBudget: budget }), c),
  );

const compact = async (engine: LosslessEngine, view: Message[], budget: number, more: Partial<ContextEngineServiceCompactRequest> = {}, c = ctx()) =>
  ContextEngineServiceCompactResponse.fromPartial(
    await engine.compact(ContextEngineServiceCompactRequest.fromPartial({ session: session(), messages: view, tokenBudget: budget, ...more }), c),
  );

const ingestAll = (engine: LosslessEngine, messages: Message[], c = ctx()) =>
  engine.ingestBatch({ session: session(), messages, isHeartbeat: false, host: undefined }, c);

/** The DAG invariants: roots partition the summarized prefix, children are consecutive and one level down. */
function checkDag(engine: LosslessEngine, fanout: number) {
  const store = engine.store;
  const all = store.allSummaries("s1");
  const byId = new Map(all.map((s) => [s.id, s]));
  const roots = store.roots("s1");
  let next = 1;
  for (const r of roots) {
    expect(r.firstOrd).toBe(next);
    next = r.lastOrd + 1;
  }
  expect(next - 1).toBe(store.frontier("s1"));
  for (const s of all) {
    if (s.depth === 0) {
      expect(s.childIds).toEqual([]);
      continue;
    }
    expect(s.childIds).toHaveLength(fanout);
    const kids = s.childIds.map((id) => byId.get(id)!);
    expect(kids.every((k) => k.depth === s.depth - 1 && k.parentId === s.id)).toBe(true);
    expect(kids[0].firstOrd).toBe(s.firstOrd);
    expect(kids[kids.length - 1].lastOrd).toBe(s.lastOrd);
    for (let i = 1; i < kids.length; i++) expect(kids[i].firstOrd).toBe(kids[i - 1].lastOrd + 1);
  }
  return { roots, all };
}

describe("lossless engine", () => {
  it("describes itself as an owner of compaction with bootstrap, batch ingest, after-turn and maintenance", () => {
    const info = buildEngineInfo(newEngine());
    expect(info).toMatchObject({ id: "lossless", ownsCompaction: true, protocolVersions: [1] });
    expect(info.capabilities).toMatchObject({ bootstrap: true, ingestBatch: true, afterTurn: true, maintain: true, subagents: false });
  });

  it("ingests idempotently on the entry id and skips host summaries", async () => {
    const engine = newEngine();
    const messages = buildHistory([{ user: 10, exchanges: [{ assistant: 10, results: [10] }], wrapUp: 10 }]);
    expect((await ingestAll(engine, messages)).ingestedCount).toBe(messages.length);
    await ingestAll(engine, messages);
    await engine.ingest({ session: session(), message: messages[0], isHeartbeat: false, host: undefined }, ctx());
    expect(
      await engine.ingest({ session: session(), message: hostSummaryMessage("old summary", "c1", 5), isHeartbeat: false, host: undefined }, ctx()),
    ).toEqual({ ingested: false });
    expect(engine.store.allMessages("s1").map((m) => m.entryId)).toEqual(messages.map((m) => m.id));
  });

  it("serves a long coding session within a 32k budget, with the first turns' facts in its summaries", async () => {
    const cs = codingSession({ turns: 40, seed: 3 });
    const messages = stored(cs.messages);
    const engine = newEngine();
    const starts = cs.turnStarts;
    for (let t = 0; t + 1 < starts.length; t++) {
      const chunk = messages.slice(t === 0 ? 0 : starts[t] + 1, starts[t + 1] + 1);
      await ingestAll(engine, chunk);
      const res = await assemble(engine, 32_000);
      expect(res.estimatedTokens).toBeLessThanOrEqual(32_000);
      expect(res.messages.reduce((n, m) => n + m.tokenCount, 0)).toBe(res.estimatedTokens);
      expect(toolPairViolations(res.messages)).toEqual([]);
      expect(res.messages[res.messages.length - 1]).toEqual(chunk[chunk.length - 1]);
      expect(res.promptAuthority).toBe(PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED);
    }
    const res = await assemble(engine, 32_000);
    const text = contextText(res.messages);
    for (const [fact, value] of Object.entries(cs.planted)) expect(text, fact).toContain(value);
    const { roots } = checkDag(engine, 4);
    expect(roots.length).toBeLessThanOrEqual(9);
    expect(textOf(res.messages[0])).toMatch(
      /^\[lossless summary S\d+ · depth 2 · covers messages e0001…e\d+ \(\d+ messages, \d+ tokens\)\]\n# Conversation summary/,
    );
    // Without a budget everything the DAG holds is returned: roots, then every raw message.
    const all = await assemble(engine, undefined);
    expect(all.messages.length).toBe(roots.length + engine.store.rawMessages("s1").length);
  });

  it("keeps the number of top-level summaries logarithmic in the history's length", async () => {
    const fanout = 3;
    const engine = newEngine({ freshTailTokens: 500, chunkTokens: 1000, fanout });
    const turns = Array.from({ length: 400 }, () => ({ user: 50, exchanges: [{ assistant: 50, results: [800] }], wrapUp: 100 }));
    const messages = buildHistory(turns, 50);
    let maxRoots = 0;
    for (let i = 0; i < messages.length; i += 20) {
      await ingestAll(engine, messages.slice(i, i + 20));
      await assemble(engine, 20_000);
      const stats = engine.store.stats("s1");
      const leaves = engine.store.allSummaries("s1").filter((s) => s.depth === 0).length;
      // A base-`fanout` counter: at most fanout−1 roots per depth.
      expect(stats.roots).toBeLessThanOrEqual((fanout - 1) * (stats.maxDepth + 1));
      if (leaves > 0) expect(stats.maxDepth).toBeLessThanOrEqual(Math.ceil(Math.log(leaves) / Math.log(fanout)));
      maxRoots = Math.max(maxRoots, stats.roots);
    }
    const leaves = engine.store.allSummaries("s1").filter((s) => s.depth === 0).length;
    expect(leaves).toBeGreaterThan(300);
    expect(maxRoots).toBeLessThanOrEqual(12);
    checkDag(engine, fanout);
    // Nothing was deleted: every message is still stored verbatim.
    expect(engine.store.messageCount("s1")).toBe(messages.length);
  });

  it("holds its invariants for any history, any batching and any budget (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(turnSpec(2500), { minLength: 1, maxLength: 14 }),
        fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 10 }),
        fc.integer({ min: 3_000, max: 30_000 }),
        async (turns, batches, budget) => {
          const engine = newEngine({ freshTailTokens: 2000, chunkTokens: 1500, fanout: 3 });
          const messages = buildHistory(turns, 40);
          let at = 0;
          for (let b = 0; at < messages.length; b++) {
            const size = batches[b % batches.length];
            const batch = messages.slice(at, at + size);
            at += size;
            await ingestAll(engine, batch);
            const res = await assemble(engine, budget);
            const seen = messages.slice(0, at);
            const u = latestUserIndex(seen);
            if (res.promptAuthority === PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED) expect(res.estimatedTokens).toBeLessThanOrEqual(budget);
            else expect(seen[u].tokenCount).toBeGreaterThan(budget);
            // A call whose result has not arrived yet (the batch ended mid-exchange) is not a violation.
            const answered = new Set(seen.filter((m) => m.role === Role.ROLE_TOOL_RESULT).map((m) => m.toolCallId));
            const problems = toolPairViolations(res.messages).filter((p) => !/^tool call (\S+) has no result$/.test(p) || answered.has(p.split(" ")[2]));
            expect(problems).toEqual([]);
            expect(res.messages).toContainEqual(seen[u]);
            // Summaries come first, oldest first; raw messages keep their order.
            const raw = res.messages.filter((m) => m.id !== "");
            const firstRaw = res.messages.findIndex((m) => m.id !== "");
            expect(res.messages.slice(firstRaw).every((m) => m.id !== "")).toBe(true);
            expect(raw.map((m) => m.id)).toEqual([...raw.map((m) => m.id)].sort());
          }
          checkDag(engine, 3);
          expect(engine.store.messageCount("s1")).toBe(messages.length);
        },
      ),
      { numRuns: 25 },
    );
  });

  it("serializes concurrent calls on one session", async () => {
    const engine = newEngine({ freshTailTokens: 1000, chunkTokens: 1000 });
    const messages = buildHistory(
      Array.from({ length: 30 }, () => ({ user: 50, exchanges: [{ assistant: 50, results: [900] }], wrapUp: 50 })),
      50,
    );
    const calls: Array<Promise<unknown>> = [];
    for (let i = 0; i < messages.length; i += 5) {
      calls.push(ingestAll(engine, messages.slice(i, i + 5)));
      calls.push(assemble(engine, 8000));
    }
    await Promise.all(calls);
    checkDag(engine, 4);
    expect(engine.store.allMessages("s1").map((m) => m.entryId)).toEqual(messages.map((m) => m.id));
  });

  it("converges when the fresh tail alone is over the target: the protection shrinks", async () => {
    // Ten 3000-token turns; budget 12000 → target 6000, below the 8000-token fresh tail.
    const messages = buildHistory(
      Array.from({ length: 10 }, () => ({ user: 100, exchanges: [{ assistant: 100, results: [2700] }], wrapUp: 100 })),
      50,
    );
    const engine = newEngine({ freshTailTokens: 8000, chunkTokens: 2000 });
    await ingestAll(engine, messages);
    const res = await compact(engine, messages, 12_000);
    expect(res.compacted).toBe(true);
    const details = res.result!.details as Record<string, number | string>;
    expect(details.stopped).toBe("fits");
    expect(details.assembled_tokens).toBeLessThanOrEqual(6000);
    expect(details.protected_tokens).toBeLessThan(8000);
    const out = await assemble(engine, 12_000);
    expect(out.estimatedTokens).toBeLessThanOrEqual(6000);
    expect(out.messages[out.messages.length - 1]).toEqual(messages[messages.length - 1]);
  });

  it("stops when only the latest turn is left, and still assembles it within the budget", async () => {
    // The agent is mid-turn: the latest request is followed by 9000 tokens of tool traffic.
    const turns = [
      ...Array.from({ length: 4 }, () => ({ user: 100, exchanges: [{ assistant: 100, results: [2000] }], wrapUp: 100 })),
      { user: 100, exchanges: [1, 2, 3].map(() => ({ assistant: 100, results: [2900] })), wrapUp: null },
    ];
    const messages = buildHistory(turns, null);
    const engine = newEngine();
    await ingestAll(engine, messages);
    const res = await compact(engine, messages, 12_000);
    expect((res.result!.details as Record<string, unknown>).stopped).toBe("nothing-left");
    // Everything before the latest request is summarized; the request starts the fresh tail.
    expect(res.result!.firstKeptEntryId).toBe(messages[latestUserIndex(messages)].id);
    const out = await assemble(engine, 12_000);
    expect(out.estimatedTokens).toBeLessThanOrEqual(12_000);
    expect(toolPairViolations(out.messages)).toEqual([]);
    expect(out.messages).toContainEqual(messages[latestUserIndex(messages)]);
    // Below the turn's size: the request and the newest exchanges that fit.
    const squeezed = await assemble(engine, 7_000);
    expect(squeezed.estimatedTokens).toBeLessThanOrEqual(7_000);
    expect(squeezed.messages[0]).toEqual(messages[latestUserIndex(messages)]);
    expect(toolPairViolations(squeezed.messages)).toEqual([]);
    // Below the request itself: an honest "may overflow".
    const tiny = await assemble(engine, 50);
    expect(tiny.promptAuthority).toBe(PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW);
    expect(tiny.messages).toEqual([messages[latestUserIndex(messages)]]);
  });

  describe("Compact", () => {
    const setup = async () => {
      const cs = codingSession({ turns: 12, seed: 5 });
      const messages = stored(cs.messages);
      const engine = newEngine();
      await ingestAll(engine, messages);
      return { engine, messages };
    };

    it("answers a result whose first kept entry is in the host's view, with the summaries and their DAG", async () => {
      const { engine, messages } = await setup();
      const res = await compact(engine, messages, 32_000);
      expect(res.ok).toBe(true);
      expect(res.compacted).toBe(true);
      const r = res.result!;
      const keptAt = messages.findIndex((m) => m.id === r.firstKeptEntryId);
      expect(keptAt).toBeGreaterThan(0);
      expect(toolPairViolations(messages.slice(keptAt))).toEqual([]);
      expect(r.summary.startsWith("[lossless summary S")).toBe(true);
      expect(r.tokensBefore).toBe(messages.reduce((n, m) => n + m.tokenCount, 0));
      expect(r.tokensAfter).toBeLessThanOrEqual(15_616 + 200);
      expect(r.details).toMatchObject({ engine: "lossless", stopped: "fits", target: 15_616 });
      expect(Number((r.details as Record<string, number>).leaf_summaries)).toBeGreaterThan(0);

      // The host commits it; its next view is the summary plus the kept messages. Nothing new → no commit.
      const view = [hostSummaryMessage(r.summary, "compaction-1", 900), ...messages.slice(keptAt)];
      const again = await compact(engine, view, 32_000);
      expect(again.compacted).toBe(false);
      expect(again.reason).toMatch(/already compact/);
      // Forced: at least one more leaf.
      const forced = await compact(engine, view, 32_000, { force: true });
      expect(forced.compacted).toBe(true);
      expect(view.some((m) => m.id === forced.result!.firstKeptEntryId)).toBe(true);
    });

    it("lines its fresh tail up with a view the host compacted further on its own", async () => {
      const { engine, messages } = await setup();
      await compact(engine, messages, 32_000);
      const rawStart = messages.findIndex((m) => m.id === engine.store.rawMessages("s1")[0].entryId);
      const u = latestUserIndex(messages);
      // legacy (while this engine was away) kept only from a later turn boundary on.
      const hostStart = messages.findIndex((m, i) => i > rawStart && i < u && m.role === Role.ROLE_USER);
      expect(hostStart).toBeGreaterThan(rawStart);
      const view = [hostSummaryMessage("legacy summary", "compaction-9", 100), ...messages.slice(hostStart)];
      const res = await compact(engine, view, 32_000);
      expect(res.compacted).toBe(true);
      const keptAt = view.findIndex((m) => m.id === res.result!.firstKeptEntryId);
      expect(keptAt).toBeGreaterThan(0);
      // ...but never past the latest request: then it does not commit.
      const late = [hostSummaryMessage("legacy summary", "compaction-10", 100), ...messages.slice(u + 1)];
      if (late.length > 1) {
        const refused = await compact(engine, late, 32_000);
        expect(refused.compacted).toBe(false);
        expect(refused.reason).toMatch(/not committed/);
      }
    });

    it("with THRESHOLD summarizes everything outside the protected fresh tail", async () => {
      const { engine, messages } = await setup();
      const res = await compact(engine, messages, 0, { compactionTarget: CompactionTarget.COMPACTION_TARGET_THRESHOLD });
      expect(res.compacted).toBe(true);
      const raw = engine.store.rawMessages("s1");
      const rawTokens = raw.reduce((n, m) => n + m.tokenCount, 0);
      expect(rawTokens).toBeLessThanOrEqual(8000 + 6000);
      expect((res.result!.details as Record<string, unknown>).target).toBe("threshold");
    });

    it("refuses a BUDGET compaction without a budget", async () => {
      const { engine, messages } = await setup();
      await expect(compact(engine, messages, 0)).rejects.toThrow(/token_budget/);
    });
  });

  describe("cancellation", () => {
    it("does nothing for a call that was already cancelled", async () => {
      const engine = newEngine();
      const controller = new AbortController();
      controller.abort(new DOMException("cancelled", "AbortError"));
      await expect(ingestAll(engine, stored(codingSession({ turns: 2 }).messages), ctx({ signal: controller.signal }))).rejects.toThrow(/cancelled/);
      expect(engine.store.messageCount("s1")).toBe(0);
    });

    it("stops compacting between steps when cancelled, keeping the summaries already committed", async () => {
      const engine = newEngine();
      const messages = stored(codingSession({ turns: 20, seed: 9 }).messages);
      await ingestAll(engine, messages);
      const controller = new AbortController();
      // The host's model writes summaries; during the third one the caller cancels.
      const host = fakeHost(messages, {
        complete: () => {
          if (host.completes === 3) controller.abort(new DOMException("cancelled", "AbortError"));
          return `model summary ${host.completes}`;
        },
      });
      await expect(assemble(engine, 32_000, ctx({ host, signal: controller.signal }))).rejects.toThrow(/cancelled/);
      const made = engine.store.allSummaries("s1");
      expect(made.length).toBe(2);
      expect(made.every((s) => s.summarizer === "host-model")).toBe(true);
      // The next call goes on from there.
      const res = await assemble(engine, 32_000);
      expect(res.estimatedTokens).toBeLessThanOrEqual(32_000);
      checkDag(engine, 4);
    });

    it("stops starting new steps shortly before the deadline and still answers within the budget", async () => {
      const engine = newEngine();
      const messages = stored(codingSession({ turns: 20, seed: 9 }).messages);
      await ingestAll(engine, messages);
      const res = await assemble(engine, 32_000, ctx({ deadlineMs: Date.now() + 500 }));
      expect(engine.store.allSummaries("s1")).toHaveLength(0);
      expect(res.estimatedTokens).toBeLessThanOrEqual(32_000);
      expect(res.messages[res.messages.length - 1]).toEqual(messages[messages.length - 1]);
      expect(toolPairViolations(res.messages)).toEqual([]);
    });
  });
});
