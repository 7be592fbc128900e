import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText, toolCallIds } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

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

async function refusal(p: Promise<unknown>): Promise<ServiceError> {
  try {
    await p;
  } catch (err) {
    return err as ServiceError;
  }
  throw new Error("expected the call to be refused");
}

/** An OpenClaw session JSONL file: a header, 5 messages (with a tool call and its result) and non-message lines. */
function openClawSession(): string {
  const t0 = 1_700_000_000_000;
  const lines = [
    { type: "session", version: 3, id: "oc-1", timestamp: new Date(t0).toISOString(), cwd: "/repo" },
    { type: "model_change", id: "a1", parentId: null, provider: "anthropic", modelId: "claude" },
    { type: "message", id: "m1", message: { role: "user", content: [{ type: "text", text: "List the files in src." }], timestamp: t0 + 1 } },
    {
      type: "message",
      id: "m2",
      message: {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "I should run ls.", thinkingSignature: "sig" },
          { type: "text", text: "Let me look." },
          { type: "toolCall", id: "call_1", name: "bash", arguments: { command: "ls src" } },
        ],
        usage: { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15 },
        timestamp: t0 + 2,
      },
    },
    { type: "message", id: "m3", message: { role: "toolResult", toolCallId: "call_1", toolName: "bash", content: [{ type: "text", text: "a.ts\nb.ts" }], isError: false, timestamp: t0 + 3 } },
    { type: "custom", customType: "note", data: { anything: true } },
    { type: "message", id: "m4", message: { role: "assistant", content: [{ type: "text", text: "There are two files: a.ts and b.ts." }], timestamp: t0 + 4 } },
    { type: "message", id: "m5", message: { role: "user", content: "Thanks!", timestamp: t0 + 5 } },
  ];
  return `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`;
}

