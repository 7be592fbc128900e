/**
 * AppendMessagesRequest.idempotency_key against a real contextd and a real sidecar engine (the TS
 * misbehaving engine, which prints one `call` event per Ingest): a retried append writes nothing
 * and reaches the engine once — also concurrently and across a contextd restart.
 */
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import type { ContextdProcess } from "../helpers/contextd-process.js";
import type { EngineProcess } from "../helpers/engine-process.js";
import { startContextdWithEngine, type ContextdWithEngine } from "../helpers/contextd-with-engine.js";
import { refusal } from "../helpers/registry-client.js";

const ENGINE = "counting";

describe("idempotent appends", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;
  let cx: ContextdClient;
  let fixture: ContextdWithEngine;
  const turn = (n: number) => [textMessage(Role.ROLE_USER, `question ${n}`), textMessage(Role.ROLE_ASSISTANT, `answer ${n}`)];
  const ingests = () => engine.events().filter((e) => e.event === "call" && e.op === "ingest").length;
  const count = async (sessionId: string) => (await cx.getSession({ session: { sessionId } })).info!.messageCount;

  beforeAll(async () => {
    fixture = await startContextdWithEngine(ENGINE);
    ({ contextd, engine, cx } = fixture);
  });
  afterAll(() => fixture?.close());

  it("a repeat answers the first call's entry ids, writes nothing, and the engine hears of the messages once", async () => {
    const session = { sessionId: "idem-1" };
    const first = await cx.appendMessages({ session, messages: turn(1), idempotencyKey: "turn-1" });
    expect(first.replayed).toBe(false);
    expect(first.entryIds).toHaveLength(2);
    await engine.waitForEvent(() => ingests() === 2);
    for (let i = 0; i < 3; i++) {
      const again = await cx.appendMessages({ session, messages: turn(1), idempotencyKey: "turn-1" });
      expect(again).toEqual({ entryIds: first.entryIds, tokenCounts: first.tokenCounts, replayed: true, heldIndexes: [] });
    }
    expect(await count("idem-1")).toBe(2);
    // The next turn still reaches the engine: the replays did not.
    await cx.appendMessages({ session, messages: turn(2), idempotencyKey: "turn-2" });
    await engine.waitForEvent(() => ingests() === 4);
    expect(ingests()).toBe(4);
  });

  it("the same key with other messages is ALREADY_EXISTS naming the key; nothing is written", async () => {
    const session = { sessionId: "idem-2" };
    await cx.appendMessages({ session, messages: turn(1), idempotencyKey: "k" });
    const err = await refusal(cx.appendMessages({ session, messages: turn(9), idempotencyKey: "k" }));
    expect(err.code).toBe(status.ALREADY_EXISTS);
    expect(err.details).toContain('idempotency_key "k"');
    const heartbeat = await refusal(cx.appendMessages({ session, messages: turn(1), idempotencyKey: "k", isHeartbeat: true }));
    expect(heartbeat.code).toBe(status.ALREADY_EXISTS);
    expect(await count("idem-2")).toBe(2);
  });

  it("keys belong to their session; appends without a key are never deduplicated", async () => {
    const a = await cx.appendMessages({ session: { sessionId: "idem-3a" }, messages: turn(1), idempotencyKey: "shared" });
    const b = await cx.appendMessages({ session: { sessionId: "idem-3b" }, messages: turn(1), idempotencyKey: "shared" });
    expect(b.replayed).toBe(false);
    expect(b.entryIds).not.toEqual(a.entryIds);
    await cx.appendMessages({ session: { sessionId: "idem-3a" }, messages: turn(1) });
    await cx.appendMessages({ session: { sessionId: "idem-3a" }, messages: turn(1) });
    expect(await count("idem-3a")).toBe(6);
  });

  it("concurrent repeats of one request write it once and all answer the same ids", async () => {
    const session = { sessionId: "idem-4" };
    const answers = await Promise.all(Array.from({ length: 16 }, () => cx.appendMessages({ session, messages: turn(1), idempotencyKey: "burst" })));
    const ids = answers[0].entryIds;
    for (const a of answers) expect(a.entryIds).toEqual(ids);
    expect(answers.filter((a) => !a.replayed)).toHaveLength(1);
    expect(await count("idem-4")).toBe(2);
  });

  it("a key outlives a restart; DeleteSession forgets it", async () => {
    const session = { sessionId: "idem-5" };
    const first = await cx.appendMessages({ session, messages: turn(1), idempotencyKey: "before-restart" });
    cx.close();
    contextd = fixture.contextd = await contextd.restart();
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    const again = await cx.appendMessages({ session, messages: turn(1), idempotencyKey: "before-restart" });
    expect(again).toMatchObject({ entryIds: first.entryIds, replayed: true });
    expect(await count("idem-5")).toBe(2);
    await cx.deleteSession({ session });
    const fresh = await cx.appendMessages({ session, messages: turn(1), idempotencyKey: "before-restart" });
    expect(fresh.replayed).toBe(false);
    expect(fresh.entryIds).not.toEqual(first.entryIds);
  });

  it("a key over 256 characters or with control characters is INVALID_ARGUMENT", async () => {
    const long = await refusal(cx.appendMessages({ session: { sessionId: "idem-6" }, messages: turn(1), idempotencyKey: "k".repeat(257) }));
    expect(long.code).toBe(status.INVALID_ARGUMENT);
    expect(long.details).toContain("idempotency_key is longer than 256 characters");
    const ctrl = await refusal(cx.appendMessages({ session: { sessionId: "idem-6" }, messages: turn(1), idempotencyKey: "a\nb" }));
    expect(ctrl.code).toBe(status.INVALID_ARGUMENT);
    expect((await refusal(cx.getSession({ session: { sessionId: "idem-6" } }))).code).toBe(status.NOT_FOUND);
  });

  describe("message keys", () => {
    const keys = (n: number) => [`msg-${n}-q`, `msg-${n}-a`];

    it("a message whose key the session holds is stored once, whichever request brings it; the engine ingests it once", async () => {
      const session = { sessionId: "keys-1" };
      const before = ingests();
      const first = await cx.appendMessages({ session, messages: turn(1), messageKeys: keys(1) });
      expect(first.heldIndexes).toEqual([]);
      await engine.waitForEvent(() => ingests() === before + 2);
      // The same turn again under a request key (a commit after a catch-up), with the next turn.
      const again = await cx.appendMessages({ session, messages: [...turn(1), ...turn(2)], messageKeys: [...keys(1), ...keys(2)], idempotencyKey: "commit-1" });
      expect(again).toMatchObject({ replayed: false, heldIndexes: [0, 1] });
      expect(again.entryIds.slice(0, 2)).toEqual(first.entryIds);
      await engine.waitForEvent(() => ingests() === before + 4);
      // A replay of that request holds nothing and writes nothing.
      expect(
        await cx.appendMessages({ session, messages: [...turn(1), ...turn(2)], messageKeys: [...keys(1), ...keys(2)], idempotencyKey: "commit-1" }),
      ).toEqual({
        ...again,
        replayed: true,
        heldIndexes: [],
      });
      expect(await count("keys-1")).toBe(4);
      const info = (await cx.getSession({ session })).info!;
      expect(info.lastMessageKey).toBe("msg-2-a");
      expect(Number(info.lastMessageTimestampMs)).toBeGreaterThan(0);
      const transcript = (await cx.getTranscript({ session })).entries;
      expect(transcript.map((e) => e.messageKey)).toEqual([...keys(1), ...keys(2)]);
      expect(ingests()).toBe(before + 4);
    });

    it("keys that do not match the messages are INVALID_ARGUMENT naming the field; nothing is written", async () => {
      const session = { sessionId: "keys-2" };
      const short = await refusal(cx.appendMessages({ session, messages: turn(1), messageKeys: ["only-one"] }));
      expect(short.code).toBe(status.INVALID_ARGUMENT);
      expect(short.details).toBe('message_keys has 1 keys for 2 messages: give one per message ("" for none), or none at all');
      const repeated = await refusal(cx.appendMessages({ session, messages: turn(1), messageKeys: ["same", "same"] }));
      expect(repeated.details).toBe('message_keys[1] repeats message_keys[0] ("same")');
      const ctrl = await refusal(cx.appendMessages({ session, messages: turn(1), messageKeys: ["ok", "a\tb"] }));
      expect(ctrl.details).toBe("message_keys[1] contains control characters");
      expect((await refusal(cx.getSession({ session }))).code).toBe(status.NOT_FOUND);
      // "" is a message without a key: stored every time.
      await cx.appendMessages({ session, messages: turn(1), messageKeys: ["k-q", ""] });
      const again = await cx.appendMessages({ session, messages: turn(1), messageKeys: ["k-q", ""] });
      expect(again.heldIndexes).toEqual([0]);
      expect(await count("keys-2")).toBe(3);
    });
  });
});
