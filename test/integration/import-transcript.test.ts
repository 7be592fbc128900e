import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText, textMessage, toolCallIds } from "../../src/contract/messages.js";
import { fromContextdMessage } from "../../src/openclaw/agent-message.js";
import { codingSession } from "../fixtures/coding-session.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { refusal } from "../helpers/registry-client.js";

/** contextctl, built (`npm run build`), run as a child process. */
const CONTEXTCTL = resolve(import.meta.dirname, "../../bin/contextctl.js");

function contextctl(address: string, ...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = { ...process.env };
  for (const key of ["CONTEXTD_ADDRESS", "CONTEXTD_RUNTIME_TOKEN", "CONTEXTD_CONFIG"]) delete env[key];
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [CONTEXTCTL, "--address", address, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let [stdout, stderr] = ["", ""];
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

const FIXTURES = resolve(import.meta.dirname, "../fixtures/openclaw");
const SAMPLE_V4 = readFileSync(join(FIXTURES, "sample-v4.jsonl"), "utf8");
const SAMPLE_V3 = readFileSync(join(FIXTURES, "sample-v3.jsonl"), "utf8");
const lines = (text: string) =>
  text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const byId = (text: string) =>
  new Map(
    lines(text)
      .slice(1)
      .map((e) => [e.id as string, e]),
  );

/** The model context OpenClaw 2026.9.6 builds from each sample (its SessionManager, recorded when the samples were made). */
const OPENCLAW_CONTEXT = {
  v4: [
    "compactionSummary",
    "branchSummary",
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "custom",
    "user",
    "assistant",
    "toolResult",
    "assistant",
  ],
  v3: ["compactionSummary", "branchSummary", "user", "assistant", "toolResult", "bashExecution", "custom", "custom", "user", "assistant", "toolResult"],
};

/** A small OpenClaw session file: a header, 5 messages (a tool call and its result) and other entries. */
function openClawSession(): string {
  const t0 = 1_700_000_000_000;
  const iso = (n: number) => new Date(t0 + n).toISOString();
  const rows = [
    { type: "session", version: 4, id: "oc-1", timestamp: iso(0), cwd: "/repo" },
    { type: "model_change", id: "a1", parentId: null, timestamp: iso(0), provider: "anthropic", modelId: "claude" },
    {
      type: "message",
      id: "m1",
      parentId: "a1",
      timestamp: iso(1),
      message: { role: "user", content: [{ type: "text", text: "List the files in src." }], timestamp: t0 + 1 },
    },
    {
      type: "message",
      id: "m2",
      parentId: "m1",
      timestamp: iso(2),
      message: {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "I should run ls.", thinkingSignature: "sig" },
          { type: "text", text: "Let me look." },
          { type: "toolCall", id: "call_1", name: "bash", arguments: { command: "ls src" } },
        ],
        api: "anthropic-messages",
        provider: "anthropic",
        model: "claude",
        usage: {
          input: 10,
          output: 5,
          cacheRead: 0,
          cacheWrite: 0,
          totalTokens: 15,
          cost: { input: 0.01, output: 0.02, cacheRead: 0, cacheWrite: 0, total: 0.03 },
        },
        stopReason: "toolUse",
        timestamp: t0 + 2,
      },
    },
    {
      type: "message",
      id: "m3",
      parentId: "m2",
      timestamp: iso(3),
      message: {
        role: "toolResult",
        toolCallId: "call_1",
        toolName: "bash",
        content: [{ type: "text", text: "a.ts\nb.ts" }],
        details: { exitCode: 0 },
        isError: false,
        timestamp: t0 + 3,
      },
    },
    { type: "custom", customType: "note", data: { anything: true }, id: "c1", parentId: "m3", timestamp: iso(3) },
    {
      type: "message",
      id: "m4",
      parentId: "c1",
      timestamp: iso(4),
      message: { role: "custom", customType: "ci-watch", content: "CI is green.", display: true, timestamp: t0 + 4 },
    },
    { type: "message", id: "m5", parentId: "m4", timestamp: iso(5), message: { role: "user", content: "Thanks!", timestamp: t0 + 5 } },
  ];
  return `${rows.map((l) => JSON.stringify(l)).join("\n")}\n`;
}

