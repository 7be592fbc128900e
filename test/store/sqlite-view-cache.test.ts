/**
 * The SQLite store's cache of decoded active views (src/store/sqlite/view-cache.ts,
 * active-view-read.ts): whatever happened to a session — appends (extending the cached view),
 * compactions, rewrites, hidden and pinned messages, deletes and re-creation, writes through another
 * connection to the same file — a read through the caching store equals a read through a store
 * that has never cached anything (fast-check sequences of operations, on real files).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { ViewCache, type CachedView } from "../../src/store/sqlite/view-cache.js";
import { compaction, LABELS, msg } from "./conformance/harness.js";

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-view-cache-"));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

type Op =
  | { op: "append"; n: number; role: Role; hidden: boolean; other: boolean }
  | { op: "rewrite"; pick: number; other: boolean }
  | { op: "compact"; pick: number }
  | { op: "recreate" }
  | { op: "systemTokens"; tokens: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant("append" as const),
      n: fc.integer({ min: 1, max: 4 }),
      role: fc.constantFrom(Role.ROLE_USER, Role.ROLE_ASSISTANT, Role.ROLE_SYSTEM),
      hidden: fc.boolean(),
      other: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("rewrite" as const), pick: fc.nat(), other: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("compact" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("recreate" as const) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("systemTokens" as const), tokens: fc.nat({ max: 500 }) }) },
);

describe("SQLite active-view cache", () => {
  it("every read equals a read by a store that caches nothing, whatever happened to the session", async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 14 }), async (ops) => {
        const file = path.join(dir, `views-${++run}.db`);
        const cached = SqliteStore.open(file);
        const other = SqliteStore.open(file);
        let n = 0;
        try {
          await cached.appendMessages("s", [msg("first", 5)], LABELS);
          for (const o of ops) {
            const store = "other" in o && o.other ? other : cached;
            const entries = (await cached.readEntries("s", 0, 1000)).filter((e) => e.entry?.$case === "message");
            if (o.op === "append") {
              const batch = Array.from({ length: o.n }, () => msg(`m${++n}`, 3 + (n % 7), o.role, { excludeFromContext: o.hidden }));
              await store.appendMessages("s", batch, LABELS);
            } else if (o.op === "rewrite" && entries.length > 0) {
              const target = entries[o.pick % entries.length];
              await store.rewriteEntries("s", [{ entryId: target.id, message: textMessage(Role.ROLE_USER, `rewritten ${++n}`), tokenCount: 2 }], "test");
            } else if (o.op === "compact") {
              const view = (await cached.readActiveView("s"))!;
              const kept = view.messages.slice(view.pinnedCount);
              if (kept.length > 0)
                await cached.commitCompaction("s", compaction(`summary ${++n}`, kept[o.pick % kept.length].entryId), view.session.latestCompactionId, 4);
            } else if (o.op === "recreate") {
              await cached.deleteSession("s");
              await cached.appendMessages("s", [msg("first", 5)], LABELS);
            } else if (o.op === "systemTokens") {
              await other.setSystemAdditionTokens("s", o.tokens);
            }
            const fresh = SqliteStore.open(file);
            try {
              expect(await cached.readActiveView("s")).toEqual(await fresh.readActiveView("s"));
            } finally {
              await fresh.close();
            }
          }
        } finally {
          await other.close();
          await cached.close();
        }
      }),
      { numRuns: 60 },
    );
  });

  it("shares frozen messages between reads, and gives each read its own list", async () => {
    const store = SqliteStore.open(path.join(dir, "frozen.db"));
    try {
      await store.appendMessages("s", [msg("a", 1), msg("b", 2)], LABELS);
      const first = (await store.readActiveView("s"))!;
      first.messages.pop();
      const second = (await store.readActiveView("s"))!;
      expect(second.messages.map((m) => m.tokenCount)).toEqual([1, 2]);
      expect(second.messages[0]).toBe(first.messages[0]);
      expect(Object.isFrozen(second.messages[0]) && Object.isFrozen(second.messages[0].message)).toBe(true);
    } finally {
      await store.close();
    }
  });
});

describe("ViewCache", () => {
  const view = (bytes: number): CachedView => ({
    createdAtMs: 1,
    latestCompactionSeq: 0,
    activeFromSeq: 1,
    lastSeq: 1,
    pinned: [],
    kept: [],
    tokens: 0,
    bytes,
  });

  it("holds at most its bound in stored bytes, dropping the least recently read sessions first", () => {
    const cache = new ViewCache(100);
    cache.set("a", view(40));
    cache.set("b", view(40));
    cache.get("a"); // b is now the least recently read
    cache.set("c", view(40));
    expect([cache.get("a"), cache.get("b"), cache.get("c")].map(Boolean)).toEqual([true, false, true]);
    cache.set("huge", view(101)); // larger than the bound: not cached, nothing else dropped
    expect(cache.get("huge")).toBeUndefined();
    expect(cache.size).toBe(2);
  });

  it("is cleared when SQLite's data_version moves (another connection committed)", () => {
    const cache = new ViewCache();
    cache.checkDataVersion(1);
    cache.set("a", view(1));
    cache.checkDataVersion(1);
    expect(cache.get("a")).toBeDefined();
    cache.checkDataVersion(2);
    expect(cache.get("a")).toBeUndefined();
  });
});
