import { writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { num } from "../format.js";
import { action, clientOptions, globals, withSessions } from "./shared.js";

interface ExportOptions {
  output?: string;
}

/**
 * `contextctl export ID [-o FILE]`: the session as an OpenClaw session JSONL file
 * (ExportTranscript), on stdout or into FILE. The file is written only once the whole export has
 * arrived, so a failed call leaves no partial file.
 */
export function registerExport(program: Command): void {
  program
    .command("export")
    .description("write a session as an OpenClaw session JSONL file (ExportTranscript)")
    .argument("<session>", "session id")
    .option("-o, --output <file>", "write to FILE instead of stdout")
    .action(
      action(async (sessionId: string, opts: ExportOptions, cmd: Command) => {
        const g = globals(cmd);
        const res = await withSessions(clientOptions(g, 300_000), (client) => client.exportTranscript({ session: { sessionId } }));
        if (!opts.output) {
          process.stdout.write(Buffer.from(res.jsonl));
          return;
        }
        await writeFile(opts.output, res.jsonl);
        const note = `exported ${num(res.entries)} entries of session ${sessionId} to ${opts.output}\n`;
        if (g.json) process.stdout.write(`${JSON.stringify({ sessionId, entries: res.entries, file: opts.output })}\n`);
        else process.stderr.write(note);
      }),
    );
}
