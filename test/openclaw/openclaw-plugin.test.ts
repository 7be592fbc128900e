/**
 * The real OpenClaw on contextd: the published `openclaw` package (pinned, under Node 24) loads the
 * plugin in integrations/openclaw through its own plugin loader and slot selection, and runs real
 * agent turns through its own embedded runner (`openclaw agent --local`) against a model server
 * started by the test (the only stand-in). What must hold: the model receives contextd's context;
 * every turn lands in contextd once, also when OpenClaw retries it; overflow recovery compacts in
 * contextd; a contextd restart or outage loses nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText, textMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startModelServer, type ModelServer } from "./helpers/model-server.js";
import { OpenClawHome, type TurnResult } from "./helpers/openclaw-home.js";
import { ensureOpenClaw, type OpenClawInstall } from "./helpers/openclaw-install.js";

/** What OpenClaw prints when it silently runs a turn on its own engine instead of the slot's. */
const DEGRADED = /degraded to "legacy"/;

describe("OpenClaw 2026.9.6 runs its agent turns on contextd", () => {
  let install: OpenClawInstall;
  let model: ModelServer;
  let contextd: ContextdProcess;
  let home: OpenClawHome;
  let cx: ContextdClient;

  beforeAll(async () => {
    install = await ensureOpenClaw();
    model = await startModelServer();
    contextd = await startContextd();
    cx = new ContextdClient({ address: contextd.address });
    home = new OpenClawHome(install, { modelBaseUrl: model.baseUrl, plugin: { address: contextd.address } });
  }, 900_000);
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
    await model?.close();
    home?.cleanup();
  });

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
  it("the plugin loads through OpenClaw's loader and slot; each turn is committed to contextd, once", async () => {
    const first = ok(await home.turn("main-1", "Turn 1 SAY:reply-1"));
    expect(first.text).toBe("reply-1");
    sessionId = first.json?.meta?.agentMeta?.sessionId ?? "";
    expect(sessionId).not.toBe("");
    ok(await home.turn("main-1", "Turn 2 SAY:reply-2"));
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
    const sent = model.requests().slice(before).filter((r) => r.answer === "reply");
    expect(sent.length).toBeGreaterThan(0);
    expect(model.textOf(sent[0])).toContain("ZEBRA-42");
    expect(model.textOf(sent[0])).toContain("Turn 2");
  });
});
