import type { Command } from "commander";
import { CompactResponse } from "../../contract/gen/contextd/v1/session.js";
import { CompactionTarget } from "../../contract/gen/contextd/v1/types.js";
import { examples, keyValues, modeName, num, printJson, yesNo } from "../format.js";
import { accent, tone, warn } from "../style.js";
import { action, clientOptions, globals, positiveInt, withSessions } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

interface CompactOptions {
  budget: number;
  force?: boolean;
  threshold?: boolean;
}

/**
 * `contextctl compact ID`: compacts a session through its selected engine. Exit 1 when the answer
 * is not ok (the compaction failed); "nothing to compact" is ok and exits 0.
 */
export function registerCompact(program: Command): void {
  program
    .command("compact")
    .description("compact a session through its selected engine")
    .argument("<id>", "session id")
    .option("--budget <tokens>", "token budget the result must fit", positiveInt, 32_000)
    .option("--force", "compact even when the session is within the budget")
    .option("--threshold", "threshold target: compact older history, keep recent tokens verbatim, no hard budget")
    .addHelpText(
      "after",
      '\nExit 1 when the engine answers not ok; "nothing to compact" is ok (exit 0, compacted: no).\n' +
        "With --json: the CompactResponse (proto JSON).\n" +
        examples("contextctl compact chat-42 --budget 32000", "contextctl compact chat-42 --budget 8000 --force"),
    )
    .action(
      action(async (id: string, opts: CompactOptions, cmd: Command) => {
        const g = globals(cmd);
        const res = await withSessions(clientOptions(g, 300_000), (client) =>
          client.compact({
            session: { sessionId: id },
            tokenBudget: opts.budget,
            force: opts.force ?? false,
            compactionTarget: opts.threshold ? CompactionTarget.COMPACTION_TARGET_THRESHOLD : CompactionTarget.COMPACTION_TARGET_BUDGET,
          }),
        );
        if (!res.ok) process.exitCode = 1;
        if (g.json) return printJson(CompactResponse.toJSON(res));
        const r = res.result;
        const rows: [string, string][] = [
          ["engine", accent(terminalText(res.engineId || "-"))],
          ["mode", tone(modeName(res.mode))],
          ["ok", yesNo(res.ok)],
          ["compacted", yesNo(res.compacted)],
          ["reason", terminalText(res.reason || "-")],
          ["tokens", r ? `${num(r.tokensBefore)} → ${num(r.tokensAfter)}` : "-"],
        ];
        if (res.fallbackReason) rows.splice(2, 0, ["fallback reason", warn(terminalText(res.fallbackReason))]);
        writeStdout(`${keyValues(rows)}\n`);
      }),
    );
}
