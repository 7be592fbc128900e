import cliProgress from "cli-progress";
import type { Command } from "commander";
import type { Message } from "../../contract/gen/contextd/v1/types.js";
import type { ContextdClient } from "../../sdk/runtime-client.js";
import { readConversationFile, splitTurns } from "../conversation-file.js";
import { examples, modeName, num, printJson, table } from "../format.js";
import { action, clientOptions, globals, positiveInt, withSessions } from "./shared.js";

interface ReplayOptions {
  budget: number;
  session?: string;
  batch?: boolean;
}

/** One replayed turn: cumulative counts after its messages were appended, and what Assemble kept. */
export interface TurnResult {
  turn: number;
  messages: number;
  tokensAppended: number;
  kept: number;
  compacted: boolean;
  tokensBefore?: number;
  tokensAfter?: number;
  engine: string;
  mode: string;
  fallbackReason?: string;
}

/** AppendMessages accepts at most `limits.max_messages_per_append` (default 1000) per call. */
const MAX_PER_APPEND = 1000;

/**
 * `contextctl replay FILE --budget N`: feeds a JSONL conversation (see conversation-file.ts) through
 * the server turn by turn — a turn starts at each user message; its messages are appended, then
 * Assemble runs with the budget — and prints what was kept per turn. Messages are appended one
 * AppendMessages call each (the engine sees Ingest); with `--batch` a turn is one call (IngestBatch).
 */
export function registerReplay(program: Command): void {
  program
    .command("replay")
    .description("replay a JSONL conversation turn by turn through AppendMessages and Assemble")
    .argument("<file>", "JSONL file: one message per line (simple chat, OpenClaw session or proto JSON form)")
    .requiredOption("--budget <tokens>", "token budget for each Assemble", positiveInt)
    .option("--session <id>", "session id (default replay-<timestamp>)")
    .option("--batch", "append each turn in one AppendMessages call instead of one call per message")
    .addHelpText(
      "after",
      "\nA progress bar on stderr when it is a terminal. With --json: {\"sessionId\", \"budget\", \"turns\": [{\"turn\", \"messages\",\n" +
        '"tokensAppended", "kept", "compacted", "tokensBefore"?, "tokensAfter"?, "engine", "mode", "fallbackReason"?}], "summary"}.\n' +
        examples("contextctl replay conversation.jsonl --budget 8000", "contextctl replay session.jsonl --budget 32000 --session trial-1 --batch"),
    )
    .action(
      action(async (file: string, opts: ReplayOptions, cmd: Command) => {
        const g = globals(cmd);
        const messages = await readConversationFile(file);
        if (messages.length === 0) throw new Error(`${file}: no messages`);
        const turns = splitTurns(messages);
        const sessionId = opts.session ?? `replay-${new Date().toISOString().replace(/[-:.]/g, "")}`;
        const bar = process.stderr.isTTY ? progressBar(turns.length) : undefined;
        let results: TurnResult[];
        try {
          results = await withSessions(clientOptions(g, 300_000), (client) =>
            replayTurns(client, sessionId, turns, opts, (done, tokens) => bar?.update(done, { tokens: num(tokens) })),
          );
        } finally {
          bar?.stop();
        }
        const summary = summarize(sessionId, opts.budget, results);
        if (g.json) return printJson({ sessionId, budget: opts.budget, turns: results, summary });
        process.stdout.write(`${turnTable(results)}\n${summary.text}\n`);
      }),
    );
}

export async function replayTurns(
  client: ContextdClient,
  sessionId: string,
  turns: Message[][],
  opts: ReplayOptions,
  progress: (turnsDone: number, tokensAppended: number) => void,
): Promise<TurnResult[]> {
  const session = { sessionId };
  const results: TurnResult[] = [];
  let messages = 0;
  let tokensAppended = 0;
  for (const [index, turn] of turns.entries()) {
    const size = opts.batch ? MAX_PER_APPEND : 1;
    for (let i = 0; i < turn.length; i += size) {
      const res = await client.appendMessages({ session, messages: turn.slice(i, i + size) });
      messages += res.entryIds.length;
      tokensAppended += res.tokenCounts.reduce((a, b) => a + b, 0);
    }
    const res = await client.assemble({ session, tokenBudget: opts.budget });
    results.push({
      turn: index + 1,
      messages,
      tokensAppended,
      kept: res.estimatedTokens,
      compacted: res.compaction !== undefined,
      tokensBefore: res.compaction?.tokensBefore,
      tokensAfter: res.compaction?.tokensAfter,
      engine: res.engineId,
      mode: modeName(res.mode),
      ...(res.fallbackReason ? { fallbackReason: res.fallbackReason } : {}),
    });
    progress(index + 1, tokensAppended);
  }
  return results;
}

function progressBar(total: number): cliProgress.SingleBar {
  const bar = new cliProgress.SingleBar(
    { stream: process.stderr, format: "replay [{bar}] {value}/{total} turns | {tokens} tokens appended", hideCursor: true, clearOnComplete: true },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, { tokens: "0" });
  return bar;
}

function turnTable(results: TurnResult[]): string {
  const rows = results.map((r) => [
    r.turn,
    r.messages,
    r.tokensAppended,
    r.kept,
    r.compacted ? `yes (${num(r.tokensBefore ?? 0)} → ${num(r.tokensAfter ?? 0)})` : "no",
    r.engine || "-",
    r.fallbackReason ? `${r.mode}: ${r.fallbackReason}` : r.mode,
  ]);
  return table(["turn", "messages", "tokens appended", "assembled", "compacted", "engine", "mode"], rows);
}

function summarize(sessionId: string, budget: number, results: TurnResult[]) {
  const last = results[results.length - 1];
  const compactions = results.filter((r) => r.compacted).length;
  const maxKept = Math.max(0, ...results.map((r) => r.kept));
  const overBudget = results.filter((r) => r.kept > budget).length;
  const text =
    `replayed ${num(last.messages)} messages in ${results.length} turns into session ${sessionId}: ` +
    `${num(last.tokensAppended)} tokens appended, ${compactions} compaction${compactions === 1 ? "" : "s"}, ` +
    `assembled at most ${num(maxKept)} of ${num(budget)} tokens` +
    (overBudget ? ` (${overBudget} turn${overBudget === 1 ? "" : "s"} over budget)` : "");
  return { messages: last.messages, turns: results.length, tokensAppended: last.tokensAppended, compactions, maxAssembled: maxKept, overBudget, text };
}
