import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { textMessage, toolCallBlock } from "../../src/contract/messages.js";
import { Role, TranscriptEntry, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { delegateCompactionToHost, serveEngine, type RunningEngine } from "../../src/sdk/engine-sdk.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { contextctl, int, jsonLines, tables } from "./run-contextctl.js";

/**
 * `contextctl context`, `transcript` and `export` (the built CLI as a child process) checked against
 * what the same contextd answers to GetSession, GetTranscript and ExportTranscript. A sidecar made
 * here with the engine SDK serves the agent `cli-agent`: it adds a message of its own and a system
 * prompt addition, so every section and both ways of counting tokens appear.
 */
const SAMPLE_V4 = resolve(import.meta.dirname, "../fixtures/openclaw/sample-v4.jsonl");
const ADDITION = "Always answer in French, and keep answers short.";

/** One coding turn: a request, a tool call, its result, an answer (about 600 tokens). */
function turn(t: number): Message[] {
  const source = Array.from({ length: 25 }, (_, i) => `export const v${i} = ${i * t}; // line ${i}`).join("\n");
  return [
    textMessage(Role.ROLE_USER, `Turn ${t}: explain src/mod${t}.ts. ${"Background on the task. ".repeat(20)}`),
    textMessage(Role.ROLE_ASSISTANT, "", { content: [toolCallBlock(`call_${t}`, "read_file", JSON.stringify({ path: `src/mod${t}.ts` }))] }),
    textMessage(Role.ROLE_TOOL_RESULT, source, { toolCallId: `call_${t}`, toolName: "read_file" }),
    textMessage(Role.ROLE_ASSISTANT, `Module ${t} exports constants. ${"It is simple. ".repeat(15)}`),
  ];
}

/** The active view GetTranscript implies: the latest compaction's summary, then the visible messages from its first kept entry on. */
function activeView(entries: TranscriptEntry[]): { summaryId?: string; messageIds: string[]; tokens: number[] } {
  const visible = entries.filter((e) => !e.hidden);
  const compaction = visible.filter((e) => e.entry?.$case === "compaction").at(-1);
  let from = 0;
  if (compaction?.entry?.$case === "compaction") {
    const first = compaction.entry.value.firstKeptEntryId;
    from = first ? visible.find((e) => e.id === first)!.seq : compaction.seq;
  }
  const messages = visible.filter((e) => e.entry?.$case === "message" && e.seq >= from);
  return {
    summaryId: compaction?.id,
    messageIds: messages.map((e) => e.id),
    tokens: messages.map((e) => (e.entry?.$case === "message" ? e.entry.value.tokenCount : 0)),
  };
}

describe("contextctl context / transcript / export against a real contextd", () => {
  let server: ContextdProcess;
  let cx: ContextdClient;
  let engine: RunningEngine;
  let dir: string;
  const all = async (sessionId: string) => (await cx.getTranscript({ session: { sessionId }, pageSize: 5000 })).entries;
  const info = async (sessionId: string) => (await cx.getSession({ session: { sessionId } })).info!;

  beforeAll(async () => {
    server = await startContextd({
      config: { slots: { agents: { "cli-agent": "cli-addition" } }, compaction: { reserve_tokens: 100, keep_recent_tokens: 600 } },
    });
    cx = new ContextdClient({ address: server.address });
    dir = mkdtempSync(join(tmpdir(), "contextctl-inspect-"));
    engine = await serveEngine(
      {
        info: { id: "cli-addition", name: "adds a note and a system prompt addition", version: "1.0.0" },
        assemble: (req) => ({
          messages: [...req.messages, textMessage(Role.ROLE_USER, "Engine note: the user prefers short answers.")],
          systemPromptAddition: ADDITION,
        }),
        compact: delegateCompactionToHost,
      },
      { registry: server.address, owner: "cli-test", handleSignals: false, logger: pino({ level: "silent" }) },
    );
    await engine.registered;
    const session = { sessionId: "cli-inspect" };
    for (let t = 0; t < 4; t++) await cx.appendMessages({ session, messages: turn(t) });
    expect((await cx.compact({ session, tokenBudget: 1500, force: true })).compacted).toBe(true);
    await cx.appendMessages({ session, messages: turn(4) });
    for (let t = 0; t < 8; t++) await cx.appendMessages({ session: { sessionId: "cli-grow" }, messages: turn(t) });
    for (let t = 0; t < 2; t++) await cx.appendMessages({ session: { sessionId: "cli-engine", agentId: "cli-agent" }, messages: turn(t) });
    expect((await contextctl(server.address, "import", SAMPLE_V4, "--session", "cli-sample")).code).toBe(0);
  });

  afterAll(async () => {
    await engine?.stop({ deregister: false });
    cx?.close();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("context --json is the active view, token for token, and matches GetSession's overview; nothing changes", async () => {
    const before = await info("cli-inspect");
    const run = await contextctl(server.address, "--json", "context", "cli-inspect", "--budget", "100000");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const ctx = JSON.parse(run.stdout);
    expect(ctx).toMatchObject({ engineId: "legacy", mode: "NORMAL", promptAuthority: "ASSEMBLED", autoCompact: false, compaction: null, budget: 100000 });
    expect(ctx.systemPromptAddition).toEqual({ text: "", tokens: 0 });
    const view = activeView(await all("cli-inspect"));
    expect(view.summaryId).toBeDefined();
    expect(ctx.messages.map((m: { id: string }) => m.id)).toEqual([view.summaryId, ...view.messageIds]);
    expect(ctx.messages[0]).toMatchObject({ index: 1, section: "summary", role: "user", tokensCountedBy: "host" });
    expect(ctx.messages.slice(1).map((m: { tokens: number }) => m.tokens)).toEqual(view.tokens);
    expect(ctx.messages.filter((m: { section: string }) => m.section === "tool_result").map((m: { role: string }) => m.role)).toEqual([
      "tool_result",
      "tool_result",
    ]);
    const after = await info("cli-inspect");
    expect(ctx.sections).toEqual(after.overview);
    expect(ctx.estimatedTokens).toBe(after.activeTokens);
    expect(ctx.sections.totalTokens).toBe(ctx.estimatedTokens);
    expect([after.entryCount, after.compactionCount]).toEqual([before.entryCount, before.compactionCount]);

    // The same on a table: one row per message, then the totals by section.
    const text = await contextctl(server.address, "context", "cli-inspect", "--budget", "100000");
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^engine\s+legacy, mode NORMAL$/m);
    const [items, totals] = tables(text.stdout);
    expect(items.map((r) => [int(r[0]), r[1], r[2], r[3], int(r[4])])).toEqual(
      ctx.messages.map((m: { index: number; section: string; role: string; id: string; tokens: number }) => [
        m.index,
        { summary: "summary", message: "messages", tool_result: "tool results" }[m.section],
        m.role,
        m.id,
        m.tokens,
      ]),
    );
    const o = after.overview!;
    expect(totals.map((r) => [r[0], int(r[2])])).toEqual([
      ["summary", o.summaryTokens],
      ["messages", o.messageTokens],
      ["tool results", o.toolResultTokens],
      ["system addition", 0],
      ["total", o.totalTokens],
    ]);
    // --full prints each message whole, the summary under its rule.
    const full = await contextctl(server.address, "context", "cli-inspect", "--budget", "100000", "--full");
    expect(full.stdout).toContain(`── 1 · summary · user · ${view.summaryId} · `);
    expect(full.stdout).toContain("<summary>");
  });

  it("context over the budget: shown as it is without --compact; --compact compacts as a turn would", async () => {
    const before = await info("cli-grow");
    const inspect = JSON.parse((await contextctl(server.address, "--json", "context", "cli-grow", "--budget", "2000")).stdout);
    expect(inspect).toMatchObject({ mode: "DEGRADED", promptAuthority: "PREASSEMBLY_MAY_OVERFLOW", compaction: null, autoCompact: false });
    expect(inspect.fallbackReason).toContain("auto_compact is off");
    expect(inspect.estimatedTokens).toBe(before.activeTokens);
    expect(inspect.estimatedTokens).toBeGreaterThan(2000);
    const unchanged = await info("cli-grow");
    expect([unchanged.entryCount, unchanged.compactionCount]).toEqual([before.entryCount, 0]);

    const run = await contextctl(server.address, "--json", "context", "cli-grow", "--budget", "2000", "--compact");
    expect(run.code).toBe(0);
    const compacted = JSON.parse(run.stdout);
    expect(compacted).toMatchObject({ engineId: "legacy", mode: "NORMAL", autoCompact: true, compaction: { tokensBefore: before.activeTokens } });
    expect(compacted.estimatedTokens).toBeLessThanOrEqual(2000);
    expect(compacted.messages[0].section).toBe("summary");
    const after = await info("cli-grow");
    expect(after.compactionCount).toBe(1);
    expect(compacted.sections).toEqual(after.overview);
  });

  it("context routes by the session's agent: the sidecar's message and system prompt addition, counted", async () => {
    const run = await contextctl(server.address, "--json", "context", "cli-engine", "--budget", "100000");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const ctx = JSON.parse(run.stdout);
    expect(ctx).toMatchObject({ engineId: "cli-addition", mode: "NORMAL", session: { sessionId: "cli-engine", agentId: "cli-agent" } });
    const overview = (await info("cli-engine")).overview!;
    expect(ctx.systemPromptAddition).toEqual({ text: ADDITION, tokens: overview.systemAdditionTokens });
    expect(overview.systemAdditionTokens).toBeGreaterThan(0);
    const note = ctx.messages.at(-1);
    expect(note).toMatchObject({
      section: "message",
      role: "user",
      id: "",
      tokensCountedBy: "contextctl",
      text: "Engine note: the user prefers short answers.",
    });
    expect(note.tokens).toBeGreaterThan(4);
    expect(ctx.messages.slice(0, -1).every((m: { tokensCountedBy: string }) => m.tokensCountedBy === "host")).toBe(true);
    // The host counts the engine's message with the same tokenizer (o200k_base) for estimated_tokens.
    expect(ctx.estimatedTokens).toBe(ctx.messages.reduce((sum: number, m: { tokens: number }) => sum + m.tokens, 0));
    expect(ctx.sections.totalTokens).toBe(ctx.estimatedTokens + overview.systemAdditionTokens);
    expect(ctx.sections.systemAdditionTokens).toBe(overview.systemAdditionTokens);

    const text = await contextctl(server.address, "context", "cli-engine", "--budget", "100000");
    const [items] = tables(text.stdout);
    expect(items[0].slice(0, 5)).toEqual(["-", "system addition", "system", "-", String(overview.systemAdditionTokens)]);
    expect(items[0][5]).toBe(ADDITION);
    expect(items.at(-1)!.slice(3, 5)).toEqual(["-", `~${note.tokens}`]);
  });

  it("transcript --json pages through the whole history: GetTranscript's entries, one per line", async () => {
    const entries = await all("cli-grow");
    const run = await contextctl(server.address, "--json", "transcript", "cli-grow", "--page-size", "7");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(entries.length).toBeGreaterThan(7 * 3);
    expect(jsonLines(run.stdout).map((l) => TranscriptEntry.fromJSON(l))).toEqual(entries);
  });

  it("transcript: one row per entry — seq, id, parent, type, hidden, tokens — on every branch", async () => {
    const entries = await all("cli-sample");
    expect(entries.some((e) => e.hidden)).toBe(true);
    const run = await contextctl(server.address, "transcript", "cli-sample", "--page-size", "4");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const [rows] = tables(run.stdout);
    const type = (e: TranscriptEntry) => {
      const x = e.entry!;
      if (x.$case === "message")
        return (
          e.runtimeType ||
          { 1: "user", 2: "assistant", 3: "tool_result", 4: "system", 5: "custom", 6: "bash_execution", 7: "branch_summary", 8: "compaction_summary" }[
            x.value.role as number
          ]
        );
      return x.$case === "runtime" ? x.value.type : x.$case;
    };
    expect(rows.map((r) => r.slice(0, 6))).toEqual(
      entries.map((e) => [
        String(e.seq),
        e.id,
        e.parentId || "-",
        type(e),
        e.hidden ? "yes" : "no",
        e.entry?.$case === "message" ? e.entry.value.tokenCount.toLocaleString("en-US") : "",
      ]),
    );
    expect(rows.map((r) => r[3])).toEqual(expect.arrayContaining(["compaction", "custom", "model_change", "user", "assistant", "tool_result"]));
    const hidden = entries.filter((e) => e.hidden).length;
    const messages = entries.filter((e) => e.entry?.$case === "message").length;
    const compactions = entries.filter((e) => e.entry?.$case === "compaction").length;
    expect(run.stdout).toMatch(
      new RegExp(
        `\\n${entries.length} entries: ${messages} messages, ${compactions} compactions, ${hidden} hidden; [\\d,]+ tokens in messages that are not hidden\\n$`,
      ),
    );
  });

  it("export --json: the file's lines parsed, or with -o the facts about the file written", async () => {
    const server_ = await cx.exportTranscript({ session: { sessionId: "cli-sample" } });
    const run = await contextctl(server.address, "--json", "export", "cli-sample");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const out = JSON.parse(run.stdout);
    expect(out).toEqual({
      sessionId: "cli-sample",
      entries: server_.entries,
      bytes: server_.jsonl.length,
      lines: jsonLines(Buffer.from(server_.jsonl).toString()),
    });
    expect(out.lines).toEqual(jsonLines(readFileSync(SAMPLE_V4, "utf8")));
    const file = join(dir, "out.jsonl");
    const written = await contextctl(server.address, "--json", "export", "cli-sample", "-o", file);
    expect(written).toMatchObject({ code: 0, stderr: "" });
    expect(JSON.parse(written.stdout)).toEqual({ sessionId: "cli-sample", entries: server_.entries, bytes: server_.jsonl.length, file });
    expect(readFileSync(file)).toEqual(Buffer.from(server_.jsonl));
  });

  it("an unknown session: exit 1 with NOT_FOUND and nothing on stdout", async () => {
    for (const args of [
      ["context", "nobody", "--budget", "1000"],
      ["transcript", "nobody"],
      ["--json", "transcript", "nobody"],
      ["export", "nobody"],
    ]) {
      const run = await contextctl(server.address, ...args);
      expect(run, args.join(" ")).toMatchObject({ code: 1, stdout: "" });
      expect(run.stderr, args.join(" ")).toMatch(/^contextctl: NOT_FOUND: /);
    }
  });
});