describe("ImportTranscript / ExportTranscript: OpenClaw session files, entry for entry", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  let dir: string;

  beforeAll(async () => {
    contextd = await startContextd();
    cx = new ContextdClient({ address: contextd.address });
    dir = mkdtempSync(join(tmpdir(), "contextd-import-"));
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const [version, file] of [
    ["v4", SAMPLE_V4],
    ["v3", SAMPLE_V3],
  ] as const) {
    it(`${version} sample: every entry type, an abandoned branch, a reset and a compaction → the view OpenClaw builds; export reproduces every entry`, async () => {
      const session = { sessionId: `sample-${version}`, agentId: "main" };
      const rows = lines(file);
      const res = await cx.importTranscript({ session, jsonl: Buffer.from(file) });
      expect(res.importedEntries).toBe(rows.length - 1);
      expect(res.activeMessages).toBe(OPENCLAW_CONTEXT[version].length);

      // The whole tree is kept: ids, parent ids, every branch.
      const entries = (await cx.getTranscript({ session, pageSize: 1000 })).entries;
      expect(entries.map((e) => e.id)).toEqual(rows.slice(1).map((r) => r.id));
      expect(entries.map((e) => e.parentId)).toEqual(rows.slice(1).map((r) => (r.parentId as string | null) ?? ""));
      const hidden = entries.filter((e) => e.hidden).map((e) => e.id);
      const file4 = byId(file);
      // The abandoned branch (U2 → A4 → TR3 → A5) is hidden; in v3 the leaf row also leaves A8 behind.
      for (const id of hidden) expect(file4.get(id)).toBeDefined();
      expect(hidden.length).toBeGreaterThanOrEqual(4);

      // The model sees what OpenClaw itself would show.
      const assembled = await cx.assemble({ session, tokenBudget: 200_000 });
      expect(assembled.messages.map((m) => fromContextdMessage(m).role)).toEqual(OPENCLAW_CONTEXT[version]);
      expect(assembled.messages.every((m) => !hidden.includes(m.id))).toBe(true);

      // Export: the header and every entry come back deep-equal, in order.
      const exported = await cx.exportTranscript({ session });
      expect(exported.entries).toBe(rows.length - 1);
      expect(lines(Buffer.from(exported.jsonl).toString("utf8"))).toEqual(rows);
    });
  }

  it("appends after an import follow the file's leaf, and come out in the export", async () => {
    const session = { sessionId: "sample-v3-continued" };
    await cx.importTranscript({ session, jsonl: Buffer.from(SAMPLE_V3) });
    const leaf = (lines(SAMPLE_V3).at(-1) as { targetId: string }).targetId;
    const appended = await cx.appendMessages({ session, messages: [textMessage(Role.ROLE_USER, "And now the tests?")] });
    const last = (await cx.getTranscript({ session, pageSize: 1000 })).entries.at(-1)!;
    expect(last).toMatchObject({ id: appended.entryIds[0], parentId: leaf, hidden: false });
    const assembled = await cx.assemble({ session, tokenBudget: 200_000 });
    expect(assembled.messages.map((m) => m.id).at(-1)).toBe(appended.entryIds[0]);
    const out = lines(Buffer.from((await cx.exportTranscript({ session })).jsonl).toString("utf8"));
    expect(out.at(-1)).toMatchObject({
      type: "message",
      id: appended.entryIds[0],
      parentId: leaf,
      message: { role: "user", content: [{ type: "text", text: "And now the tests?" }] },
    });
  });

  it("a session begun in contextd exports as a version-4 file: header, message entries in a chain, compactions", async () => {
    const session = { sessionId: "native-1" };
    const conversation = codingSession({ turns: 8, seed: 3 }).messages;
    await cx.appendMessages({ session, messages: conversation });
    const compacted = await cx.compact({ session, tokenBudget: 4_000, force: true });
    expect(compacted.compacted).toBe(true);
    const out = lines(Buffer.from((await cx.exportTranscript({ session })).jsonl).toString("utf8"));
    expect(out[0]).toMatchObject({ type: "session", version: 4, id: "native-1" });
    const entries = out.slice(1);
    expect(entries.map((e) => e.type)).toEqual([...conversation.map(() => "message"), "compaction"]);
    entries.forEach((e, i) => expect(e.parentId).toBe(i === 0 ? null : entries[i - 1].id));
    for (const e of entries) expect(e.timestamp).toMatch(/^\d{4}-\d\d-\d\dT.*Z$/);
    const compaction = entries.at(-1)!;
    expect(compaction).toMatchObject({ summary: compacted.result!.summary, tokensBefore: compacted.result!.tokensBefore });
    expect(entries.some((e) => e.id === compaction.firstKeptEntryId)).toBe(true);
    for (const e of entries.slice(0, -1)) expect(["user", "assistant", "toolResult", "custom"]).toContain((e.message as { role: string }).role);
    // What OpenClaw requires of an assistant message is there.
    const assistant = entries.find((e) => (e.message as { role?: string })?.role === "assistant")!.message as Record<string, unknown>;
    expect(assistant).toMatchObject({ stopReason: expect.any(String), usage: expect.objectContaining({ totalTokens: expect.any(Number) }) });
  });

  it("a custom-role message, branch summaries and every entry type import; a second import is ALREADY_EXISTS", async () => {
    const session = { sessionId: "imported-1", agentId: "agent-x" };
    const res = await cx.importTranscript({ session, jsonl: Buffer.from(openClawSession()) });
    expect(res).toMatchObject({ importedEntries: 7, leafEntryId: "m5", activeMessages: 5 });
    const page = await cx.getTranscript({ session: { sessionId: "imported-1" }, pageSize: 100 });
    const messages = page.entries.flatMap((e) => (e.entry?.$case === "message" ? [e.entry.value] : []));
    expect(messages.map((m) => m.role)).toEqual([Role.ROLE_USER, Role.ROLE_ASSISTANT, Role.ROLE_TOOL_RESULT, Role.ROLE_CUSTOM, Role.ROLE_USER]);
    expect(toolCallIds(messages[1])).toEqual(["call_1"]);
    expect(messages[1]).toMatchObject({
      api: "anthropic-messages",
      provider: "anthropic",
      model: "claude",
      stopReason: "toolUse",
      usage: { total: 15, cost: { total: 0.03 } },
    });
    expect(messages[2]).toMatchObject({ toolCallId: "call_1", toolName: "bash", detailsJson: '{"exitCode":0}' });
    expect(messages[3]).toMatchObject({ customType: "ci-watch", contentIsText: true });
    expect(messageText(messages[4])).toBe("Thanks!");
    for (const m of messages) expect(m.tokenCount).toBeGreaterThan(0);
    expect(page.entries.map((e) => e.entry?.$case)).toEqual(["runtime", "message", "message", "message", "custom", "message", "message"]);

    const info = (await cx.getSession({ session: { sessionId: "imported-1" } })).info!;
    expect(info).toMatchObject({ messageCount: 5, entryCount: 7 });
    expect(info.session?.agentId).toBe("agent-x");
    expect(info.totalTokens).toBe(messages.reduce((sum, m: Message) => sum + m.tokenCount, 0));

    const again = await refusal(cx.importTranscript({ session, jsonl: Buffer.from(openClawSession()) }));
    expect(again.code).toBe(status.ALREADY_EXISTS);
    expect((await cx.getTranscript({ session: { sessionId: "imported-1" }, pageSize: 100 })).entries).toHaveLength(7);
  });

  it("a malformed line → INVALID_ARGUMENT naming its line number, and nothing is written", async () => {
    const rows = openClawSession().trimEnd().split("\n");
    const cases: [string, string, string][] = [
      ["not JSON", [...rows.slice(0, 3), "{oops", ...rows.slice(3)].join("\n"), "jsonl line 4: invalid JSON"],
      ["not an object", [...rows, "[1,2]"].join("\n"), `jsonl line ${rows.length + 1}: a line must be a JSON object`],
      [
        "no id",
        [...rows, JSON.stringify({ type: "message", parentId: "m5", message: { role: "user", content: "x" } })].join("\n"),
        `jsonl line ${rows.length + 1}: an entry needs a non-empty string "id"`,
      ],
      [
        "a duplicate id",
        [...rows, JSON.stringify({ type: "label", id: "m2", parentId: "m5", targetId: "m1", label: "x" })].join("\n"),
        `jsonl line ${rows.length + 1}: entry id "m2" is used on line 4 too`,
      ],
      [
        "an empty user message",
        [...rows, JSON.stringify({ type: "message", id: "m6", parentId: "m5", message: { role: "user", content: [], timestamp: 1 } })].join("\n"),
        `jsonl line ${rows.length + 1}: message.content is empty`,
      ],
      [
        "an old version",
        [JSON.stringify({ type: "session", version: 2, id: "x" }), ...rows.slice(1)].join("\n"),
        "jsonl line 1: session version 2 is not supported",
      ],
      ["no header", rows.slice(1).join("\n"), "jsonl line 1"],
    ];
    for (const [what, jsonl, message] of cases) {
      const err = await refusal(cx.importTranscript({ session: { sessionId: "bad-1" }, jsonl: Buffer.from(jsonl) }));
      expect(err.code, what).toBe(status.INVALID_ARGUMENT);
      expect(err.details, what).toContain(message);
    }
    expect((await refusal(cx.getSession({ session: { sessionId: "bad-1" } }))).code).toBe(status.NOT_FOUND);
  });

  it("no session id or an empty file → INVALID_ARGUMENT; ExportTranscript of an unknown session → NOT_FOUND", async () => {
    const noId = await refusal(cx.importTranscript({ session: { sessionId: "" }, jsonl: Buffer.from(openClawSession()) }));
    expect(noId.code).toBe(status.INVALID_ARGUMENT);
    expect(noId.details).toContain("session.session_id");
    const empty = await refusal(cx.importTranscript({ session: { sessionId: "empty-1" }, jsonl: Buffer.from("\n\n") }));
    expect(empty.code).toBe(status.INVALID_ARGUMENT);
    expect((await refusal(cx.getSession({ session: { sessionId: "empty-1" } }))).code).toBe(status.NOT_FOUND);
    expect((await refusal(cx.exportTranscript({ session: { sessionId: "nobody" } }))).code).toBe(status.NOT_FOUND);
  });

  it("a file of conversation lines (no OpenClaw header) still imports, one message per line", async () => {
    const jsonl = [
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello", tool_calls: [{ id: "c1", name: "ls", arguments: {} }] },
      { role: "tool", tool_call_id: "c1", content: "a.ts" },
    ]
      .map((l) => JSON.stringify(l))
      .join("\n");
    const res = await cx.importTranscript({ session: { sessionId: "lines-1" }, jsonl: Buffer.from(jsonl) });
    expect(res).toMatchObject({ importedEntries: 3, activeMessages: 3 });
  });

  it("contextctl import FILE / export ID: session id from the file name; --session overrides; the export is the file", async () => {
    const file = join(dir, "from-cli.jsonl");
    writeFileSync(file, openClawSession());
    const first = await contextctl(contextd.address, "import", file);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("imported 7 entries into session from-cli");
    expect((await cx.getSession({ session: { sessionId: "from-cli" } })).info!.messageCount).toBe(5);

    const named = await contextctl(contextd.address, "--json", "import", file, "--session", "cli-named", "--agent", "agent-y");
    expect(named.code).toBe(0);
    expect(JSON.parse(named.stdout)).toMatchObject({ sessionId: "cli-named", importedEntries: 7, leafEntryId: "m5" });
    expect((await cx.getSession({ session: { sessionId: "cli-named" } })).info!.session?.agentId).toBe("agent-y");

    const again = await contextctl(contextd.address, "import", file);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("ALREADY_EXISTS");

    const out = join(dir, "exported.jsonl");
    const exported = await contextctl(contextd.address, "export", "cli-named", "-o", out);
    expect(exported.stderr).toContain("exported 7 entries");
    expect(exported.code).toBe(0);
    expect(lines(readFileSync(out, "utf8"))).toEqual(lines(openClawSession()));
    const toStdout = await contextctl(contextd.address, "export", "cli-named");
    expect(lines(toStdout.stdout)).toEqual(lines(openClawSession()));
  });
});

describe("ImportTranscript: limits", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  beforeAll(async () => {
    contextd = await startContextd({ config: { limits: { max_session_entries: 3 } } });
    cx = new ContextdClient({ address: contextd.address });
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
  });

  it("more entries than limits.max_session_entries → RESOURCE_EXHAUSTED; nothing written", async () => {
    const err = await refusal(cx.importTranscript({ session: { sessionId: "big" }, jsonl: Buffer.from(openClawSession()) }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("limits.max_session_entries");
    expect((await refusal(cx.getSession({ session: { sessionId: "big" } }))).code).toBe(status.NOT_FOUND);
  });
});
