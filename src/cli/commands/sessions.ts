import type { Command } from "commander";
import { SessionInfo } from "../../contract/gen/contextd/v1/session.js";
import { examples, iso, printJson, table } from "../format.js";
import { action, clientOptions, globals, withSessions } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

/** `contextctl sessions`: every session, newest activity first (follows ListSessions pages). */
export function registerSessions(program: Command): void {
  program
    .command("sessions")
    .description("list sessions, newest activity first, with the runtime's session key (OpenClaw's agent:<id>:<key>)")
    .addHelpText(
      "after",
      '\nWith --json: {"sessions": [SessionInfo, ...]} (proto JSON), every page of ListSessions.\n' +
        examples("contextctl sessions", "contextctl --json sessions | jq -r '.sessions[].session.sessionId'"),
    )
    .action(
      action(async (_opts: unknown, cmd: Command) => {
        const g = globals(cmd);
        const sessions = await withSessions(clientOptions(g), async (client) => {
          const all: SessionInfo[] = [];
          let pageToken = "";
          do {
            const page = await client.listSessions({ pageSize: 1000, pageToken });
            all.push(...page.sessions);
            pageToken = page.nextPageToken;
          } while (pageToken);
          return all;
        });
        if (g.json) return printJson({ sessions: sessions.map((s) => SessionInfo.toJSON(s)) });
        if (sessions.length === 0) return void writeStdout("no sessions\n");
        const rows = sessions.map((s) => [
          terminalText(s.session?.sessionId ?? ""),
          terminalText(s.session?.sessionKey || "-"),
          terminalText(s.session?.agentId || "-"),
          s.messageCount,
          s.compactionCount,
          s.activeTokens,
          s.totalTokens,
          s.storedBytes,
          iso(s.updatedAtMs),
        ]);
        writeStdout(
          `${table(["session", "key", "agent", "messages", "compactions", "active tokens", "total tokens", "stored bytes", "updated"], rows)}\n${agentTotals(sessions)}`,
        );
      }),
    );
}

/** Per agent: its sessions and the bytes they hold (what `quotas` count; `contextctl session ID` shows the quotas). */
function agentTotals(sessions: SessionInfo[]): string {
  const by = new Map<string, { sessions: number; bytes: number }>();
  for (const s of sessions) {
    const agent = s.session?.agentId ?? "";
    const t = by.get(agent) ?? { sessions: 0, bytes: 0 };
    t.sessions += 1;
    t.bytes += s.storedBytes;
    by.set(agent, t);
  }
  const rows = [...by].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([agent, t]) => [terminalText(agent || "-"), t.sessions, t.bytes]);
  return `\n${table(["agent", "sessions", "stored bytes"], rows)}\n`;
}
