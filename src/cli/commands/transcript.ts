import { InvalidArgumentError, type Command } from "commander";
import { TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import { examples, lastColumnWidth, num, table, writeOut, type Cell } from "../format.js";
import { PREVIEW_CHARS, entryPreview, entryTokens, entryType, oneLine } from "../preview.js";
import { progress } from "../progress.js";
import { dim } from "../style.js";
import { action, clientOptions, globals, positiveInt, withSessions } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

interface TranscriptOptions {
  pageSize: number;
  width?: number;
}

/** GetTranscript answers at most 5000 entries a page. */
const MAX_PAGE = 5000;

/**
 * `contextctl transcript ID`: the session's whole history, oldest first, every entry on every
 * branch (hidden ones included and marked), following GetTranscript's page tokens to the end.
 *
 * `--json` prints one TranscriptEntry as proto JSON per line (JSON Lines), written page by page as
 * the pages arrive: memory stays bounded whatever the size of the session, and `jq -c` or a line
 * reader takes it as it comes. (Proto JSON leaves out fields at their defaults: no `hidden` means
 * false.) If a page fails midway, the lines so far have been printed and the exit code is not 0.
 */
export function registerTranscript(program: Command): void {
  program
    .command("transcript")
    .description("page through a session's whole history: one row per entry (seq, id, parent, type, hidden, tokens, text)")
    .argument("<id>", "session id")
    .option("--page-size <n>", `entries per GetTranscript call (at most ${MAX_PAGE})`, pageSize, 1000)
    .option("--width <chars>", `preview width (default: the terminal's width, ${PREVIEW_CHARS} in a pipe)`, positiveInt)
    .addHelpText(
      "after",
      "\nType is a message's role (user, assistant, tool_result, …, or the runtime's entry type such as custom_message),\n" +
        "compaction, custom, or a runtime entry's type (model_change, label, …). Tokens are stored message counts.\n" +
        "Hidden entries (an abandoned branch, dropped by a reset, excluded from context) are never sent to the model.\n" +
        "With --json: JSON Lines, one TranscriptEntry (proto JSON) per line, oldest first.\n" +
        examples("contextctl transcript chat-42", "contextctl --json transcript chat-42 | jq -c 'select(.compaction)'"),
    )
    .action(
      action(async (id: string, opts: TranscriptOptions, cmd: Command) => {
        const g = globals(cmd);
        const head = ["seq", "id", "parent", "type", "hidden", "tokens", "text"];
        const rows: Cell[][] = [];
        const texts: string[] = [];
        const hidden: boolean[] = [];
        const stats = { entries: 0, messages: 0, compactions: 0, hidden: 0, tokens: 0 };
        await withSessions(clientOptions(g), async (client) => {
          // GetSession first: an unknown id is NOT_FOUND before any output, and the entry count
          // is the progress bar's total.
          const total = (await client.getSession({ session: { sessionId: id } })).info?.entryCount ?? 0;
          // Not while JSON lines stream to the same terminal (redirected to a file, the bar shows).
          const bar = progress({
            format: `transcript ${terminalText(id)} [{bar}] {value}/{total} entries`,
            total: Math.max(1, total),
            enabled: !(g.json && process.stdout.isTTY),
          });
          try {
            let lines: string[] = [];
            for await (const e of client.transcript(id, opts.pageSize)) {
              stats.entries += 1;
              if (g.json) {
                lines.push(JSON.stringify(TranscriptEntry.toJSON(e)));
                // Flush a page's worth at a time, so the output streams without a write per entry.
                if (lines.length >= opts.pageSize) lines = await flush(lines);
              } else {
                const tokens = entryTokens(e);
                if (tokens !== undefined) stats.messages += 1;
                if (e.entry?.$case === "compaction") stats.compactions += 1;
                if (e.hidden) stats.hidden += 1;
                if (tokens !== undefined && !e.hidden) stats.tokens += tokens;
                const shade = e.hidden ? dim : (t: string) => t;
                rows.push(
                  [e.seq, terminalText(e.id), terminalText(e.parentId || "-"), terminalText(entryType(e)), e.hidden ? "yes" : "no", tokens ?? ""].map((c) =>
                    typeof c === "string" ? shade(c) : c,
                  ),
                );
                texts.push(entryPreview(e, 10_000));
                hidden.push(e.hidden);
              }
              bar.update(stats.entries);
            }
            if (lines.length) await flush(lines);
          } finally {
            bar.stop();
          }
        });
        if (g.json) return;
        if (rows.length === 0) return void writeStdout("no entries\n");
        const max = opts.width ?? lastColumnWidth(head, rows, PREVIEW_CHARS);
        const out = table(
          head,
          rows.map((r, i) => [...r, hidden[i] ? dim(oneLine(texts[i], max)) : oneLine(texts[i], max)]),
          ["right", "left", "left", "left", "left", "right", "left"],
        );
        const summary =
          `${num(stats.entries)} entries: ${num(stats.messages)} messages, ${num(stats.compactions)} compactions, ` +
          `${num(stats.hidden)} hidden; ${num(stats.tokens)} tokens in messages that are not hidden`;
        await writeOut(`${out}\n${summary}\n`);
      }),
    );
}

async function flush(lines: string[]): Promise<string[]> {
  await writeOut(`${lines.join("\n")}\n`);
  return [];
}

function pageSize(value: string): number {
  const n = positiveInt(value);
  if (n > MAX_PAGE) throw new InvalidArgumentError(`at most ${MAX_PAGE}`);
  return n;
}
