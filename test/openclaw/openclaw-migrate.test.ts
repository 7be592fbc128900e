/**
 * Moving an existing OpenClaw deployment onto contextd: `contextctl import-openclaw` reads every
 * session of a real OpenClaw 2026.9.6 state directory — sessions written by OpenClaw's own turns into
 * its SQLite store (a long message among them, which OpenClaw stores zstd-compressed), plus a session
 * file in the JSONL layout of older versions — and imports each through ImportTranscript. What
 * contextd then exports is checked against OpenClaw's own reader, row by row; a second run imports
 * nothing; and the plugin, enabled afterwards, neither imports a session again nor appends a message
 * twice.
 */
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromContextdMessage } from "../../src/openclaw/agent-message.js";
import type { ContextdClient } from "../../src/sdk/runtime-client.js";
import { contextctl } from "../cli/run-contextctl.js";
import type { ContextdProcess } from "../helpers/contextd-process.js";
import type { ModelServer } from "./helpers/model-server.js";
import type { OpenClawHome } from "./helpers/openclaw-home.js";
import { startOpenClawStack, stopOpenClawStack } from "./helpers/openclaw-stack.js";

const SAMPLE_V4 = path.resolve(import.meta.dirname, "../fixtures/openclaw/sample-v4.jsonl");

describe("contextctl import-openclaw moves an OpenClaw deployment's sessions into contextd", () => {
  let model: ModelServer;
  let contextd: ContextdProcess;
  let home: OpenClawHome;
  let cx: ContextdClient;
  const sessions: Record<string, string> = {};

  beforeAll(async () => {
    // A deployment that never used contextd: turns on two session keys through OpenClaw alone.
    ({ model, contextd, cx, home } = await startOpenClawStack({}, { plugin: false }));
    for (const [key, prompts] of [
      ["mig-a", ["Hello SAY:a1", `A long one SAY:a2 ${"the invoice rounding rule, once more. ".repeat(60)}`]],
      ["mig-b", ["Read it TOOLS:1:mig SAY:b1"]],
    ] as const) {
      for (const prompt of prompts) {
        const t = await home.turn(key, prompt);
        expect(t.code, t.stderr).toBe(0);
        sessions[key] = t.json?.meta?.agentMeta?.sessionId ?? "";
      }
    }
    // And a session in the layout of versions before 2026.7: sessions.json beside its JSONL file.
    const legacy = path.join(home.stateDir, "agents", "legacy", "sessions");
    mkdirSync(legacy, { recursive: true });
    copyFileSync(SAMPLE_V4, path.join(legacy, "legacy-1.jsonl"));
    writeFileSync(path.join(legacy, "sessions.json"), JSON.stringify({ "agent:legacy:old": { sessionId: "legacy-1", updatedAt: 1 } }));
  }, 900_000);
  afterAll(() => stopOpenClawStack({ cx, contextd, model, home }));

  const run = async (...args: string[]) => {
    const r = await contextctl(contextd.address, "--json", "import-openclaw", "--state-dir", home.stateDir, ...args);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as { imported: number; existing: number; failed: number; sessions: Record<string, unknown>[]; problems: string[] };
  };

  it("imports every session, each as OpenClaw's own reader reads it", async () => {
    const dry = await run("--dry-run");
    expect(dry.sessions).toHaveLength(3);
    expect(await cx.listSessions({})).toMatchObject({ sessions: [] });

    const res = await run();
    expect(res).toMatchObject({ imported: 3, existing: 0, failed: 0, problems: [] });
    for (const key of ["mig-a", "mig-b"]) {
      const sessionId = sessions[key];
      const info = (await cx.getSession({ session: { sessionId } })).info!;
      expect(info.session).toMatchObject({ sessionKey: `agent:main:${key}`, agentId: "main" });
      const rows = await home.transcriptEvents(key, sessionId);
      const exported = (await cx.exportTranscript({ session: { sessionId } })).jsonl;
      const lines = Buffer.from(exported)
        .toString("utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      // Every entry, as OpenClaw reads it (the header is rewritten as version 4 with the same id).
      expect(lines.slice(1)).toEqual(rows.slice(1));
      expect(lines[0]).toMatchObject({ type: "session", id: rows[0].id });
    }
    // The long message was stored compressed by OpenClaw; it came through whole.
    const db = new Database(path.join(home.stateDir, "agents/main/agent/openclaw-agent.sqlite"), { readonly: true });
    const compressed = db.prepare("SELECT count(*) FROM transcript_events WHERE session_id = ? AND event_zstd IS NOT NULL").pluck().get(sessions["mig-a"]);
    db.close();
    expect(compressed).toBeGreaterThan(0);
    const a = (await cx.exportTranscript({ session: { sessionId: sessions["mig-a"] } })).jsonl;
    expect(Buffer.from(a).toString("utf8")).toContain("the invoice rounding rule, once more. ".repeat(60).trim());
    const legacy = await cx.exportTranscript({ session: { sessionId: "legacy-1" } });
    const fixture = readFileSync(SAMPLE_V4, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as unknown);
    expect(
      Buffer.from(legacy.jsonl)
        .toString("utf8")
        .trim()
        .split("\n")
        .slice(1)
        .map((l) => JSON.parse(l) as unknown),
    ).toEqual(fixture.slice(1));
    expect((await cx.getSession({ session: { sessionId: "legacy-1" } })).info!.session).toMatchObject({ sessionKey: "agent:legacy:old", agentId: "legacy" });
  });

  it("a second run imports nothing: every session is one contextd has", async () => {
    const res = await run();
    expect(res).toMatchObject({ imported: 0, existing: 3, failed: 0 });
  });

  it("with the plugin enabled afterwards, a session goes on where it was: no second import, no message twice", async () => {
    home.writeConfig({ modelBaseUrl: model.baseUrl, plugin: { address: contextd.address } });
    const t = await home.turn("mig-a", "After the move SAY:a3");
    expect(t.code, t.stderr).toBe(0);
    expect(t.stderr).not.toMatch(/imported session|caught up/);
    const sessionId = sessions["mig-a"];
    const stored = await home.storedMessages("mig-a", sessionId);
    const messages = [];
    for await (const e of cx.transcript(sessionId)) if (e.entry?.$case === "message") messages.push(e);
    expect(messages.map((m) => m.messageKey)).toEqual(stored.map((s) => `openclaw:${s.entryId}`));
    messages.forEach((m, i) => expect(fromContextdMessage(m.entry?.$case === "message" ? m.entry.value : undefined!)).toEqual(stored[i].message));
  });
});
