import { describe, expect, it } from "vitest";

import { AlreadyExistsError, InvalidArgumentError } from "../../../src/contract/errors.js";
import type { NewMessage } from "../../../src/store/types.js";
import { importSample, SAMPLES } from "./keys-and-imports.js";
import type { ContextdStore } from "../../../src/store/open-store.js";
import { LABELS, messageOf, msg, texts, type Stores } from "./harness.js";

const keyed = (text: string, tokens: number, key: string): NewMessage => ({ ...msg(text, tokens), key });
/** The texts of every message in the session's transcript, oldest first. */
const transcript = async (store: ContextdStore, sessionId: string) =>
  texts((await store.readEntries(sessionId, 0, 1000)).filter((e) => e.entry?.$case === "message").map((e) => ({ message: messageOf(e) })));

/** appendKeyed (AppendMessagesRequest.message_keys): a keyed message is stored once per session. */
export function describeMessageKeys(stores: Stores): void {
  describe("message keys", () => {
    it("a message whose key the session holds is not stored again: its slot answers the holding entry", async () => {
      const store = await stores.open();
      const first = await store.appendKeyed("s1", [keyed("a", 3, "k-a"), keyed("b", 4, "k-b")], LABELS);
      if (first.replayed) throw new Error("no idempotency key");
      expect(first.held).toEqual([]);
      // b again (held), c new, an unkeyed d (always stored), a again (held).
      const second = await store.appendKeyed("s1", [keyed("b", 4, "k-b"), keyed("c", 5, "k-c"), msg("d", 6), keyed("a", 3, "k-a")], LABELS);
      if (second.replayed) throw new Error("no idempotency key");
      expect(second.held).toEqual([0, 3]);
      expect(second.entryIds[0]).toBe(first.entryIds[1]);
      expect(second.entryIds[3]).toBe(first.entryIds[0]);
      expect(second.tokenCounts).toEqual([4, 5, 6, 3]);
      expect(second.entries.map((e) => e.id)).toEqual([second.entryIds[1], second.entryIds[2]]);
      expect(await transcript(store, "s1")).toEqual(["a", "b", "c", "d"]);
      const entries = await store.readEntries("s1", 0, 10);
      expect(entries.map((e) => e.messageKey)).toEqual(["k-a", "k-b", "k-c", ""]);
      expect(await store.getSession("s1")).toMatchObject({ entryCount: 4, messageCount: 4, totalTokens: 18, lastMessageKey: "k-c" });
    });

    it("all held: nothing is written, and the session's counters do not move", async () => {
      const store = await stores.open();
      await store.appendKeyed("s1", [keyed("a", 3, "k-a")], LABELS);
      const before = (await store.getSession("s1"))!;
      const again = await store.appendKeyed("s1", [keyed("a", 3, "k-a")], LABELS);
      expect(again).toMatchObject({ replayed: false, held: [0], entries: [] });
      expect(await store.getSession("s1")).toEqual(before);
    });

    it("keys are scoped to the session and die with it", async () => {
      const store = await stores.open();
      await store.appendKeyed("s1", [keyed("a", 3, "k")], LABELS);
      expect(await store.appendKeyed("s2", [keyed("a", 3, "k")], LABELS)).toMatchObject({ held: [] });
      await store.deleteSession("s1");
      expect(await store.appendKeyed("s1", [keyed("a", 3, "k")], LABELS)).toMatchObject({ held: [] });
      expect(await transcript(store, "s1")).toEqual(["a"]);
    });

    it("a key repeated within one request is refused before anything is written", async () => {
      const store = await stores.open();
      await expect(store.appendKeyed("s1", [keyed("a", 1, "k"), keyed("b", 1, "k")], LABELS)).rejects.toThrow(InvalidArgumentError);
      await expect(store.appendKeyed("s1", [keyed("a", 1, "k"), keyed("b", 1, "k")], LABELS)).rejects.toThrow('message_keys[1] repeats message_keys[0] ("k")');
      expect(await store.getSession("s1")).toBeUndefined();
    });

    it("with an idempotency key: a repeat is a replay (nothing held, nothing written); the same key with other messages is refused", async () => {
      const store = await stores.open();
      const KEY = { key: "turn-1", requestHash: "h1" };
      await store.appendKeyed("s1", [keyed("a", 3, "k-a")], LABELS);
      const first = await store.appendKeyed("s1", [keyed("a", 3, "k-a"), keyed("b", 4, "k-b")], LABELS, KEY);
      if (first.replayed) throw new Error("first call replayed");
      expect(first.held).toEqual([0]);
      expect(await store.appendKeyed("s1", [keyed("a", 3, "k-a"), keyed("b", 4, "k-b")], LABELS, KEY)).toEqual({
        replayed: true,
        entryIds: first.entryIds,
        tokenCounts: [3, 4],
      });
      await expect(store.appendKeyed("s1", [keyed("z", 1, "k-z")], LABELS, { key: "turn-1", requestHash: "h2" })).rejects.toThrow(AlreadyExistsError);
      expect(await transcript(store, "s1")).toEqual(["a", "b"]);
    });

    it("concurrent appends of one key, through two connections, store it once", async () => {
      const [one, two] = [await stores.open(), await stores.open()];
      await one.appendKeyed("s1", [keyed("start", 1, "k0")], LABELS);
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 ? one : two).appendKeyed("s1", [keyed("same", 2, "k1"), keyed(`own ${i}`, 1, `own-${i}`)], LABELS)),
      );
      const ids = new Set(results.map((r) => r.entryIds[0]));
      expect(ids.size).toBe(1);
      const all = await transcript(one, "s1");
      expect(all.filter((t) => t === "same")).toHaveLength(1);
      expect(all.filter((t) => t.startsWith("own "))).toHaveLength(8);
    });

    it("an imported OpenClaw file's messages are held under openclaw:<entry id>", async () => {
      const store = await stores.open();
      await importSample(store, "imp", SAMPLES.v4);
      const entries = await store.readEntries("imp", 0, 1000);
      const messages = entries.filter((e) => e.entry?.$case === "message");
      expect(messages.length).toBeGreaterThan(0);
      for (const m of messages) expect(m.messageKey).toBe(`openclaw:${m.id}`);
      expect(entries.filter((e) => e.entry?.$case !== "message").every((e) => e.messageKey === "")).toBe(true);
      const session = (await store.getSession("imp"))!;
      expect(session.lastMessageKey).toBe(messages.at(-1)!.messageKey);
      expect(session.lastMessageTimestampMs).toBe(Number(messages.at(-1)!.timestampMs));
      const again = await store.appendKeyed("imp", [keyed("the same entry", 1, messages[0].messageKey)], LABELS);
      expect(again).toMatchObject({ held: [0], entryIds: [messages[0].id] });
    });
  });
}
