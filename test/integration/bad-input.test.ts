import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { assistant, toolCall, toolResult, user } from "../fixtures/messages.js";
import { runContextdUntilExit, startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { occupyPort } from "../helpers/free-port.js";
import { refusal } from "../helpers/registry-client.js";

describe("bad input gets a clear status, loses nothing, and the server stays up", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  const session = { sessionId: "bad-input" };

  beforeAll(async () => {
    contextd = await startContextd({ config: { limits: { max_message_bytes: 64 * 1024, max_messages_per_append: 50 } } });
    cx = new ContextdClient({ address: contextd.address });
    await cx.appendMessages({ session, messages: [user("first"), assistant("ok")] });
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
  });

  it("unknown session → NOT_FOUND naming it", async () => {
    for (const call of [
      cx.assemble({ session: { sessionId: "nope" }, tokenBudget: 1000 }),
      cx.getSession({ session: { sessionId: "nope" } }),
      cx.compact({ session: { sessionId: "nope" }, tokenBudget: 1000 }),
      cx.getTranscript({ session: { sessionId: "nope" } }),
    ]) {
      const err = await refusal(call);
      expect(err.code).toBe(status.NOT_FOUND);
      expect(err.details).toContain('"nope"');
    }
  });

  it("token_budget 0 → INVALID_ARGUMENT naming the field", async () => {
    const err = await refusal(cx.assemble({ session, tokenBudget: 0 }));
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toContain("token_budget");
  });

  it("a message without a role → INVALID_ARGUMENT, and nothing of that batch is written", async () => {
    const err = await refusal(
      cx.appendMessages({ session, messages: [user("valid one"), { content: [{ block: { $case: "text", value: { text: "no role" } } }] }] }),
    );
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toContain("messages[1].role");
    const info = (await cx.getSession({ session })).info!;
    expect(info.messageCount).toBe(2);
  });

  it("a tool result without tool_call_id → INVALID_ARGUMENT", async () => {
    const err = await refusal(
      cx.appendMessages({ session, messages: [{ role: Role.ROLE_TOOL_RESULT, content: [{ block: { $case: "text", value: { text: "x" } } }] }] }),
    );
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toContain("tool_call_id");
  });

  it("a message over the size limit → RESOURCE_EXHAUSTED naming the limit; nothing written", async () => {
    const big = user("x".repeat(100 * 1024));
    const err = await refusal(cx.appendMessages({ session, messages: [user("fine"), big] }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("limits.max_message_bytes");
    expect((await cx.getSession({ session })).info!.messageCount).toBe(2);
  });

  it("too many messages in one append → RESOURCE_EXHAUSTED naming the limit", async () => {
    const err = await refusal(cx.appendMessages({ session, messages: Array.from({ length: 51 }, (_, i) => user(`m${i}`)) }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("limits.max_messages_per_append");
  });

  it("a bad page token → INVALID_ARGUMENT; the server is still up and the session intact", async () => {
    const err = await refusal(cx.getTranscript({ session, pageToken: "garbage" }));
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    await cx.appendMessages({ session, messages: [assistant("", [toolCall("c1", "bash", { cmd: "ls" })]), toolResult("c1", "bash", "a b c")] });
    const res = await cx.assemble({ session, tokenBudget: 4000 });
    expect(res.messages).toHaveLength(4);
  });

  it("ImportTranscript of a bad file → INVALID_ARGUMENT naming the line; no session is created", async () => {
    const jsonl = [
      JSON.stringify({ type: "session", version: 4, id: "imp" }),
      JSON.stringify({ type: "message", id: "m1", parentId: null, message: { role: "user", content: "hi" } }),
      "{not json",
    ].join("\n");
    const err = await refusal(cx.importTranscript({ session: { sessionId: "imp" }, jsonl: Buffer.from(jsonl) }));
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toContain("jsonl line 3");
    expect((await refusal(cx.getSession({ session: { sessionId: "imp" } }))).code).toBe(status.NOT_FOUND);
    const empty = await refusal(cx.importTranscript({ session: { sessionId: "imp" }, jsonl: Buffer.from("") }));
    expect(empty.code).toBe(status.INVALID_ARGUMENT);
    const onExisting = await refusal(cx.importTranscript({ session, jsonl: Buffer.from(JSON.stringify({ role: "user", content: "x" })) }));
    expect(onExisting.code).toBe(status.ALREADY_EXISTS);
  });
});

describe("authentication", () => {
  let contextd: ContextdProcess;
  beforeAll(async () => {
    contextd = await startContextd({
      config: { auth: { required: true, runtimes: [{ token_env: "TEST_RUNTIME_TOKEN", agents: ["agent-a"] }] } },
      env: { TEST_RUNTIME_TOKEN: "runtime-secret" },
    });
  });
  afterAll(async () => {
    await contextd?.cleanup();
  });

  it("no runtime token → UNAUTHENTICATED; a forged one too; the right one works", async () => {
    const anonymous = new ContextdClient({ address: contextd.address });
    const forged = new ContextdClient({ address: contextd.address, token: "guess" });
    const good = new ContextdClient({ address: contextd.address, token: "runtime-secret" });
    const req = { session: { sessionId: "s", agentId: "agent-a" }, messages: [user("hi")] };
    const missing = await refusal(anonymous.appendMessages(req));
    expect(missing.code).toBe(status.UNAUTHENTICATED);
    expect(missing.details).toContain("authorization: Bearer");
    expect((await refusal(forged.appendMessages(req))).code).toBe(status.UNAUTHENTICATED);
    await good.appendMessages(req);
    const otherAgent = await refusal(good.appendMessages({ ...req, session: { sessionId: "s2", agentId: "agent-b" } }));
    expect(otherAgent.code).toBe(status.PERMISSION_DENIED);
    expect(otherAgent.details).toContain("agent-b");
    for (const c of [anonymous, forged, good]) c.close();
  });
});

describe("start-up failures exit non-zero with a one-line reason", () => {
  it("a bad config key", async () => {
    const run = await runContextdUntilExit({ config: { slots: { contxt_engine: "x" } } });
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toContain("slots.contxt_engine");
  });

  it("a port already taken", async () => {
    const taken = await occupyPort();
    try {
      const run = await runContextdUntilExit({ config: { listen: taken.address } });
      expect(run.code).toBe(1);
      expect(run.stderr.trim().split("\n")).toHaveLength(1);
      expect(run.stderr).toContain(taken.address);
    } finally {
      await taken.release();
    }
  });
});

describe("a runtime token limited to some agents", () => {
  let contextd: ContextdProcess;
  let alice: ContextdClient;
  let bob: ContextdClient;

  beforeAll(async () => {
    contextd = await startContextd({
      config: {
        auth: {
          required: true,
          runtimes: [
            { token_env: "ALICE", agents: ["alice"] },
            { token_env: "BOB", agents: ["bob"] },
          ],
        },
      },
      env: { ALICE: "alice-token", BOB: "bob-token" },
    });
    alice = new ContextdClient({ address: contextd.address, token: "alice-token" });
    bob = new ContextdClient({ address: contextd.address, token: "bob-token" });
    await bob.appendMessages({ session: { sessionId: "bob-chat", agentId: "bob" }, messages: [user("my secret")] });
  });
  afterAll(async () => {
    alice?.close();
    bob?.close();
    await contextd?.cleanup();
  });

  it("cannot reach another agent's session by claiming its own agent id", async () => {
    const claimed = { sessionId: "bob-chat", agentId: "alice" };
    // Another agent's session answers as a missing one (test/security/session-findings.test.ts).
    for (const call of [
      alice.getTranscript({ session: claimed }),
      alice.assemble({ session: claimed, tokenBudget: 1000 }),
      alice.deleteSession({ session: claimed }),
    ]) {
      const err = await refusal(call);
      expect(err.code).toBe(status.NOT_FOUND);
      expect(err.details).not.toContain('"bob"');
    }
    expect((await refusal(alice.appendMessages({ session: claimed, messages: [user("intrusion")] }))).code).toBe(status.ALREADY_EXISTS);
    expect((await bob.getSession({ session: { sessionId: "bob-chat" } })).info!.messageCount).toBe(1);
  });

  it("lists only its own agents' sessions", async () => {
    await alice.appendMessages({ session: { sessionId: "alice-chat", agentId: "alice" }, messages: [user("hi")] });
    expect((await alice.listSessions()).sessions.map((s) => s.session!.sessionId)).toEqual(["alice-chat"]);
  });

  it("a forged rollback handle cannot delete a session that is not its own subagent", async () => {
    const forged = Buffer.from(JSON.stringify({ c: "bob-chat", e: "" })).toString("base64url");
    const err = await refusal(alice.rollbackSubagentSpawn({ rollbackHandle: forged }));
    expect(err.code).toBe(status.NOT_FOUND);
    expect((await bob.getSession({ session: { sessionId: "bob-chat" } })).info).toBeDefined();
  });
});
