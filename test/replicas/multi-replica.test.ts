/**
 * Issue 9, part 4: three real contextd processes on one PostgreSQL database (a scratch database on
 * the local server), each called directly. What one replica writes, every replica sees at once:
 *
 * - appends through every replica to one session form one history (seqs 1..n, each entry the
 *   child of the one before) in which each writer's order holds and each batch stays together;
 * - two compactions of one session started at the same time through different replicas leave a
 *   consistent transcript: at least one of each pair commits (a loser is discarded, never half
 *   written), every first_kept_entry_id is a message entry of the session, no message is lost, and
 *   the active view is the latest summary followed by the entries from its first_kept_entry_id on;
 * - the replicas assemble identical contexts;
 * - an append retried with the same idempotency key at ANOTHER replica writes nothing.
 *
 * The replicas run the built-in legacy engine only (no sidecars): routing to registered engines
 * and registry state (registrations, quarantine, host tokens) across replicas are covered by
 * registry-sync.test.ts.
 */
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompactionTarget, Role, type Message, type TranscriptEntry } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText, summaryMessage, textMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startReplicas, stopReplicas, type Replica } from "../helpers/replicas.js";
import { messageTexts, readEntries } from "../helpers/runtime-load.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";

const CONFIG = {
  // Small numbers so that a few dozen messages are worth compacting.
  compaction: { keep_recent_tokens: 400, reserve_tokens: 0 },
};

