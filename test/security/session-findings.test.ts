/**
 * The red-team findings on SessionService (issue 12), each against a real contextd with auth
 * required and runtime tokens limited to different agents: `alice` (two tokens) and `bob`.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompactionTarget, type Role, SubagentContextMode, SubagentEndReason } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { bytes, int, message, rawSessionCall } from "./helpers/wire.js";

type Outcome = { code: number; details: string };
async function outcome(p: Promise<unknown>): Promise<Outcome> {
  try {
    await p;
    return { code: status.OK, details: "" };
  } catch (err) {
    return { code: (err as ServiceError).code, details: (err as ServiceError).details };
  }
}

describe("SessionService red-team findings", () => {
  let contextd: ContextdProcess;
  let alice: ContextdClient;
  let alice2: ContextdClient;
  let bob: ContextdClient;
  const hi = [user("hi")];

  beforeAll(async () => {
    contextd = await startContextd({
      config: {
        auth: {
          required: true,
          runtimes: [
            { token_env: "ALICE", agents: ["alice"] },
            { token_env: "ALICE2", agents: ["alice"] },
            { token_env: "BOB", agents: ["bob"] },
          ],
        },
      },
      env: { ALICE: "alice-token", ALICE2: "alice-token-2", BOB: "bob-token" },
    });
    alice = new ContextdClient({ address: contextd.address, token: "alice-token" });
    alice2 = new ContextdClient({ address: contextd.address, token: "alice-token-2" });
    bob = new ContextdClient({ address: contextd.address, token: "bob-token" });
    // Interleaved, so that a listing paged over all sessions would cut at bob's.
    for (let i = 0; i < 3; i++) {
      await bob.appendMessages({ session: { sessionId: `bob-${i}`, agentId: "bob" }, messages: [user("bob's secret")] });
      await alice.appendMessages({ session: { sessionId: `alice-${i}`, agentId: "alice" }, messages: hi });
    }
  });
  afterAll(async () => {
    for (const c of [alice, alice2, bob]) c?.close();
    await contextd?.cleanup();
  });

  it("a `ListSessions` page token decodes to another agent's session id and activity time", async () => {
    const seen: string[] = [];
    const tokens: string[] = [];
    let pageToken = "";
    do {
      const page = await alice.listSessions({ pageSize: 1, pageToken });
      expect(page.sessions).toHaveLength(1); // paged over alice's sessions only: no empty pages
      seen.push(...page.sessions.map((s) => s.session!.sessionId));
      pageToken = page.nextPageToken;
      if (pageToken) tokens.push(pageToken);
    } while (pageToken);
    expect(seen).toEqual(["alice-2", "alice-1", "alice-0"]);
    for (const t of tokens) expect(Buffer.from(t, "base64url").toString("latin1")).not.toMatch(/alice|bob|\d{10}/);

    // Bound to the runtime token that was issued it: not bob's, not even another token of alice's.
    for (const other of [bob, alice2]) {
      const refused = await outcome(other.listSessions({ pageSize: 1, pageToken: tokens[0] }));
      expect(refused.code).toBe(status.INVALID_ARGUMENT);
      expect(refused.details).toContain("page_token");
    }
    const tampered = tokens[0].slice(0, -2) + (tokens[0].endsWith("AA") ? "BB" : "AA");
    expect((await outcome(alice.listSessions({ pageSize: 1, pageToken: tampered }))).code).toBe(status.INVALID_ARGUMENT);

    // GetTranscript tokens: bound to the caller and to the session they page.
    await alice.appendMessages({ session: { sessionId: "alice-0" }, messages: [user("more"), user("and more")] });
    const first = await alice.getTranscript({ session: { sessionId: "alice-0" }, pageSize: 1 });
    expect(first.nextPageToken).not.toBe("");
    expect((await alice.getTranscript({ session: { sessionId: "alice-0" }, pageSize: 1, pageToken: first.nextPageToken })).entries[0].seq).toBe(2);
    expect((await outcome(alice.getTranscript({ session: { sessionId: "alice-1" }, pageToken: first.nextPageToken }))).code).toBe(status.INVALID_ARGUMENT);
    expect((await outcome(alice2.getTranscript({ session: { sessionId: "alice-0" }, pageToken: first.nextPageToken }))).code).toBe(status.INVALID_ARGUMENT);
    expect((await outcome(bob.getTranscript({ session: { sessionId: "bob-0" }, pageToken: first.nextPageToken }))).code).toBe(status.INVALID_ARGUMENT);
  });

  it("`PERMISSION_DENIED` vs `NOT_FOUND` tells a runtime which session ids exist and whose they are", async () => {
    // Every RPC that needs the session: bob's answers exactly as a session that never existed.
    const calls = (id: string, agentId?: string) => {
      const session = { sessionId: id, agentId };
      return [
        alice.getSession({ session }),
        alice.assemble({ session, tokenBudget: 1000 }),
        alice.compact({ session, tokenBudget: 1000, force: true }),
        alice.afterTurn({ session }),
        alice.maintain({ session }),
        alice.getTranscript({ session }),
        alice.exportTranscript({ session }),
        alice.deleteSession({ session }),
        alice.endSubagent({ child: session, reason: SubagentEndReason.SUBAGENT_END_REASON_DELETED }),
        alice.prepareSubagentSpawn({
          parent: session,
          child: { sessionId: `${id}-child`, agentId: "alice" },
          contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK,
        }),
        alice.rollbackSubagentSpawn({ rollbackHandle: Buffer.from(JSON.stringify({ c: id, e: "" })).toString("base64url") }),
      ];
    };
    for (const agentId of [undefined, "alice"]) {
      const theirs = await Promise.all(calls("bob-1", agentId).map(outcome));
      const missing = await Promise.all(calls("no-such-id", agentId).map(outcome));
      expect(theirs.map((o) => o.code)).toEqual(missing.map(() => status.NOT_FOUND));
      expect(theirs.map((o) => o.details.replaceAll("bob-1", "ID"))).toEqual(missing.map((o) => o.details.replaceAll("no-such-id", "ID")));
    }
    // The agent a request claims is checked first, before any store read: the same answer either way.
    const claimed = [
      await outcome(alice.getSession({ session: { sessionId: "bob-1", agentId: "bob" } })),
      await outcome(alice.getSession({ session: { sessionId: "no-such-id", agentId: "bob" } })),
    ];
    expect(claimed.map((o) => o.code)).toEqual([status.PERMISSION_DENIED, status.PERMISSION_DENIED]);
    expect(claimed[0].details).toBe(claimed[1].details);

    // Creating under an id another agent holds: ALREADY_EXISTS, telling only that the id is taken.
    for (const call of [
      alice.appendMessages({ session: { sessionId: "bob-1", agentId: "alice" }, messages: [user("intrusion")] }),
      alice.importTranscript({ session: { sessionId: "bob-1", agentId: "alice" }, jsonl: Buffer.from(JSON.stringify({ role: "user", content: "x" })) }),
      alice.prepareSubagentSpawn({
        parent: { sessionId: "alice-1" },
        child: { sessionId: "bob-1", agentId: "alice" },
        contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED,
      }),
    ].map(outcome)) {
      const o = await call;
      expect(o.code).toBe(status.ALREADY_EXISTS);
      expect(o.details).not.toContain('bob"');
    }
    const info = (await bob.getSession({ session: { sessionId: "bob-1" } })).info!;
    expect([info.messageCount, info.session!.agentId]).toEqual([1, "bob"]);
    // A new session of the caller's own agent is still created by an append.
    expect((await alice.appendMessages({ session: { sessionId: "alice-new", agentId: "alice" }, messages: hi })).entryIds).toHaveLength(1);
  });

  it('an unknown session without `agent_id` answers `PERMISSION_DENIED … agent ""` (should be `NOT_FOUND`)', async () => {
    for (const call of [alice.getSession({ session: { sessionId: "ghost" } }), alice.assemble({ session: { sessionId: "ghost" }, tokenBudget: 100 })].map(
      outcome,
    )) {
      const o = await call;
      expect(o).toEqual({ code: status.NOT_FOUND, details: 'session "ghost" not found' });
    }
  });

  it("random bytes or out-of-range 64-bit values (`ttl_ms = 2^64−1`, `timestamp_ms = −2^63`) answer `INTERNAL Error deserializing request` (should be `INVALID_ARGUMENT`)", async () => {
    const ref = (id: string) => message(bytes(1, id), bytes(3, "alice"));
    const text = message(bytes(1, message(bytes(1, "hi")))); // ContentBlock.text = TextBlock{text}
    const bodies: [string, Buffer][] = [
      ["PrepareSubagentSpawn", message(bytes(1, ref("alice-1")), bytes(2, ref("wire-child")), int(3, 1n), int(4, 2n ** 64n - 1n))],
      ["AppendMessages", message(bytes(1, ref("wire-ts")), bytes(2, message(int(2, 1n), bytes(3, text), int(4, -(2n ** 63n)))))],
      ["AppendMessages", Buffer.from([0x0a, 0xff, 0x13, 0x37, 0xde, 0xad, 0xbe, 0xef])],
      ["ListSessions", Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])],
    ];
    for (const [method, body] of bodies) {
      const o = await rawSessionCall(contextd.address, method, body, "alice-token");
      expect(o.code, `${method}: ${o.details}`).toBe(status.INVALID_ARGUMENT);
    }
    expect((await outcome(alice.getSession({ session: { sessionId: "wire-ts" } }))).code).toBe(status.NOT_FOUND);
  });

  it("`EndSubagent` on a top-level session deletes it", async () => {
    const o = await outcome(alice.endSubagent({ child: { sessionId: "alice-2" }, reason: SubagentEndReason.SUBAGENT_END_REASON_DELETED }));
    expect(o.code).toBe(status.FAILED_PRECONDITION);
    expect(o.details).toContain("not a subagent session");
    expect((await alice.getSession({ session: { sessionId: "alice-2" } })).info!.messageCount).toBe(1);
  });

  it("unknown enum values (`compaction_target = 99`) are accepted", async () => {
    const session = { sessionId: "alice-1" };
    const cases: [Promise<Outcome>, string][] = [
      [outcome(alice.compact({ session, tokenBudget: 1000, compactionTarget: 99 as CompactionTarget })), "compaction_target"],
      [
        outcome(alice.prepareSubagentSpawn({ parent: session, child: { sessionId: "enum-child", agentId: "alice" }, contextMode: 99 as SubagentContextMode })),
        "context_mode",
      ],
      [outcome(alice.endSubagent({ child: session, reason: 99 as SubagentEndReason })), "reason"],
      [outcome(alice.appendMessages({ session, messages: [{ ...user("x"), role: 99 as Role }] })), "messages[0].role"],
    ];
    for (const [call, field] of cases) {
      const o = await call;
      expect(o.code, o.details).toBe(status.INVALID_ARGUMENT);
      expect(o.details).toContain(field);
    }
    expect((await outcome(alice.getSession({ session: { sessionId: "enum-child" } }))).code).toBe(status.NOT_FOUND);
  });

  it("a forced compaction that makes the view larger, or compacts nothing, still commits an entry", async () => {
    const session = { sessionId: "tiny", agentId: "alice" };
    await alice.appendMessages({ session, messages: [user("ok")] });
    for (const compactionTarget of [CompactionTarget.COMPACTION_TARGET_BUDGET, CompactionTarget.COMPACTION_TARGET_THRESHOLD]) {
      const res = await alice.compact({ session, tokenBudget: 100_000, force: true, compactionTarget });
      expect(res.compacted).toBe(false);
      expect(res.reason).toMatch(/not committed: no progress/);
    }
    const info = (await alice.getSession({ session })).info!;
    expect([info.entryCount, info.compactionCount]).toEqual([1, 0]);
  });

  it("two invalid-UTF-8 session ids collapse into one session", async () => {
    const append = (id: Buffer) =>
      message(bytes(1, message(bytes(1, id), bytes(3, "alice"))), bytes(2, message(int(2, 1n), bytes(3, message(bytes(1, message(bytes(1, "hi"))))))));
    for (const id of [Buffer.from([0x61, 0xff]), Buffer.from([0x61, 0xfe])]) {
      const o = await rawSessionCall(contextd.address, "AppendMessages", append(id), "alice-token");
      expect(o.code).toBe(status.INVALID_ARGUMENT);
      expect(o.details).toContain("session.session_id is not valid UTF-8");
    }
    for (const [req, field] of [
      [{ session: { sessionId: "utf", sessionKey: "k\ufffd", agentId: "alice" }, messages: hi }, "session.session_key"],
      [{ session: { sessionId: "utf", agentId: "alice\ufffd" }, messages: hi }, "session.agent_id"],
      [{ session: { sessionId: "utf", agentId: "alice" }, messages: hi, idempotencyKey: "\ufffd" }, "idempotency_key"],
    ] as const) {
      const o = await outcome(alice.appendMessages(req));
      expect(o.code).toBe(status.INVALID_ARGUMENT);
      expect(o.details).toContain(field);
    }
  });

  it("25 MB `session_key`s are accepted and then break `ListSessions` for everyone", async () => {
    const huge = "k".repeat(1024 * 1024);
    for (const [session, field] of [
      [{ sessionId: "big-key", sessionKey: huge, agentId: "alice" }, "session.session_key"],
      [{ sessionId: "big-agent", agentId: "a".repeat(257) }, "session.agent_id"],
    ] as const) {
      const o = await outcome(alice.appendMessages({ session, messages: hi }));
      expect(o.code).toBe(status.INVALID_ARGUMENT);
      expect(o.details).toContain(`${field} is longer than 256 characters`);
      expect(o.details.length).toBeLessThan(200);
    }
    expect((await alice.listSessions({})).sessions.map((s) => s.session!.sessionId)).not.toContain("big-key");
  });

  it("error messages echo whole inputs (a 1 MB page token into one log line)", async () => {
    const token = "A".repeat(1024 * 1024);
    for (const call of [alice.listSessions({ pageToken: token }), alice.getTranscript({ session: { sessionId: "alice-1" }, pageToken: token })].map(outcome)) {
      const o = await call;
      expect(o.code).toBe(status.INVALID_ARGUMENT);
      expect(o.details.length).toBeLessThan(200);
    }
    // A refused call is in the access log: wait for this one's line, then look at every line.
    await contextd.waitForLog((l) => String(l.reason ?? "").includes("page_token is 1048576 characters"));
    const longest = Math.max(
      ...contextd
        .logs()
        .split("\n")
        .map((l) => Buffer.byteLength(l)),
    );
    expect(longest).toBeLessThanOrEqual(4096);
  });
});