describe("ImportTranscript: an OpenClaw session JSONL file becomes a session", () => {
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

  it("imports the message lines in order, with token counts; Assemble works; a second import is ALREADY_EXISTS", async () => {
    const session = { sessionId: "imported-1", agentId: "agent-x" };
    const res = await cx.importTranscript({ session, jsonl: Buffer.from(openClawSession()) });
    expect(res.importedEntries).toBe(5);

    const page = await cx.getTranscript({ session: { sessionId: "imported-1" }, pageSize: 100 });
    const messages = page.entries.flatMap((e) => (e.entry?.$case === "message" ? [e.entry.value] : []));
    expect(page.entries).toHaveLength(5);
    expect(messages.map((m) => m.role)).toEqual([Role.ROLE_USER, Role.ROLE_ASSISTANT, Role.ROLE_TOOL_RESULT, Role.ROLE_ASSISTANT, Role.ROLE_USER]);
    expect(messageText(messages[0])).toContain("List the files in src.");
    expect(toolCallIds(messages[1])).toEqual(["call_1"]);
    expect(messages[2].toolCallId).toBe("call_1");
    expect(messages[2].toolName).toBe("bash");
    expect(messageText(messages[4])).toBe("Thanks!");
    for (const m of messages) expect(m.tokenCount).toBeGreaterThan(0);
    expect(page.entries.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);

    const info = (await cx.getSession({ session: { sessionId: "imported-1" } })).info!;
    expect(info.messageCount).toBe(5);
    expect(info.session?.agentId).toBe("agent-x");
    expect(info.totalTokens).toBe(messages.reduce((sum, m: Message) => sum + m.tokenCount, 0));

    const assembled = await cx.assemble({ session: { sessionId: "imported-1" }, tokenBudget: 8000 });
    expect(assembled.messages.map((m) => m.role)).toEqual(messages.map((m) => m.role));

    const again = await refusal(cx.importTranscript({ session, jsonl: Buffer.from(openClawSession()) }));
    expect(again.code).toBe(status.ALREADY_EXISTS);
    expect((await cx.getTranscript({ session: { sessionId: "imported-1" }, pageSize: 100 })).entries).toHaveLength(5);
  });

  it("a bad line → INVALID_ARGUMENT naming the line, and no session is created", async () => {
    const lines = openClawSession().trimEnd().split("\n");
    const badJson = [...lines.slice(0, 3), "{oops", ...lines.slice(3)].join("\n");
    const err = await refusal(cx.importTranscript({ session: { sessionId: "bad-1" }, jsonl: Buffer.from(badJson) }));
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toContain("jsonl line 4");

    // A line that parses but is not a valid message (a tool result without its tool call id).
    const noId = [...lines, JSON.stringify({ type: "message", message: { role: "toolResult", content: "x" } })].join("\n");
    const err2 = await refusal(cx.importTranscript({ session: { sessionId: "bad-1" }, jsonl: Buffer.from(noId) }));
    expect(err2.code).toBe(status.INVALID_ARGUMENT);
    expect(err2.details).toContain(`jsonl line ${lines.length + 1}`);

    // A message with no content is refused by the host's validation, naming the line.
    const empty = [...lines, JSON.stringify({ type: "message", message: { role: "user", content: [] } })].join("\n");
    const err3 = await refusal(cx.importTranscript({ session: { sessionId: "bad-1" }, jsonl: Buffer.from(empty) }));
    expect(err3.code).toBe(status.INVALID_ARGUMENT);
    expect(err3.details).toContain(`jsonl line ${lines.length + 1}.content`);

    const missing = await refusal(cx.getSession({ session: { sessionId: "bad-1" } }));
    expect(missing.code).toBe(status.NOT_FOUND);
  });

  it("no session id, an empty file, or a file without message lines → INVALID_ARGUMENT", async () => {
    const noId = await refusal(cx.importTranscript({ session: { sessionId: "" }, jsonl: Buffer.from(openClawSession()) }));
    expect(noId.code).toBe(status.INVALID_ARGUMENT);
    expect(noId.details).toContain("session.session_id");
    const empty = await refusal(cx.importTranscript({ session: { sessionId: "empty-1" }, jsonl: Buffer.from("\n\n") }));
    expect(empty.code).toBe(status.INVALID_ARGUMENT);
    const headerOnly = await refusal(cx.importTranscript({ session: { sessionId: "empty-1" }, jsonl: Buffer.from(JSON.stringify({ type: "session", id: "x" })) }));
    expect(headerOnly.code).toBe(status.INVALID_ARGUMENT);
    expect((await refusal(cx.getSession({ session: { sessionId: "empty-1" } }))).code).toBe(status.NOT_FOUND);
  });

  it("contextctl import FILE: session id from the file name; --session overrides; a second import fails", async () => {
    const file = join(dir, "from-cli.jsonl");
    writeFileSync(file, openClawSession());
    const first = await contextctl(contextd.address, "import", file);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("imported 5 entries into session from-cli");
    expect((await cx.getSession({ session: { sessionId: "from-cli" } })).info!.messageCount).toBe(5);

    const named = await contextctl(contextd.address, "--json", "import", file, "--session", "cli-named", "--agent", "agent-y");
    expect(named.code).toBe(0);
    expect(JSON.parse(named.stdout)).toEqual({ sessionId: "cli-named", importedEntries: 5 });
    expect((await cx.getSession({ session: { sessionId: "cli-named" } })).info!.session?.agentId).toBe("agent-y");

    const again = await contextctl(contextd.address, "import", file);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("ALREADY_EXISTS");
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

  it("more messages than limits.max_session_entries → RESOURCE_EXHAUSTED; nothing written", async () => {
    const err = await refusal(cx.importTranscript({ session: { sessionId: "big" }, jsonl: Buffer.from(openClawSession()) }));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("limits.max_session_entries");
    expect((await refusal(cx.getSession({ session: { sessionId: "big" } }))).code).toBe(status.NOT_FOUND);
  });
});
