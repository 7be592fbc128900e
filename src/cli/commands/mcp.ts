import { InvalidArgumentError, Option, type Command } from "commander";
import { DEFAULT_MAX_CHARS, DEFAULT_TOKEN_BUDGET, type HistoryToolDefaults } from "../../sdk/history-tools.js";
import { ContextdClient } from "../../sdk/runtime-client.js";
import { examples } from "../format.js";
import { writeStderr } from "../terminal-text.js";
import { action, clientOptionsFor, positiveInt } from "./shared.js";

interface McpOptions {
  transport: "stdio" | "http";
  http?: { host: string; port: number };
  session?: string;
  agent?: string;
  budget: number;
  maxChars: number;
  allowedHost?: string[];
  allowedOrigin?: string[];
}

/** `--transport http` without `--http`. */
const DEFAULT_HTTP = "127.0.0.1:8750";

/**
 * `contextctl mcp`: an MCP server (src/mcp/) offering the history tools — search, expand, context,
 * sessions — to an MCP client, over stdio (the client starts it) or Streamable HTTP. It calls
 * contextd as a runtime: with --token, else $CONTEXTD_RUNTIME_TOKEN, so the tools see what that
 * token may see. In stdio mode stdout carries the protocol only; everything else goes to stderr.
 * It runs until stdin closes (stdio) or SIGINT/SIGTERM.
 */
export function registerMcp(program: Command): void {
  program
    .command("mcp")
    .description("serve the history tools (search, expand, context, sessions) to an MCP client, over stdio or Streamable HTTP")
    .addOption(
      new Option("--transport <kind>", "stdio: the MCP client starts contextctl and speaks on its stdin/stdout; http: Streamable HTTP")
        .choices(["stdio", "http"])
        .default("stdio"),
    )
    .option("--http <host:port>", `serve Streamable HTTP at this address (implies --transport http; port 0 picks one; default ${DEFAULT_HTTP})`, hostPort)
    .addOption(new Option("--session <id>", "the session the tools use when the model names none").env("CONTEXTD_MCP_SESSION"))
    .addOption(new Option("--agent <id>", "list only this agent's sessions, and route context as this agent").env("CONTEXTD_MCP_AGENT"))
    .addOption(new Option("--budget <tokens>", "context's token budget when the model gives none").argParser(positiveInt).default(DEFAULT_TOKEN_BUDGET))
    .addOption(
      new Option("--max-chars <n>", "the longest answer of a tool, in characters (longer ones are paged)").argParser(maxChars).default(DEFAULT_MAX_CHARS),
    )
    .option("--allowed-host <name>", "with --http: also accept requests whose Host is this name (repeatable)", collect)
    .option("--allowed-origin <origin>", "with --http: also accept browser requests from this Origin (repeatable)", collect)
    .addHelpText(
      "after",
      "\nTools: search (words and phrases in the whole history, compacted turns included), expand (an entry in full, or the\n" +
        "messages a compaction summary stands for), context (what the model would be sent now; never compacts), sessions.\n" +
        "Each answer is text for the model, at most --max-chars characters, with a page_token to read on.\n" +
        "stdio: stdout is the protocol, logs go to stderr; it exits when stdin closes. http: stateless Streamable HTTP at\n" +
        "http://HOST:PORT/mcp (POST only), bound to 127.0.0.1 by default; the URL is printed on stderr. Requests whose Host\n" +
        "or Origin names another site are refused (DNS rebinding); whoever reaches the port acts with this token.\n" +
        "docs/mcp.md has client configurations.\n" +
        examples(
          "contextctl mcp",
          "CONTEXTD_RUNTIME_TOKEN=... contextctl --address contextd.internal:50051 mcp --session chat-42",
          "contextctl mcp --http 127.0.0.1:8750",
        ),
    )
    .action(
      action(async (opts: McpOptions, cmd: Command) => {
        const http = opts.http ?? (opts.transport === "http" ? hostPort(DEFAULT_HTTP) : undefined);
        const client = new ContextdClient(clientOptionsFor(cmd, "runtime"));
        const defaults: HistoryToolDefaults = {
          sessionId: opts.session || undefined,
          agentId: opts.agent || undefined,
          tokenBudget: opts.budget,
          maxChars: opts.maxChars,
        };
        // Loaded here only: the MCP SDK is not needed by any other command.
        const { createHistoryServer } = await import("../../mcp/history-server.js");
        const stopped = stopSignal();
        const address = clientOptionsFor(cmd, "runtime").address;
        try {
          if (http) {
            const { serveHttp } = await import("../../mcp/http-server.js");
            const serving = await serveHttp(() => createHistoryServer(client, defaults), {
              ...http,
              allowedHosts: opts.allowedHost,
              allowedOrigins: opts.allowedOrigin,
              onError: (err) => writeStderr(`contextctl mcp: ${err instanceof Error ? err.message : String(err)}\n`),
            });
            writeStderr(`contextctl mcp: serving MCP (Streamable HTTP) at ${serving.url} for contextd ${address}\n`);
            await stopped;
            await serving.close();
          } else {
            const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
            const server = createHistoryServer(client, defaults);
            const closed = new Promise<void>((resolve) => {
              process.stdin.once("end", resolve);
              process.stdin.once("close", resolve);
            });
            await server.connect(new StdioServerTransport());
            writeStderr(`contextctl mcp: serving MCP on stdio for contextd ${address}\n`);
            await Promise.race([closed, stopped]);
            await server.close();
          }
        } finally {
          client.close();
        }
      }),
    );
}

/** Resolves on the first SIGINT or SIGTERM. */
function stopSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });
}

function hostPort(value: string): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/.exec(value.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) throw new InvalidArgumentError("expected host:port, e.g. 127.0.0.1:8750 ([::1]:8750 for IPv6; port 0 picks a free one)");
  return { host: m[1].replace(/^\[|\]$/g, ""), port };
}

function maxChars(value: string): number {
  const n = positiveInt(value);
  if (n < 1000 || n > 1_000_000) throw new InvalidArgumentError("between 1000 and 1000000");
  return n;
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}
