/**
 * The lossless engine and pinned system messages (docs/pinned-messages.md), in process: system
 * messages are never folded into a leaf summary, assembly shows every one of them first (counted
 * in the budget), and the Compact result lines up with the host's view, which pins them before its
 * summary.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  ContextEngineServiceAssembleRequest,
  ContextEngineServiceAssembleResponse,
  ContextEngineServiceCompactRequest,
  ContextEngineServiceCompactResponse,
} from "../../../../src/contract/gen/contextd/v1/engine.js";
import { PromptAuthority, Role, type Message } from "../../../../src/contract/gen/contextd/v1/types.js";
import { summaryMessage as hostSummaryMessage } from "../../../../src/contract/messages.js";
import type { LosslessEngine } from "../../../../engines/lossless/engine.js";
import { LosslessStore } from "../../../../engines/lossless/store.js";
import { SCHEMA_VERSION } from "../../../../engines/lossless/schema.js";
import { codingSession } from "../../../fixtures/coding-session.js";
import { system, textOf } from "../../../fixtures/messages.js";
import { toolPairViolations } from "../../../helpers/invariants.js";
import { ctx, newEngine, session, stored } from "../../../engines-lossless/helpers.js";

const assemble = async (engine: LosslessEngine, budget: number | undefined) =>
  ContextEngineServiceAssembleResponse.fromPartial(
    await engine.assemble(ContextEngineServiceAssembleRequest.fromPartial({ session: session(), messages: [], tokenBudget: budget }), ctx()),
  );
const compact = async (engine: LosslessEngine, view: Message[], budget: number) =>
  ContextEngineServiceCompactResponse.fromPartial(
    await engine.compact(ContextEngineServiceCompactRequest.fromPartial({ session: session(), messages: view, tokenBudget: budget }), ctx()),
  );
const ingestAll = (engine: LosslessEngine, messages: Message[]) =>
  engine.ingestBatch({ session: session(), messages, isHeartbeat: false, host: undefined }, ctx());

const START = "SYSTEM-START: you are the payments team's assistant; never print a card number.";
const MIDDLE = "SYSTEM-MIDDLE: from now on, answer in French.";

/** A long coding session with a system message first and one in the middle, stored as the host would. */
function history(turns = 24): Message[] {
  const cs = codingSession({ turns, seed: 9 }).messages;
  const middle = cs.findIndex((m, i) => i > cs.length / 2 && m.role === Role.ROLE_USER);
  return stored([system(START), ...cs.slice(0, middle), system(MIDDLE), ...cs.slice(middle)]);
}

const isSystem = (m: Message) => m.role === Role.ROLE_SYSTEM;

describe("lossless: pinned system messages", () => {
  it("never folds a system message into a summary, and assembles every one of them first, within the budget", async () => {
    const messages = history();
    const engine = newEngine({ freshTailTokens: 4000, chunkTokens: 3000 });
    await ingestAll(engine, messages);
    for (const budget of [32_000, 16_000, 9_000]) {
      const out = await assemble(engine, budget);
      expect(out.estimatedTokens).toBeLessThanOrEqual(budget);
      expect(out.estimatedTokens).toBe(out.messages.reduce((n, m) => n + m.tokenCount, 0));
      expect(out.messages.slice(0, 2).map(textOf)).toEqual([START, MIDDLE]);
      expect(out.messages.slice(2).some(isSystem)).toBe(false);
      expect(toolPairViolations(out.messages.slice(2))).toEqual([]);
      expect(out.messages.at(-1)).toEqual(messages.at(-1));
    }
    const summaries = engine.store.allSummaries("s1");
    expect(summaries.length).toBeGreaterThan(0);
    for (const s of summaries) expect(s.text).not.toMatch(/SYSTEM-|card number|French/);
    // A leaf's count leaves the system messages of its span out.
    const first = summaries.find((s) => s.depth === 0 && s.firstOrd === 1)!;
    expect(first.messageCount).toBe(first.lastOrd - first.firstOrd); // its span holds SYSTEM-START
  });

  it("counts the system messages in the budget: a large system prompt leaves less for the tail", async () => {
    const messages = history(8);
    const big = stored([system(`${START} ${"policy ".repeat(2500)}`), ...messages.slice(1)]);
    const plain = newEngine({ dbPath: ":memory:" });
    const heavy = newEngine({ dbPath: ":memory:" });
    await ingestAll(plain, messages);
    await ingestAll(heavy, big);
    const a = await assemble(plain, 100_000);
    const b = await assemble(heavy, 100_000);
    expect(b.estimatedTokens - a.estimatedTokens).toBe(big[0].tokenCount - messages[0].tokenCount);
    const squeezed = await assemble(heavy, big[0].tokenCount + 3_000);
    expect(squeezed.estimatedTokens).toBeLessThanOrEqual(big[0].tokenCount + 3_000);
    expect(squeezed.messages[0]).toEqual(big[0]);
    // The system messages alone over the budget: an honest "may overflow", still all of them first.
    const tiny = await assemble(heavy, 500);
    expect(tiny.promptAuthority).toBe(PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW);
    expect(tiny.messages.slice(0, 2).map((m) => m.id)).toEqual([big[0].id, big.find((m) => textOf(m) === MIDDLE)!.id]);
  });

  it("answers a Compact result that lines up with the host's view, its pinned system messages before its summary", async () => {
    const messages = history();
    const engine = newEngine({ freshTailTokens: 4000, chunkTokens: 3000 });
    await ingestAll(engine, messages);
    const res = await compact(engine, messages, 24_000);
    expect(res.compacted).toBe(true);
    const r = res.result!;
    expect(r.summary).not.toMatch(/SYSTEM-/);
    const keptAt = messages.findIndex((m) => m.id === r.firstKeptEntryId);
    expect(keptAt).toBeGreaterThan(0);
    expect(isSystem(messages[keptAt])).toBe(false);
    // The host's next view: the system messages before the cut, the summary, the kept part.
    const pinned = messages.slice(0, keptAt).filter(isSystem);
    const summary = hostSummaryMessage(r.summary, "compaction-1", 2_000);
    const view = [...pinned, summary, ...messages.slice(keptAt)];
    const expected = pinned.reduce((n, m) => n + m.tokenCount, 0) + messages.slice(keptAt).reduce((n, m) => n + m.tokenCount, 0);
    expect(r.tokensAfter).toBeGreaterThan(expected); // plus the summary message
    // Nothing new: the view with its pinned head matches, so no commit.
    const again = await compact(engine, view, 24_000);
    expect(again.compacted).toBe(false);
    expect(again.reason).toMatch(/already compact/);
  });

  it("migrates a version-1 database: the system-message index is added, and assembly reads through it", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lossless-pinned-"));
    try {
      const file = path.join(dir, "lossless.db");
      // A version-1 file: the same tables, without the index.
      const old = LosslessStore.open(file);
      old.db.exec("DROP INDEX messages_system");
      old.db.pragma("user_version = 1");
      old.close();
      const store = LosslessStore.open(file);
      expect(store.db.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
      expect(SCHEMA_VERSION).toBe(2);
      const plan = store.db
        .prepare(`EXPLAIN QUERY PLAN SELECT body FROM messages WHERE session_id = ? AND role = ${Role.ROLE_SYSTEM} ORDER BY ord`)
        .all("s1") as { detail: string }[];
      expect(plan.map((p) => p.detail).join("; ")).toMatch(/USING INDEX messages_system/);
      store.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
