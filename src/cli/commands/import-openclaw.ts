import os from "node:os";
import path from "node:path";
import { status, type ServiceError } from "@grpc/grpc-js";
import type { Command } from "commander";
import { UsageError } from "../exit-codes.js";
import { errorText, examples, num, printJson, table } from "../format.js";
import { readOpenClawState, type OpenClawSession } from "../openclaw-state.js";
import { progress } from "../progress.js";
import { action, clientOptions, globals, withSessions } from "./shared.js";
import { terminalText, writeStderr, writeStdout } from "../terminal-text.js";

interface ImportOpenClawOptions {
  stateDir?: string;
  agent?: string;
  dryRun?: boolean;
}

type Outcome = "imported" | "existing" | "failed";

interface SessionOutcome {
  agentId: string;
  sessionKey: string;
  sessionId: string;
  source: OpenClawSession["source"];
  outcome: Outcome;
  entries?: number;
  error?: string;
}

/**
 * `contextctl import-openclaw [--state-dir DIR]`: moves an OpenClaw deployment's sessions into
 * contextd in one go — every session of every agent (openclaw-state.ts reads 2026.7+'s SQLite
 * databases and older versions' JSONL files), each through ImportTranscript with OpenClaw's session
 * id and key, under OpenClaw's agent id (or --agent's). Idempotent: a session contextd has already
 * (imported before, or begun by the plugin) is left as it is and counted, so a second run imports
 * only what is new; the plugin catches up on whatever a session gained since. One session's failure
 * (a file over limits.max_import_bytes, say) does not stop the others; the exit code is then 1.
 */
export function registerImportOpenClaw(program: Command): void {
  program
    .command("import-openclaw")
    .description("import every session of an OpenClaw deployment (its SQLite store, or JSONL files of older versions)")
    .option("--state-dir <dir>", "OpenClaw's state directory (default $OPENCLAW_STATE_DIR, else ~/.openclaw)")
    .option("--agent <id>", "contextd agent id for every session (default: each session's OpenClaw agent id, as the plugin uses)")
    .option("--dry-run", "list what would be imported; import nothing")
    .addHelpText(
      "after",
      "\nReads OpenClaw's databases read-only (a running Gateway is fine). Each session keeps OpenClaw's session id, key\n" +
        "and entry ids; its messages are keyed as the plugin keys them, so the plugin never appends them again.\n" +
        "Sessions contextd has already are skipped (run it again after an interruption: it picks up where it stopped).\n" +
        'With --json: {"stateDir", "imported", "existing", "failed", "sessions": [{agentId, sessionKey, sessionId, source,\n' +
        'outcome, entries?, error?}], "problems": [...]}. Exit 1 when a session failed or a database could not be read.\n' +
        examples("contextctl import-openclaw", "OPENCLAW_STATE_DIR=/srv/openclaw contextctl import-openclaw --dry-run"),
    )
    .action(
      action(async (opts: ImportOpenClawOptions, cmd: Command) => {
        const g = globals(cmd);
        const stateDir = path.resolve(opts.stateDir ?? process.env.OPENCLAW_STATE_DIR ?? path.join(os.homedir(), ".openclaw"));
        let state;
        try {
          state = readOpenClawState(stateDir);
        } catch (err) {
          throw new UsageError((err as Error).message);
        }
        const results: SessionOutcome[] = [];
        const bar = progress({ format: "import-openclaw [{bar}] {value}/{total} sessions", total: state.sessions.length });
        if (!opts.dryRun) {
          await withSessions(clientOptions(g, 300_000), async (client) => {
            for (const s of state.sessions) {
              const base = { agentId: opts.agent ?? s.agentId, sessionKey: s.sessionKey, sessionId: s.sessionId, source: s.source };
              try {
                const jsonl = Buffer.from(`${s.lines().join("\n")}\n`);
                const res = await client.importTranscript({ session: { sessionId: s.sessionId, sessionKey: s.sessionKey, agentId: base.agentId }, jsonl });
                results.push({ ...base, outcome: "imported", entries: res.importedEntries });
              } catch (err) {
                const code = (err as ServiceError)?.code;
                if (code === status.ALREADY_EXISTS) results.push({ ...base, outcome: "existing" });
                else if (code === status.UNAVAILABLE || code === status.UNAUTHENTICATED || code === status.PERMISSION_DENIED) throw err;
                else results.push({ ...base, outcome: "failed", error: errorText(err) });
              }
              bar.update(results.length);
            }
          });
        }
        bar.stop();
        const count = (o: Outcome) => results.filter((r) => r.outcome === o).length;
        if (count("failed") > 0 || state.problems.length > 0) process.exitCode = 1;
        if (g.json) {
          const listed = opts.dryRun
            ? state.sessions.map((s) => ({
                agentId: opts.agent ?? s.agentId,
                sessionKey: s.sessionKey,
                sessionId: s.sessionId,
                source: s.source,
                current: s.current,
              }))
            : results;
          return printJson({
            stateDir,
            imported: count("imported"),
            existing: count("existing"),
            failed: count("failed"),
            sessions: listed,
            problems: state.problems,
          });
        }
        for (const p of state.problems) writeStderr(`contextctl: ${terminalText(p)}\n`);
        if (opts.dryRun) {
          const rows = state.sessions.map((s) => [opts.agent ?? s.agentId, s.sessionKey || "-", s.sessionId, s.source].map(terminalText));
          writeStdout(`${rows.length ? table(["agent", "session key", "session", "source"], rows) : "no sessions"}\n`);
          writeStdout(`${num(state.sessions.length)} session(s) in ${stateDir}; --dry-run imported nothing\n`);
          return;
        }
        for (const r of results.filter((x) => x.outcome === "failed"))
          writeStderr(`contextctl: session ${terminalText(r.sessionId)}: ${terminalText(String(r.error))}\n`);
        const entries = results.reduce((sum, r) => sum + (r.entries ?? 0), 0);
        writeStdout(
          `imported ${num(count("imported"))} session(s) (${num(entries)} entries) from ${stateDir}; ` +
            `${num(count("existing"))} contextd had already, ${num(count("failed"))} failed\n`,
        );
      }),
    );
}
