import { readFile } from "node:fs/promises";
import { parse } from "node:path";
import type { Command } from "commander";
import { UsageError } from "../exit-codes.js";
import { examples, num, printJson } from "../format.js";
import { action, clientOptions, globals, withSessions } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

interface ImportOptions {
  session?: string;
  agent?: string;
}

/**
 * `contextctl import FILE [--session ID] [--agent ID]`: creates a session from an OpenClaw session
 * JSONL file through ImportTranscript. The file is sent as it is; the server keeps every entry of
 * its tree and refuses it whole when a line is bad or the session exists. The session id defaults
 * to the file name without its extension.
 */
export function registerImport(program: Command): void {
  program
    .command("import")
    .description("create a session from an OpenClaw session JSONL file (ImportTranscript)")
    .argument("<file>", "OpenClaw session JSONL file")
    .option("--session <id>", "session id (default: the file name without its extension)")
    .option("--agent <id>", "agent id the session belongs to")
    .addHelpText(
      "after",
      "\nA bad line (INVALID_ARGUMENT naming it) or an existing session (ALREADY_EXISTS) refuses the whole file.\n" +
        'With --json: {"sessionId", "importedEntries", "leafEntryId", "activeMessages"}.\n' +
        examples("contextctl import ~/.openclaw/agents/main/sessions/chat-42.jsonl", "contextctl import session.jsonl --session chat-43 --agent coder"),
    )
    .action(
      action(async (file: string, opts: ImportOptions, cmd: Command) => {
        const g = globals(cmd);
        const sessionId = opts.session ?? parse(file).name;
        if (!sessionId) throw new UsageError(`${file}: cannot derive a session id from the file name; pass --session`);
        const jsonl = await readFile(file);
        const res = await withSessions(clientOptions(g, 300_000), (client) =>
          client.importTranscript({ session: { sessionId, agentId: opts.agent ?? "" }, jsonl }),
        );
        if (g.json) return printJson({ sessionId, ...res });
        writeStdout(`imported ${num(res.importedEntries)} entries into session ${terminalText(sessionId)}\n`);
      }),
    );
}
