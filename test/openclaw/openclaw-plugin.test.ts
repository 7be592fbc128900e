/**
 * The real OpenClaw on contextd: the published `openclaw` package (pinned, under Node 24) loads the
 * plugin in integrations/openclaw through its own plugin loader and slot selection, and runs real
 * agent turns through its own embedded runner (`openclaw agent --local`) against a model server
 * started by the test (the only stand-in). What must hold: the model receives contextd's context;
 * every turn lands in contextd once, also when OpenClaw retries it; overflow recovery compacts in
 * contextd; a contextd restart or outage loses nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppendMessagesRequest } from "../../src/contract/gen/contextd/v1/session.js";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText, textMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import type { ContextdProcess } from "../helpers/contextd-process.js";
import { startLossyProxy } from "./helpers/lossy-proxy.js";
import { contentText, type ModelServer } from "./helpers/model-server.js";
import { OpenClawHome, type TurnResult } from "./helpers/openclaw-home.js";
import type { OpenClawInstall } from "./helpers/openclaw-install.js";
import { startOpenClawStack, stopOpenClawStack } from "./helpers/openclaw-stack.js";

/** What OpenClaw prints when it silently runs a turn on its own engine instead of the slot's. */
const DEGRADED = /degraded to "legacy"/;

describe("OpenClaw 2026.9.6 runs its agent turns on contextd", () => {
  let install: OpenClawInstall;
  let model: ModelServer;
  let contextd: ContextdProcess;
  let home: OpenClawHome;
  let cx: ContextdClient;

  beforeAll(async () => {
    // A short verbatim tail, so that compacting this small conversation really summarizes turns.
    ({ install, model, contextd, cx, home } = await startOpenClawStack({ compaction: { keep_recent_tokens: 200 } }));
  }, 900_000);
  afterAll(() => stopOpenClawStack({ cx, contextd, model, home }));

  const ok = (t: TurnResult) => {
    expect(t.stderr, t.stdout).not.toMatch(DEGRADED);
    expect(t.code, `${t.stdout}\n${t.stderr}`).toBe(0);
    return t;
  };
  const transcriptTexts = async (sessionId: string) => {
    const texts: string[] = [];
    for await (const e of cx.transcript(sessionId)) if (e.entry?.$case === "message") texts.push(`${e.entry.value.role}:${messageText(e.entry.value)}`);
    return texts;
  };

  let sessionId = "";
  const FILLER = "word ".repeat(400);
  it("the plugin loads through OpenClaw's loader and slot; each turn is committed to contextd, once", async () => {
    // The first two turns are long, so that overflow recovery's compaction (below) shrinks the view:
    // a compaction that would not is not committed.
    const first = ok(await home.turn("main-1", `Turn 1 SAY:reply-1 ${FILLER}`));
    expect(first.text).toBe("reply-1");
    sessionId = first.json?.meta?.agentMeta?.sessionId ?? "";
    expect(sessionId).not.toBe("");
    ok(await home.turn("main-1", `Turn 2 SAY:reply-2 ${FILLER}`));
    const texts = await transcriptTexts(sessionId);
    expect(texts.filter((t) => t.includes("Turn 1"))).toHaveLength(1);
    expect(texts.filter((t) => t.includes("Turn 2"))).toHaveLength(1);
    expect(texts.filter((t) => t === `${Role.ROLE_ASSISTANT}:reply-1`)).toHaveLength(1);
    expect(texts.filter((t) => t === `${Role.ROLE_ASSISTANT}:reply-2`)).toHaveLength(1);
    const info = (await cx.getSession({ session: { sessionId } })).info!;
    expect(info.session?.sessionKey).toContain("main-1");
  });

  it("the model is sent contextd's context, not OpenClaw's own transcript", async () => {
    // A note only contextd has: if the model sees it, the context came from contextd.
    await cx.appendMessages({ session: { sessionId }, messages: [textMessage(Role.ROLE_USER, "Remember the codeword ZEBRA-42.")] });
    const before = model.requests().length;
    ok(await home.turn("main-1", "Turn 3 SAY:reply-3"));
    const sent = model
      .requests()
      .slice(before)
      .filter((r) => r.answer === "reply");
    expect(sent.length).toBeGreaterThan(0);
    expect(model.textOf(sent[0])).toContain("ZEBRA-42");
    expect(model.textOf(sent[0])).toContain("Turn 2");
  });

  it("a contextd restart, even a kill -9, between turns loses nothing", async () => {
    const before = await transcriptTexts(sessionId);
    await contextd.kill9();
    contextd = await contextd.restart();
    cx.close();
    cx = new ContextdClient({ address: contextd.address });
    home.writeConfig({ modelBaseUrl: model.baseUrl, plugin: { address: contextd.address } });
    expect(await transcriptTexts(sessionId)).toEqual(before);
    const n = model.requests().length;
    ok(await home.turn("main-1", "Turn 4 SAY:reply-4"));
    const sent = model
      .requests()
      .slice(n)
      .find((r) => r.answer === "reply")!;
    for (const turn of ["Turn 1", "Turn 2", "Turn 3", "ZEBRA-42"]) expect(model.textOf(sent)).toContain(turn);
    const after = await transcriptTexts(sessionId);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.slice(before.length)).toEqual([expect.stringContaining("Turn 4"), `${Role.ROLE_ASSISTANT}:reply-4`]);
  });

  it("while contextd is down the agent keeps answering; when it is back every turn lands once, in order", async () => {
    const address = contextd.address;
    await contextd.stop();
    // Turn 5: assemble falls back to OpenClaw's own history and commitTurn fails, so OpenClaw keeps
    // the turn in its outbox. Turn 6: the outbox still cannot drain, so OpenClaw runs the turn on
    // its built-in engine, which never reaches the plugin.
    const down5 = await home.turn("main-1", "Turn 5 SAY:reply-5");
    expect(down5.code).toBe(0);
    expect(down5.text).toBe("reply-5");
    expect(down5.stderr).toMatch(/contextd: assemble failed/);
    const down6 = await home.turn("main-1", "Turn 6 SAY:reply-6");
    expect(down6.code).toBe(0);
    expect(down6.text).toBe("reply-6");

    contextd = await contextd.restart({ config: { listen: address } });
    cx.close();
    cx = new ContextdClient({ address: contextd.address });
    // Turn 7: OpenClaw commits turn 5 from its outbox; assemble catches up on turn 6.
    ok(await home.turn("main-1", "Turn 7 SAY:reply-7"));
    const texts = await transcriptTexts(sessionId);
    const order = ["Turn 1", "Turn 2", "Turn 3", "Turn 4", "Turn 5", "Turn 6", "Turn 7"].map((t) => texts.findIndex((x) => x.includes(t)));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    for (let i = 1; i <= 7; i++) {
      expect(
        texts.filter((x) => x.includes(`Turn ${i} `)),
        `Turn ${i}`,
      ).toHaveLength(1);
      expect(
        texts.filter((x) => x === `${Role.ROLE_ASSISTANT}:reply-${i}`),
        `reply-${i}`,
      ).toHaveLength(1);
    }
  });

  it("overflow recovery compacts through contextd, and the retried call is sent the compacted context", async () => {
    const info = (await cx.getSession({ session: { sessionId } })).info!;
    const n = model.requests().length;
    const turn = ok(await home.turn("main-1", "Turn 8 SAY:reply-8 OVERFLOW_ONCE:first"));
    expect(turn.text).toBe("reply-8");
    const sent = model.requests().slice(n);
    expect(sent.map((r) => r.answer)).toEqual(["overflow", "reply"]);
    const after = (await cx.getSession({ session: { sessionId } })).info!;
    expect(after.compactionCount).toBe(info.compactionCount + 1);
    // The retry carries contextd's summary in place of the older turns: fewer messages, the first
    // after the system prompt being the summary.
    const [overflowed, retried] = sent.map((r) => r.body.messages ?? []);
    expect(retried.length).toBeLessThan(overflowed.length);
    expect(contentText(retried[1].content)).toContain("compacted into the following summary");
    // The oldest turn is no longer a message of its own (the summary may quote it).
    expect(overflowed.some((m) => /\] Turn 1 SAY/.test(contentText(m.content)))).toBe(true);
    expect(retried.some((m) => /\] Turn 1 SAY/.test(contentText(m.content)))).toBe(false);
  });

  it("a session OpenClaw began without contextd is imported whole on bootstrap, with OpenClaw's entry ids", async () => {
    const earlier = new OpenClawHome(install, { modelBaseUrl: model.baseUrl });
    try {
      const a = await earlier.turn("before-plugin", "Old turn A SAY:old-a");
      expect(a.code, a.stderr).toBe(0);
      const b = await earlier.turn("before-plugin", "Old turn B SAY:old-b");
      expect(b.code, b.stderr).toBe(0);
      const oldSession = b.json?.meta?.agentMeta?.sessionId ?? "";
      await expect(cx.getSession({ session: { sessionId: oldSession } })).rejects.toMatchObject({ code: 5 });

      earlier.writeConfig({ modelBaseUrl: model.baseUrl, plugin: { address: contextd.address } });
      const n = model.requests().length;
      const c = ok(await earlier.turn("before-plugin", "New turn C SAY:new-c"));
      expect(c.stderr).toMatch(/contextd: imported session/);
      const entries: { id: string; text: string }[] = [];
      for await (const e of cx.transcript(oldSession)) entries.push({ id: e.id, text: e.entry?.$case === "message" ? messageText(e.entry.value) : "" });
      // OpenClaw's own entry ids (UUIDs), then the new turn with contextd's.
      const imported = entries.filter((e) => /^[0-9a-f-]{36}$/.test(e.id));
      expect(imported.some((e) => e.text.includes("Old turn A"))).toBe(true);
      expect(imported.some((e) => e.text === "old-b")).toBe(true);
      expect(entries.filter((e) => e.text.includes("New turn C"))).toHaveLength(1);
      const sent = model
        .requests()
        .slice(n)
        .find((r) => r.answer === "reply")!;
      expect(model.textOf(sent)).toContain("Old turn A");
    } finally {
      earlier.cleanup();
    }
  });

  it("a turn whose commit landed but whose answer was lost is retried by OpenClaw and lands once", async () => {
    let armed = true;
    const proxy = await startLossyProxy(contextd.address, (method, req) => {
      const key = (req as AppendMessagesRequest).idempotencyKey ?? "";
      if (!armed || !method.endsWith("/AppendMessages") || !key.startsWith("openclaw:turn:")) return false;
      armed = false;
      return true;
    });
    try {
      home.writeConfig({ modelBaseUrl: model.baseUrl, plugin: { address: proxy.address } });
      const lostTurn = await home.turn("main-1", "Turn 9 SAY:reply-9");
      expect(lostTurn.code).toBe(0);
      expect(proxy.lost()).toEqual(["/contextd.v1.SessionService/AppendMessages"]);
      // contextd has turn 9 already; OpenClaw believes it is not committed and retries it before turn 10.
      ok(await home.turn("main-1", "Turn 10 SAY:reply-10"));
      const texts = await transcriptTexts(sessionId);
      for (const t of ["Turn 9 ", "Turn 10 "])
        expect(
          texts.filter((x) => x.includes(t)),
          t,
        ).toHaveLength(1);
      expect(texts.filter((x) => x === `${Role.ROLE_ASSISTANT}:reply-9`)).toHaveLength(1);
      expect(texts.findIndex((x) => x.includes("Turn 9 "))).toBeLessThan(texts.findIndex((x) => x.includes("Turn 10 ")));
    } finally {
      home.writeConfig({ modelBaseUrl: model.baseUrl, plugin: { address: contextd.address } });
      await proxy.close();
    }
  });
});
