import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterEach, describe, expect, it } from "vitest";

import { CompactionEntry, CompactionTarget, Role } from "../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../src/contract/messages.js";
import { Compactions } from "../../../src/host/compactions.js";
import { viewMessages } from "../../../src/host/active-view.js";
import { createExtractiveSummarizer } from "../../../src/compaction/summarizer/extractive.js";
import { SqliteStore } from "../../../src/store/sqlite/sqlite-store.js";
import { createTokenizer } from "../../../src/tokens/create-tokenizer.js";

// The host's commit of a compaction (src/host/compactions.ts) on a real SQLite store, with pinned
// system messages (docs/pinned-messages.md).

const dirs: string[] = [];
const stores: SqliteStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

async function setup() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-pinned-commit-"));
  dirs.push(dir);
  const store = SqliteStore.open(path.join(dir, "contextd.db"));
  stores.push(store);
  const tokenizer = createTokenizer("heuristic");
  const compactions = new Compactions(store, {
    tokenizer,
    summarizer: createExtractiveSummarizer(),
    settings: { reserveTokens: 0, keepRecentTokens: 50, summaryMaxChars: 400 },
  });
  const text = (role: Role, t: string, tokens: number) => ({ message: textMessage(role, t), tokenCount: tokens });
  const e = await store.appendMessages(
    "s",
    [
      text(Role.ROLE_SYSTEM, "rules", 40),
      ...Array.from({ length: 10 }, (_, i) => text(i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER, `m${i} ${"word ".repeat(30)}`, 40)),
    ],
    { sessionKey: "", agentId: "" },
  );
  return { store, compactions, e };
}

describe("committing compactions with pinned system messages", () => {
  it("runs native compaction to a view of [pinned, summary, kept] and counts the pinned message in the no-progress rule", async () => {
    const { store, compactions, e } = await setup();
    const run = await compactions.runNative(
      (await store.readActiveView("s"))!,
      { tokenBudget: 250, target: CompactionTarget.COMPACTION_TARGET_BUDGET, force: false },
      "legacy",
    );
    expect(run.committed).toBe(true);
    const view = (await store.readActiveView("s"))!;
    expect(view.pinnedCount).toBe(1);
    const shown = viewMessages(view);
    expect(shown[0]).toMatchObject({ id: e[0].id, role: Role.ROLE_SYSTEM });
    expect(shown[1].metadata["contextd.kind"]).toBe("compaction_summary");
    expect(view.tokens).toBeLessThanOrEqual(250);
    expect(run.result!.tokensAfter).toBe(view.tokens);
  });

  it("does not commit an engine's result naming a pinned message as its first kept entry", async () => {
    const { store, compactions, e } = await setup();
    await store.commitCompaction("s", CompactionEntry.fromPartial({ summary: "s1", firstKeptEntryId: e[6].id }), "", 10);
    const view = (await store.readActiveView("s"))!;
    const outcome = await compactions.commit(
      view,
      { summary: "again", firstKeptEntryId: e[0].id, tokensBefore: view.tokens, tokensAfter: 1, details: {} },
      "some-engine",
    );
    expect(outcome).toMatchObject({ committed: false });
    expect(outcome.reason).toMatch(/is a pinned system message from before the active view's cut/);
    expect((await store.getSession("s"))!.compactionCount).toBe(1);
  });
});
