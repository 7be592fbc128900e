import { writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { examples, num, printJson, writeOut } from "../format.js";
import { progress } from "../progress.js";
import { action, clientOptions, globals, withSessions } from "./shared.js";
import { terminalText, writeStderr } from "../terminal-text.js";

interface ExportOptions {
  output?: string;
}

/**
 * `contextctl export ID [-o FILE]`: the session as an OpenClaw session JSONL file
 * (ExportTranscript), on stdout or into FILE. The file is written only once the whole export has
 * arrived, so a failed call leaves no partial file.
 *
 * ExportTranscript is one unary call, so there is no count to show while it runs: on a terminal,
 * a big session gets an elapsed-time line on stderr (after a moment, cleared when done) so that a
 * long wait does not look like a hang.
 */
export function registerExport(program: Command): void {
  program
    .command("export")
    .description("write a session as an OpenClaw session JSONL file (ExportTranscript)")
    .argument("<session>", "session id")
    .option("-o, --output <file>", "write to FILE instead of stdout")
    .addHelpText(
      "after",
      "\nWithout -o the file goes to stdout as it is (already JSON Lines: the session header, then one entry per line).\n" +
        'With -o, one line on stderr says how many entries were written; with --json, stdout gets {"sessionId",\n' +
        '"entries", "bytes", "file"} instead. --json without -o prints {"sessionId", "entries", "bytes", "lines": [...]}\n' +
        "with the file's lines parsed (header first). Nothing is written unless the whole export arrived.\n" +
        examples("contextctl export chat-42 -o chat-42.jsonl", "contextctl export chat-42 | jq -c 'select(.type == \"compaction\")'"),
    )
    .action(
      action(async (sessionId: string, opts: ExportOptions, cmd: Command) => {
        const g = globals(cmd);
        const bar = progress({ format: `export ${terminalText(sessionId)}: waiting for ExportTranscript… {duration_formatted}`, total: 1, delayMs: 500 });
        let res;
        try {
          res = await withSessions(clientOptions(g, 300_000), (client) => client.exportTranscript({ session: { sessionId } }));
        } finally {
          bar.stop();
        }
        const jsonl = Buffer.from(res.jsonl);
        const facts = { sessionId, entries: res.entries, bytes: jsonl.length };
        if (opts.output) {
          await writeFile(opts.output, jsonl);
          if (g.json) return printJson({ ...facts, file: opts.output });
          writeStderr(`exported ${num(res.entries)} entries of session ${terminalText(sessionId)} to ${opts.output}\n`);
          return;
        }
        if (g.json) {
          const lines = jsonl
            .toString("utf8")
            .split("\n")
            .filter((l) => l.trim() !== "")
            .map((l) => JSON.parse(l) as unknown);
          return printJson({ ...facts, lines });
        }
        // The JSONL to a terminal or a pipe: through the sink like --json (unsafe characters inside its
        // strings written as \uXXXX escapes: the same JSON values). --output writes the bytes as exported.
        await writeOut(jsonl.toString("utf8"));
      }),
    );
}
