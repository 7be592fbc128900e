import type { Command } from "commander";
import { AgentUsage, SessionInfo } from "../../contract/gen/contextd/v1/session.js";
import { examples, iso, keyValues, pct, printJson, table } from "../format.js";
import { accent } from "../style.js";
import { action, clientOptions, globals, withSessions } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

/** `contextctl session ID`: the session's counts and its context overview by section. */
export function registerSession(program: Command): void {
  program
    .command("session")
    .description("show a session's counts and its context overview (tokens by section)")
    .argument("<id>", "session id")
    .addHelpText(
      "after",
      "\nThe overview is the host's bookkeeping of the active view; `contextctl context ID --budget N` shows the messages.\n" +
        "With --json: the SessionInfo (proto JSON; fields at their defaults are left out), with `agentUsage`: its agent's sessions and bytes against its quotas.\n" +
        examples("contextctl session chat-42", "contextctl --json session chat-42 | jq .overview"),
    )
    .action(
      action(async (id: string, _opts: unknown, cmd: Command) => {
        const g = globals(cmd);
        const res = await withSessions(clientOptions(g), (client) => client.getSession({ session: { sessionId: id } }));
        const info = res.info ?? SessionInfo.fromPartial({});
        if (g.json) return printJson({ ...(SessionInfo.toJSON(info) as object), ...(res.agentUsage ? { agentUsage: AgentUsage.toJSON(res.agentUsage) } : {}) });
        writeStdout(`${describe(id, info)}\n\n${overview(info)}${res.agentUsage ? `\n\n${usage(res.agentUsage)}` : ""}\n`);
      }),
    );
}

function describe(id: string, info: SessionInfo): string {
  const s = info.session;
  return keyValues([
    ["session", terminalText(s?.sessionId || id)],
    ["agent", terminalText(s?.agentId || "-")],
    ["key", terminalText(s?.sessionKey || "-")],
    ...(info.parentSessionId ? ([["parent", terminalText(info.parentSessionId)]] as [string, string][]) : []),
    ["selected engine", accent(terminalText(info.selectedEngineId || "-"))],
    ["created", iso(info.createdAtMs)],
    ["updated", iso(info.updatedAtMs)],
    ["entries", info.entryCount],
    ["messages", info.messageCount],
    ["compactions", info.compactionCount],
    ["total tokens", info.totalTokens],
    ["active tokens", info.activeTokens],
    ["stored bytes", info.storedBytes],
  ]);
}

/** The agent's usage against its quotas (`quotas` in contextd's config; "-": no quota). */
function usage(u: AgentUsage): string {
  const of = (used: number, max: number) => (max > 0 ? [used, max, pct(used, max)] : [used, "-", "-"]);
  return `agent ${terminalText(u.agentId || "-")} usage\n${table(
    ["quota", "used", "limit", "share"],
    [
      ["sessions", ...of(u.sessions, u.maxSessions)],
      ["stored bytes", ...of(u.storedBytes, u.maxStoredBytes)],
    ],
  )}`;
}

/** The context overview (GetSession.info.overview) as a table: tokens and share of the total. */
function overview(info: SessionInfo): string {
  const o = info.overview ?? { summaryTokens: 0, messageTokens: 0, toolResultTokens: 0, systemAdditionTokens: 0, totalTokens: 0 };
  const sections: [string, number][] = [
    ["summary", o.summaryTokens],
    ["messages", o.messageTokens],
    ["tool results", o.toolResultTokens],
    ["system addition", o.systemAdditionTokens],
  ];
  const rows = sections.map(([name, tokens]) => [name, tokens, pct(tokens, o.totalTokens)]);
  rows.push(["total", o.totalTokens, o.totalTokens > 0 ? "100.0%" : "-"]);
  return `context overview\n${table(["section", "tokens", "share"], rows)}`;
}
