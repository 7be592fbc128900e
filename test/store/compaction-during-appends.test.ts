import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { messageText } from "../../src/contract/messages.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { user } from "../fixtures/messages.js";

describe("a compaction that keeps nothing, committed while messages were appended", () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

  it("leaves the messages appended after the compacted view in the active view", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "contextd-store-"));
    dirs.push(dir);
    const store = SqliteStore.open(path.join(dir, "s.db"));
    await store.appendMessages("s", [{ message: user("old 1"), tokenCount: 5 }, { message: user("old 2"), tokenCount: 5 }], { sessionKey: "", agentId: "" });
    const view = (await store.readActiveView("s"))!;
    // While an engine compacts `view`, the runtime appends a new question.
    await store.appendMessages("s", [{ message: user("NEW QUESTION"), tokenCount: 7 }], { sessionKey: "", agentId: "" });
    await store.commitCompaction(
      "s",
      { summary: "old stuff", firstKeptEntryId: "", tokensBefore: 10, tokensAfter: 3, engineId: "e", details: undefined },
      view.session.latestCompactionId,
      3,
      view.session.lastSeq,
    );
    const after = (await store.readActiveView("s"))!;
    expect(after.messages.map((m) => messageText(m.message))).toEqual(["NEW QUESTION"]);
    expect(after.tokens).toBe(3 + 7);
    await store.close();
  });
});

describe("limits.max_session_entries", () => {
  it("is enforced inside the append transaction: concurrent appends cannot overshoot it", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "contextd-store-"));
    const store = SqliteStore.open(path.join(dir, "s.db"));
    try {
      const batch = () => [{ message: user("a"), tokenCount: 1 }, { message: user("b"), tokenCount: 1 }];
      const results = await Promise.allSettled([1, 2, 3, 4].map(() => store.appendMessages("s", batch(), { sessionKey: "", agentId: "" }, 5)));
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(2);
      const refused = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
      expect(String(refused.reason.message)).toContain("limits.max_session_entries (5)");
      expect((await store.getSession("s"))!.entryCount).toBe(4);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