describe("three replicas on one PostgreSQL database", () => {
  let db: ScratchDatabase;
  let replicas: Replica[];
  let clients: ContextdClient[];

  beforeAll(async () => {
    db = await createScratchDatabase();
    replicas = await startReplicas(3, { store: db.url({ pool_max: 3 }), config: CONFIG });
    clients = replicas.map((r) => new ContextdClient({ address: r.address, timeoutMs: 30_000 }));
  });
  afterAll(async () => {
    for (const c of clients ?? []) c.close();
    if (replicas) await stopReplicas(replicas);
    await db?.drop();
  });

  const ref = (sessionId: string) => ({ sessionId, agentId: "coder" });
  const user = (text: string) => textMessage(Role.ROLE_USER, text);

  it("appends through every replica to one session form one history in which each writer's order holds", async () => {
    const ROUNDS = 12;
    // Writer i talks to replica i; batches of 1–3 messages (keyed and unkeyed alternately).
    await Promise.all(
      clients.map(async (cx, w) => {
        for (let i = 0; i < ROUNDS; i++) {
          const batch = Array.from({ length: 1 + ((i + w) % 3) }, (_, j) => user(`w${w}-${i}.${j}`));
          await cx.appendMessages({ session: ref("one-history"), messages: batch, idempotencyKey: i % 2 ? `w${w}-${i}` : "" });
        }
      }),
    );
    const histories = await Promise.all(clients.map((cx) => readEntries(cx, "one-history")));
    // Every replica reads the same history.
    expect(histories[1]).toEqual(histories[0]);
    expect(histories[2]).toEqual(histories[0]);
    const entries = histories[0]!;
    expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
    expect(entries.map((e) => e.parentId)).toEqual(["", ...entries.slice(0, -1).map((e) => e.id)]);
    const texts = messageTexts(entries);
    clients.forEach((_, w) => {
      const expected = Array.from({ length: ROUNDS }, (_, i) => Array.from({ length: 1 + ((i + w) % 3) }, (_, j) => `w${w}-${i}.${j}`)).flat();
      expect(
        texts.filter((t) => t.startsWith(`w${w}-`)),
        `writer ${w}'s order`,
      ).toEqual(expected);
    });
    // A batch is contiguous: nothing of another writer inside it.
    for (let k = 1; k < texts.length; k++) {
      if (!texts[k]!.endsWith(".0")) expect(texts[k - 1]!.split(".")[0]).toBe(texts[k]!.split(".")[0]);
    }
    for (const cx of clients) {
      const s = await cx.getSession({ session: ref("one-history") });
      expect(s.info?.entryCount).toBe(texts.length);
    }
  });

  it("two concurrent compactions through different replicas leave a consistent transcript", async () => {
    const sessionId = "compactions";
    const appended: string[] = [];
    // Turns long enough that a summary is smaller than what it replaces: a compaction that would
    // grow the view is not committed (test/security/session-findings.test.ts).
    const turn = async (cx: ContextdClient, n: number) => {
      const texts = [
        `Turn ${n}: please refactor src/module${n}.ts so that parseConfig${n}() returns a Result; ${"the tests in test/module.test.ts must keep passing. ".repeat(12)}`,
        `Done with turn ${n}: parseConfig${n}() now returns Result<Config, ConfigError>; ${"I also updated the callers and the docs. ".repeat(12)}`,
      ];
      await cx.appendMessages({ session: ref(sessionId), messages: [user(texts[0]!), textMessage(Role.ROLE_ASSISTANT, texts[1]!)] });
      appended.push(...texts);
    };
    for (let n = 0; n < 8; n++) await turn(clients[n % 3]!, n);

    const ROUNDS = 6;
    const outcomes: Array<{ committed: number; discarded: string[] }> = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < 3; k++) await turn(clients[k]!, 100 + round * 3 + k);
      // The pair: replica (round % 3) and the next one, sent at the same moment.
      const pair = [clients[round % 3]!, clients[(round + 1) % 3]!];
      const answers = await Promise.all(
        pair.map((cx) =>
          cx.compact({ session: ref(sessionId), tokenBudget: 100_000, force: true, compactionTarget: CompactionTarget.COMPACTION_TARGET_THRESHOLD }),
        ),
      );
      for (const a of answers) expect(a.ok, a.reason).toBe(true);
      const committed = answers.filter((a) => a.compacted).length;
      expect(committed, `round ${round}: at least one of the pair commits (${answers.map((a) => a.reason).join(" | ")})`).toBeGreaterThanOrEqual(1);
      const discarded = answers.filter((a) => !a.compacted).map((a) => a.reason);
      for (const why of discarded) expect(why).toMatch(/another compaction of this session was committed first/);
      outcomes.push({ committed, discarded });
    }
    console.log(JSON.stringify({ test: "concurrent compactions", rounds: outcomes.map((o) => o.committed) }));

    const entries = await readEntries(clients[0]!, sessionId);
    for (const cx of clients.slice(1)) expect(await readEntries(cx, sessionId)).toEqual(entries);
    const byId = new Map(entries.map((e) => [e.id, e] as const));
    const compactions = entries.filter((e): e is TranscriptEntry & { entry: { $case: "compaction" } } => e.entry?.$case === "compaction");
    expect(compactions.length).toBe(outcomes.reduce((n, o) => n + o.committed, 0));
    for (const c of compactions) {
      const kept = c.entry.value.firstKeptEntryId;
      expect(kept, "a threshold compaction keeps recent messages").not.toBe("");
      const target = byId.get(kept);
      expect(target?.entry?.$case, `first_kept_entry_id ${kept} is a message entry of the session`).toBe("message");
      expect(target!.seq).toBeLessThan(c.seq);
    }
    // Compactions only append: every message is still in the transcript, once, in order.
    expect(messageTexts(entries)).toEqual(appended);

    // The active view: the latest summary, then the messages from its first_kept_entry_id on.
    const latest = compactions.at(-1)!;
    const keptSeq = byId.get(latest.entry.value.firstKeptEntryId)!.seq;
    const expectedView = [
      messageText(summaryMessage(latest.entry.value.summary)),
      ...entries
        .filter((e) => e.seq >= keptSeq && e.entry?.$case === "message")
        .map((e) => messageText((e.entry as { $case: "message"; value: Message }).value)),
    ];
    const contexts = await Promise.all(clients.map((cx) => cx.assemble({ session: ref(sessionId), tokenBudget: 100_000, autoCompact: false })));
    for (const ctx of contexts) expect(ctx.messages.map(messageText)).toEqual(expectedView);
  });

  it("the replicas assemble identical contexts", async () => {
    const sessionId = "identical";
    for (let n = 0; n < 30; n++) {
      await clients[n % 3]!.appendMessages({
        session: ref(sessionId),
        messages: [
          user(`Question ${n}: what does src/app${n}.ts export? ${"Some context to make it longer. ".repeat(5)}`),
          textMessage(Role.ROLE_ASSISTANT, `It exports handler${n}(). ${"Details. ".repeat(10)}`),
        ],
      });
    }
    // A budget small enough that Assemble must auto-compact: the first replica to assemble commits
    // the compaction, the others find it done.
    const first = await clients[0]!.assemble({ session: ref(sessionId), tokenBudget: 1_500 });
    expect(first.compaction, "the first Assemble compacted").toBeDefined();
    // The stable-prefix hint is each process's own (its previous answer for the session), not the context.
    const context = (a: Awaited<ReturnType<ContextdClient["assemble"]>>) => ({ ...a, compaction: undefined, stablePrefixMessages: 0, stablePrefixTokens: 0 });
    const contexts = await Promise.all(clients.map((cx) => cx.assemble({ session: ref(sessionId), tokenBudget: 1_500 })));
    for (const ctx of contexts) {
      expect(ctx.compaction, "no replica compacts again").toBeUndefined();
      expect(context(ctx)).toEqual(context(contexts[0]!));
      expect(ctx.engineId).toBe("legacy");
    }
    expect(contexts[0]!.messages.map(messageText)).toEqual(first.messages.map(messageText));
    // And at a budget that fits everything: the same active view everywhere.
    const whole = await Promise.all(clients.map((cx) => cx.assemble({ session: ref(sessionId), tokenBudget: 200_000 })));
    for (const ctx of whole) expect(context(ctx)).toEqual(context(whole[0]!));
  });

  it("an append retried with the same idempotency key at another replica writes nothing", async () => {
    const sessionId = "retried";
    await clients[0]!.appendMessages({ session: ref(sessionId), messages: [user("before")] });
    const request = { session: ref(sessionId), messages: [user("the turn"), textMessage(Role.ROLE_ASSISTANT, "the answer")], idempotencyKey: "turn-7" };
    const firstAnswer = await clients[0]!.appendMessages(request);
    expect(firstAnswer.replayed).toBe(false);
    // The "retry after a lost answer" lands on the other replicas.
    for (const cx of clients.slice(1)) {
      const again = await cx.appendMessages(request);
      expect(again).toMatchObject({ replayed: true, entryIds: firstAnswer.entryIds });
    }
    expect(messageTexts(await readEntries(clients[2]!, sessionId))).toEqual(["before", "the turn", "the answer"]);
    // The same key with other messages, at another replica: ALREADY_EXISTS naming the key.
    await expect(clients[1]!.appendMessages({ ...request, messages: [user("something else")] })).rejects.toMatchObject({
      code: status.ALREADY_EXISTS,
      details: expect.stringContaining("turn-7"),
    });

    // The same new key sent to every replica at once: one writes, the others answer its ids.
    const concurrent = { session: ref(sessionId), messages: [user("sent to all three at once")], idempotencyKey: "turn-8" };
    const answers = await Promise.all(clients.map((cx) => cx.appendMessages(concurrent)));
    expect(answers.filter((a) => !a.replayed)).toHaveLength(1);
    for (const a of answers) expect(a.entryIds).toEqual(answers[0]!.entryIds);
    expect(messageTexts(await readEntries(clients[1]!, sessionId))).toEqual(["before", "the turn", "the answer", "sent to all three at once"]);
  });
});
