import { spawn, type ChildProcess } from "node:child_process";
import { request } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { textMessage } from "../../src/contract/messages.js";
import { Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { CONTEXTCTL } from "../cli/run-contextctl.js";

/**
 * `contextctl mcp` as an MCP client runs it — a child process driven by the MCP SDK's own Client,
 * over stdio and over Streamable HTTP — against a real contextd that requires auth, with two
 * runtime tokens scoped to two agents.
 */

const ALPHA = "alpha-runtime-token";
const BETA = "beta-runtime-token";
const FACT = "The staging database password rotates every Thursday; ticket OPS-7731 tracks the rotation script.";
const BETA_FACT = "Beta's private note: the launch codename is PELICAN-99.";

/** A turn of filler, long enough that a few of them outgrow the kept-recent budget. */
function turn(t: number): Message[] {
  const words = (seed: string) => Array.from({ length: 60 }, (_, i) => `${seed}${(i * 7 + t) % 23}`).join(" ");
  return [
    textMessage(Role.ROLE_USER, `Question ${t}: please review module ${t} of the billing service. ${words("alpha")}`),
    textMessage(Role.ROLE_ASSISTANT, `Answer ${t}: module ${t} looks fine after the review. ${words("omega")}`),
  ];
}

type CallResult = { content: Array<{ type: string; text?: string }>; isError?: boolean };

function textOf(res: unknown): string {
  return (res as CallResult).content.map((c) => c.text ?? "").join("\n");
}

/** The env a child gets: this process's without CONTEXTD_* (a developer's shell must not point it elsewhere). */
function cleanEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("CONTEXTD_")) env[k] = v;
  return { ...env, ...extra };
}

