import { InvalidArgumentError, type Command } from "commander";
import { parseDuration } from "../../server/duration.js";
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
        "With --expiring: the sessions the retention sweep deletes within that long (default 1d), soonest first, at most 1000.\n" +
        examples("contextctl sessions", "contextctl sessions --expiring 7d", "contextctl --json sessions | jq -r '.sessions[].session.sessionId'"),
    )
    .option("--expiring [within]", "only what retention (`retention.max_idle`, `max_age`) deletes within this long: 90m, 12h, 7d", expiringWithin)
    .action(
      action(async (opts: { expiring?: number | true }, cmd: Command) => {
        const g = globals(cmd);
        const within = opts.expiring === true ? DAY_MS : opts.expiring;
        const sessions = await withSessions(clientOptions(g), async (client) => {
          if (within !== undefined) return (await client.listSessions({ pageSize: 1000, expiringWithinMs: within })).sessions;
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
        if (sessions.length === 0) return void writeStdout(within !== undefined ? "no session expires by then\n" : "no sessions\n");
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
          ...(within !== undefined ? [iso(s.expiresAtMs)] : []),
        ]);
        const head = ["session", "key", "agent", "messages", "compactions", "active tokens", "total tokens", "stored bytes", "updated"];
        // The per-agent totals are of whole listings: what an agent holds against its quotas.
        if (within !== undefined) writeStdout(`${table([...head, "expires"], rows)}\n`);
        else writeStdout(`${table(head, rows)}\n${agentTotals(sessions)}`);
      }),
    );
}

const DAY_MS = 86_400_000;

/** `--expiring`'s value: a duration (`90m`, `12h`) or whole days (`7d`). */
function expiringWithin(value: string): number {
  const days = /^(\d+(?:\.\d+)?)d$/.exec(value.trim());
  try {
    const ms = days ? Math.round(Number(days[1]) * DAY_MS) : parseDuration(value);
    if (ms > 0) return ms;
  } catch {
    // below
  }
  throw new InvalidArgumentError(`${JSON.stringify(value)} is not a duration (use 90m, 12h, 7d)`);
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
