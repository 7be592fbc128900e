/**
 * OpenClaw's `/compact` on contextd: `openclaw sessions compact <key>` (the CLI form of the slash
 * command) asks OpenClaw's Gateway to compact the session, which calls the context engine's
 * compact — for the contextd plugin, SessionService.Compact with OpenClaw's manual-compaction
 * settings (force, the threshold target).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { startModelServer, type ModelServer } from "./helpers/model-server.js";
import { OpenClawHome } from "./helpers/openclaw-home.js";
import { ensureOpenClaw } from "./helpers/openclaw-install.js";

describe("OpenClaw's /compact through the Gateway compacts in contextd", () => {
  let model: ModelServer;
  let contextd: ContextdProcess;
  let home: OpenClawHome;
  let cx: ContextdClient;
  let gateway: { stop(): Promise<void> } | undefined;

  beforeAll(async () => {
    const install = await ensureOpenClaw();
    model = await startModelServer();
    contextd = await startContextd({ config: { compaction: { keep_recent_tokens: 100 } } });
    cx = new ContextdClient({ address: contextd.address });
    home = new OpenClawHome(install, { modelBaseUrl: model.baseUrl, plugin: { address: contextd.address }, gatewayPort: await getFreePort() });
  }, 900_000);
  afterAll(async () => {
    await gateway?.stop();
    cx?.close();
    await contextd?.cleanup();
    await model?.close();
    home?.cleanup();
  });

  it("sessions compact → the plugin's compact → contextd Compact; later turns get the compacted view", async () => {
    // Long enough that a summary is smaller than what it replaces: a compaction that would grow the
    // view is not committed (test/security/session-findings.test.ts).
    const filler = "word ".repeat(400);
    let sessionId = "";
    for (let i = 1; i <= 3; i++) {
      const t = await home.turn("compact-me", `Turn ${i} SAY:reply-${i} ${filler}`);
      expect(t.code, t.stderr).toBe(0);
      sessionId = t.json?.meta?.agentMeta?.sessionId ?? sessionId;
    }
    expect((await cx.getSession({ session: { sessionId } })).info!.compactionCount).toBe(0);

    gateway = await home.startGateway();
    const res = await home.cli(["sessions", "compact", "agent:main:compact-me", "--json"]);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const out = JSON.parse(res.stdout) as { ok?: boolean; compacted?: boolean };
    expect(out).toMatchObject({ ok: true, compacted: true });
    const info = (await cx.getSession({ session: { sessionId } })).info!;
    expect(info.compactionCount).toBe(1);
    const entries = [];
    for await (const e of cx.transcript(sessionId)) entries.push(e);
    const compaction = entries.find((e) => e.entry?.$case === "compaction");
    expect(compaction?.entry?.$case === "compaction" && compaction.entry.value.summary).toContain("Turn 1");

    // The next turn, through the Gateway, is sent contextd's compacted view.
    const n = model.requests().length;
    const next = await home.cli(["agent", "--session-key", "compact-me", "--json", "-m", "Turn 4 SAY:reply-4"]);
    expect(next.code, `${next.stdout}\n${next.stderr}`).toBe(0);
    const sent = model
      .requests()
      .slice(n)
      .find((r) => r.answer === "reply")!;
    expect(model.textOf(sent)).toContain("compacted into the following summary");
    // Five OpenClaw processes and a Gateway under Node 24: ~100 s alone on 2 cores, more in the suite.
  }, 300_000);
});