describe("contextctl mcp: the history tools over MCP, against a real contextd with auth", () => {
  let server: ContextdProcess;
  let stdio: Client;
  let stdioTransport: StdioClientTransport;
  let stdioStderr = "";
  const protocolErrors: Error[] = [];
  let compactionId: string;
  let factEntryId: string;

  beforeAll(async () => {
    server = await startContextd({
      config: {
        auth: {
          required: true,
          runtimes: [
            { token_env: "MCP_TEST_ALPHA", agents: ["alpha"] },
            { token_env: "MCP_TEST_BETA", agents: ["beta"] },
          ],
        },
        compaction: { reserve_tokens: 100, keep_recent_tokens: 600 },
      },
      env: { MCP_TEST_ALPHA: ALPHA, MCP_TEST_BETA: BETA },
    });
    const alpha = new ContextdClient({ address: server.address, token: ALPHA });
    const beta = new ContextdClient({ address: server.address, token: BETA });
    try {
      const chat = { sessionId: "alpha-chat", agentId: "alpha" };
      await alpha.appendMessages({ session: chat, messages: [textMessage(Role.ROLE_USER, FACT), textMessage(Role.ROLE_ASSISTANT, "Noted.")] });
      for (let t = 0; t < 6; t++) await alpha.appendMessages({ session: chat, messages: turn(t) });
      const compacted = await alpha.compact({ session: chat, tokenBudget: 1500, force: true });
      expect(compacted.compacted).toBe(true);
      await alpha.appendMessages({ session: chat, messages: turn(6) });
      await alpha.appendMessages({ session: { sessionId: "alpha-notes", agentId: "alpha" }, messages: [textMessage(Role.ROLE_USER, "Notes of alpha.")] });
      await beta.appendMessages({ session: { sessionId: "beta-secret", agentId: "beta" }, messages: [textMessage(Role.ROLE_USER, BETA_FACT)] });
      const entries = (await alpha.getTranscript({ session: { sessionId: "alpha-chat" }, pageSize: 5000 })).entries;
      compactionId = entries.find((e) => e.entry?.$case === "compaction")!.id;
      factEntryId = entries.find(
        (e) => e.entry?.$case === "message" && e.entry.value.content[0]?.block?.$case === "text" && e.entry.value.content[0].block.value.text === FACT,
      )!.id;
    } finally {
      alpha.close();
      beta.close();
    }

    stdioTransport = new StdioClientTransport({
      command: process.execPath,
      args: [CONTEXTCTL, "--address", server.address, "mcp", "--session", "alpha-chat"],
      env: cleanEnv({ CONTEXTD_RUNTIME_TOKEN: ALPHA }),
      stderr: "pipe",
    });
    stdioTransport.stderr?.on("data", (d: Buffer) => (stdioStderr += d.toString()));
    stdio = new Client({ name: "contextd-test", version: "1.0.0" });
    stdio.onerror = (err) => protocolErrors.push(err);
    await stdio.connect(stdioTransport);
  }, 120_000);

  afterAll(async () => {
    await stdio?.close();
    await server?.stop();
  });

  it("lists search, expand, context and sessions with model-facing descriptions and JSON Schema inputs", async () => {
    const { tools } = await stdio.listTools();
    expect(tools.map((t) => t.name)).toEqual(["search", "expand", "context", "sessions"]);
    for (const t of tools) {
      expect(t.description!.length).toBeGreaterThan(150);
      expect(t.inputSchema.type).toBe("object");
      expect(t.annotations).toMatchObject({ readOnlyHint: true });
    }
    const search = tools.find((t) => t.name === "search")!;
    expect(search.description).toMatch(/compacted/);
    expect(search.inputSchema.required).toEqual(["query"]);
    expect(search.inputSchema.properties).toMatchObject({ query: { type: "string", maxLength: 512 }, session_id: { type: "string" } });
    expect(stdio.getInstructions()).toMatch(/search/);
  });

  it("search finds a fact that was compacted out of the context, and expand reads its entry in full", async () => {
    const ctx = textOf(await stdio.callTool({ name: "context", arguments: {} }));
    // The fact's message is no longer sent as itself: the summary stands for it.
    expect(ctx).toMatch(/summary of compacted history/);
    expect(ctx).toContain(`entry ${compactionId}`);
    expect(ctx).not.toContain(`entry ${factEntryId}`);

    const found = await stdio.callTool({ name: "search", arguments: { query: "OPS-7731" } });
    expect(found.isError).toBeFalsy();
    const hits = [...textOf(found).matchAll(/^- entry (\S+) · session (\S+) · #(\d+) · (\S+)/gm)];
    expect(hits.map((h) => [h[1], h[2], h[4]])).toContainEqual([factEntryId, "alpha-chat", "user"]);
    expect(textOf(found)).toContain("«OPS-7731»");

    const entry = textOf(await stdio.callTool({ name: "expand", arguments: { entry_id: factEntryId } }));
    expect(entry).toContain(`Entry ${factEntryId} of session alpha-chat`);
    expect(entry).toContain(FACT);
    expect(entry).toMatch(/Just after it:\n--- entry \S+ · #2 · assistant/);
  });

  it("expand of a compaction summary returns the entries it covers, as ExpandCompaction does, page by page", async () => {
    const alpha = new ContextdClient({ address: server.address, token: ALPHA });
    const covered = (await alpha.expandCompaction({ session: { sessionId: "alpha-chat" }, compactionEntryId: compactionId, pageSize: 5000 })).entries.map(
      (e) => e.id,
    );
    alpha.close();
    expect(covered).toContain(factEntryId);

    const first = textOf(await stdio.callTool({ name: "expand", arguments: { entry_id: compactionId } }));
    expect(first).toMatch(/stands for these original messages, oldest first/);
    expect(first).toContain(FACT);
    expect([...first.matchAll(/^--- entry (\S+) ·/gm)].map((m) => m[1])).toEqual(covered);

    // Two entries a page: every page token leads on, and the pages add up to the same entries.
    const paged: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const text = textOf(await stdio.callTool({ name: "expand", arguments: { entry_id: compactionId, limit: 2, ...(token ? { page_token: token } : {}) } }));
      paged.push(...[...text.matchAll(/^--- entry (\S+) ·/gm)].map((m) => m[1]));
      token = /page_token "([^"]+)"/.exec(text)?.[1];
      pages++;
    } while (token && pages < 50);
    expect(paged).toEqual(covered);
  });

  it("context shows what the model would be sent, with tokens by section, and never compacts", async () => {
    const text = textOf(await stdio.callTool({ name: "context", arguments: { token_budget: 100_000 } }));
    expect(text).toMatch(
      /^What the model would be sent now for session alpha-chat with a budget of 100000 tokens \(engine legacy, mode NORMAL\): \d+ messages, \d+ tokens — summary \d+/,
    );
    expect(text).toMatch(/--- 1 · summary of compacted history .* · entry \S+ · \d+ tokens/);
    expect(text).toContain("Answer 6: module 6 looks fine");
    // A budget far below the view is shown as it is (DEGRADED), not compacted: the summary stays the same.
    const tight = textOf(await stdio.callTool({ name: "context", arguments: { token_budget: 50 } }));
    expect(tight).toMatch(/mode DEGRADED/);
    expect(tight).toContain(`entry ${compactionId}`);
  });

  it("sessions and search see only the token's agent: another agent's session is as missing, its text never appears", async () => {
    const list = textOf(await stdio.callTool({ name: "sessions", arguments: {} }));
    expect(list).toContain("session alpha-chat · agent alpha");
    expect(list).toContain("session alpha-notes");
    expect(list).not.toContain("beta");

    const across = await stdio.callTool({ name: "search", arguments: { query: "PELICAN-99", all_sessions: true } });
    expect(textOf(across)).toMatch(/^No hits for "PELICAN-99" in every session of the agent of session alpha-chat\./);
    const direct = await stdio.callTool({ name: "search", arguments: { query: "PELICAN-99", session_id: "beta-secret" } });
    expect(direct.isError).toBe(true);
    expect(textOf(direct)).toMatch(/^Invalid argument session_id: .*not found/i);
    const missing = await stdio.callTool({ name: "search", arguments: { query: "PELICAN-99", session_id: "no-such-session" } });
    // Indistinguishable from a session that does not exist.
    expect(textOf(missing).replace("no-such-session", "X")).toBe(textOf(direct).replace("beta-secret", "X"));
    for (const res of [across, direct, missing]) expect(textOf(res)).not.toContain("launch codename");
  });

  it("bad input is a tool error naming the argument, and the server keeps serving", async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ query: "" }, /query/],
      [{ query: "x".repeat(600) }, /query.*512|512.*query/s],
      [{ query: "***" }, /^Invalid argument query: .*letter or digit/],
      [{ query: "a", limit: 1000 }, /limit/],
      [{ query: "invoice", page_token: "forged" }, /^Invalid argument page_token/],
    ];
    for (const [args, expected] of cases) {
      const res = await stdio.callTool({ name: "search", arguments: args });
      expect(res.isError, JSON.stringify(args).slice(0, 80)).toBe(true);
      expect(textOf(res)).toMatch(expected);
    }
    const unknown = await stdio.callTool({ name: "expand", arguments: { entry_id: "no-such-entry" } });
    expect(unknown.isError).toBe(true);
    expect(textOf(unknown)).toMatch(/^Invalid argument entry_id: No entry "no-such-entry" in session alpha-chat/);
    const still = await stdio.callTool({ name: "search", arguments: { query: "OPS-7731" } });
    expect(still.isError).toBeFalsy();
    expect(textOf(still)).toContain(factEntryId);
  });

  it("in stdio mode stdout carries the protocol only: the client read no line that was not a message", () => {
    expect(protocolErrors).toEqual([]);
    expect(stdioStderr).toMatch(/contextctl mcp: serving MCP on stdio for contextd /);
  });

  it("over stdio, every stdout line is a JSON-RPC message, and closing stdin ends the process with exit 0", async () => {
    const child = spawn(process.execPath, [CONTEXTCTL, "--address", server.address, "mcp"], {
      env: cleanEnv({ CONTEXTD_RUNTIME_TOKEN: ALPHA }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    let out = "";
    const answered = new Promise<void>((resolve) =>
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString();
        if (/"id":2\b/.test(out)) resolve();
      }),
    );
    const send = (m: unknown) => child.stdin.write(`${JSON.stringify(m)}\n`);
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    // No current session configured: the tool says how to name one.
    send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "search", arguments: { query: "OPS-7731" } } });
    await answered;
    child.stdin.end();
    expect(await exited).toBe(0);
    const lines = out.split("\n").filter(Boolean);
    for (const line of lines) expect(JSON.parse(line), line).toMatchObject({ jsonrpc: "2.0" });
    const call = lines.map((l) => JSON.parse(l) as { id?: number; result?: CallResult }).find((m) => m.id === 2)!;
    expect(call.result!.isError).toBe(true);
    expect(textOf(call.result)).toMatch(/^Invalid argument session_id: no current session here/);
  });

  describe("over Streamable HTTP", () => {
    let child: ChildProcess;
    let url: URL;
    let http: Client;

    beforeAll(async () => {
      child = spawn(process.execPath, [CONTEXTCTL, "--address", server.address, "mcp", "--http", "127.0.0.1:0"], {
        env: cleanEnv({ CONTEXTD_RUNTIME_TOKEN: BETA }),
        stdio: ["ignore", "pipe", "pipe"],
      });
      url = await new Promise<URL>((resolve, reject) => {
        let err = "";
        child.stderr!.on("data", (d: Buffer) => {
          err += d.toString();
          const m = /serving MCP \(Streamable HTTP\) at (\S+)/.exec(err);
          if (m) resolve(new URL(m[1]));
        });
        child.once("exit", (code) => reject(new Error(`contextctl mcp --http exited ${code}: ${err}`)));
      });
      http = new Client({ name: "contextd-test-http", version: "1.0.0" });
      await http.connect(new StreamableHTTPClientTransport(url));
    }, 60_000);

    afterAll(async () => {
      await http?.close();
      if (child && child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await exited;
      }
    });

    it("serves the same tools with this token's scope: beta sees its session and not alpha's", async () => {
      expect(url.hostname).toBe("127.0.0.1");
      expect(url.pathname).toBe("/mcp");
      expect((await http.listTools()).tools.map((t) => t.name)).toEqual(["search", "expand", "context", "sessions"]);
      const list = textOf(await http.callTool({ name: "sessions", arguments: {} }));
      expect(list).toContain("session beta-secret · agent beta");
      expect(list).not.toContain("alpha");
      const found = textOf(await http.callTool({ name: "search", arguments: { query: "PELICAN-99", session_id: "beta-secret" } }));
      expect(found).toContain("«PELICAN-99»");
      const alphas = await http.callTool({ name: "search", arguments: { query: "OPS-7731", session_id: "alpha-chat" } });
      expect(alphas.isError).toBe(true);
      expect(textOf(alphas)).not.toContain("rotation");
      const bad = await http.callTool({ name: "search", arguments: { query: "", session_id: "beta-secret" } });
      expect(bad.isError).toBe(true);
      expect(textOf(bad)).toMatch(/query/);
    });

    /** A raw request with headers a browser or an attacker might send. */
    function raw(method: string, headers: Record<string, string>, body = ""): Promise<number> {
      return new Promise((resolve, reject) => {
        const req = request(
          url,
          { method, headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    }

    it("refuses another site's Host or Origin (DNS rebinding), GET and DELETE (stateless), and a body over 1 MiB", async () => {
      const ping = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" });
      expect(await raw("POST", { host: `localhost:${url.port}` }, ping)).toBe(200);
      expect(await raw("POST", { host: `evil.example:${url.port}` }, ping)).toBe(403);
      expect(await raw("POST", { host: `127.0.0.1:${Number(url.port) + 1}` }, ping)).toBe(403);
      expect(await raw("POST", { origin: "http://evil.example" }, ping)).toBe(403);
      expect(await raw("POST", { origin: `http://localhost:${url.port}` }, ping)).toBe(200);
      expect(await raw("GET", {})).toBe(405);
      expect(await raw("DELETE", {})).toBe(405);
      const huge = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "search", arguments: { query: "x".repeat(1_100_000) } } });
      expect(await raw("POST", {}, huge)).toBe(413);
      // Still serving.
      expect((await http.callTool({ name: "sessions", arguments: {} })).isError).toBeFalsy();
    });
  });
});
