import { status as Status } from "@grpc/grpc-js";
import cliProgress from "cli-progress";
import type { Command } from "commander";
import type { Message } from "../../contract/gen/contextd/v1/types.js";
import type { ContextdClient } from "../../sdk/runtime-client.js";
import { readConversationFile, splitTurns } from "../conversation-file.js";
import { examples, modeName, num, printJson, table } from "../format.js";
import { action, clientOptions, globals, positiveInt, withSessions } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

interface ReplayOptions {
  budget: number;
  session?: string;
  agent?: string;
  batch?: boolean;
}

/**
 * One replayed turn: running totals over the turns so far after its messages were appended, and
 * what Assemble kept. `messages` / `tokensAppended` are the names scripts read before the totals
 * were named as such; they carry the same running totals and stay for them.
 */
export interface TurnResult {
  turn: number;
  messagesSoFar: number;
  tokensAppendedSoFar: number;
  /** = messagesSoFar (the older name). */
  messages: number;
  /** = tokensAppendedSoFar (the older name). */
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
 * With `--agent ID` the session is created under that agent id, so `slots.agents` routes it as it
 * would route that agent's real sessions.
 */
export function registerReplay(program: Command): void {
  program
    .command("replay")
    .description("replay a JSONL conversation turn by turn through AppendMessages and Assemble")
    .argument("<file>", "JSONL file: one message per line (simple chat, OpenClaw session or proto JSON form)")
    .requiredOption("--budget <tokens>", "token budget for each Assemble", positiveInt)
    .option("--session <id>", "session id (default replay-<timestamp>)")
    .option("--agent <id>", "agent id the session is created under, so its `slots.agents` engine serves it (default: none, the global slot)")
    .option("--batch", "append each turn in one AppendMessages call instead of one call per message")
    .addHelpText(
      "after",
      '\n"messages so far" and "tokens appended so far" are running totals over the turns replayed so far; "assembled"\n' +
        'and "compacted" are the turn\'s own. --agent applies to a new session: replaying into an existing session of\n' +
        "another agent fails (exit 1), as that session keeps its own agent's engine.\n" +
        'A progress bar on stderr when it is a terminal. With --json: {"sessionId", "agentId"?, "budget", "turns": [{"turn",\n' +
        '"messagesSoFar", "tokensAppendedSoFar", "kept", "compacted", "tokensBefore"?, "tokensAfter"?, "engine", "mode",\n' +
        '"fallbackReason"?, "messages", "tokensAppended"}], "summary"} ("messages" and "tokensAppended": the running totals\n' +
        "under their older names).\n" +
        examples(
          "contextctl replay conversation.jsonl --budget 8000",
          "contextctl replay session.jsonl --budget 32000 --session trial-1 --batch",
          "contextctl replay session.jsonl --budget 32000 --agent coder   # served by slots.agents.coder",
        ),
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
          results = await withSessions(clientOptions(g, 300_000), async (client) => {
            if (opts.agent !== undefined) await checkAgent(client, sessionId, opts.agent);
            return replayTurns(client, sessionId, turns, opts, (done, tokens) => bar?.update(done, { tokens: num(tokens) }));
          });
        } finally {
          bar?.stop();
        }
        const summary = summarize(sessionId, opts.agent, opts.budget, results);
        if (g.json) return printJson({ sessionId, ...(opts.agent !== undefined ? { agentId: opts.agent } : {}), budget: opts.budget, turns: results, summary });
        writeStdout(`${turnTable(results)}\n${summary.text}\n`);
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
  const session = { sessionId, agentId: opts.agent ?? "" };
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
      messagesSoFar: messages,
      tokensAppendedSoFar: tokensAppended,
      kept: res.estimatedTokens,
      compacted: res.compaction !== undefined,
      tokensBefore: res.compaction?.tokensBefore,
      tokensAfter: res.compaction?.tokensAfter,
      engine: res.engineId,
      mode: modeName(res.mode),
      ...(res.fallbackReason ? { fallbackReason: res.fallbackReason } : {}),
      messages,
      tokensAppended,
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
    r.messagesSoFar,
    r.tokensAppendedSoFar,
    r.kept,
    r.compacted ? `yes (${num(r.tokensBefore ?? 0)} → ${num(r.tokensAfter ?? 0)})` : "no",
    terminalText(r.engine || "-"),
    terminalText(r.fallbackReason ? `${r.mode}: ${r.fallbackReason}` : r.mode),
  ]);
  return table(["turn", "messages so far", "tokens appended so far", "assembled", "compacted", "engine", "mode"], rows);
}

/**
 * An existing session keeps the agent id it was created with (the server routes by the stored
 * one), so `--agent` on it would silently replay through another engine than asked: refused.
 */
async function checkAgent(client: ContextdClient, sessionId: string, agentId: string): Promise<void> {
  let stored: string;
  try {
    stored = (await client.getSession({ session: { sessionId, agentId } })).info?.session?.agentId ?? "";
  } catch (err) {
    if ((err as { code?: number }).code === Status.NOT_FOUND) return; // a new session: created under agentId
    throw err;
  }
  if (stored !== agentId)
    throw new Error(
      `session ${JSON.stringify(sessionId)} exists under agent ${JSON.stringify(stored)}, not ${JSON.stringify(agentId)}; --agent applies to a new session (pass another --session)`,
    );
}

function summarize(sessionId: string, agentId: string | undefined, budget: number, results: TurnResult[]) {
  const last = results[results.length - 1];
  const compactions = results.filter((r) => r.compacted).length;
  const maxKept = Math.max(0, ...results.map((r) => r.kept));
  const overBudget = results.filter((r) => r.kept > budget).length;
  const text =
    `replayed ${num(last.messages)} messages in ${results.length} turns into session ${sessionId}` +
    (agentId !== undefined ? ` (agent ${agentId})` : "") +
    ": " +
    `${num(last.tokensAppended)} tokens appended, ${compactions} compaction${compactions === 1 ? "" : "s"}, ` +
    `assembled at most ${num(maxKept)} of ${num(budget)} tokens` +
    (overBudget ? ` (${overBudget} turn${overBudget === 1 ? "" : "s"} over budget)` : "");
  return { messages: last.messages, turns: results.length, tokensAppended: last.tokensAppended, compactions, maxAssembled: maxKept, overBudget, text };
}
