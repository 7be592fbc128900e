import type { Command } from "commander";
import type { Message } from "../../contract/gen/contextd/v1/types.js";
import { previewContext, type AssembledContext, type ContextItem } from "../../sdk/assembled-context.js";
import { examples, keyValues, lastColumnWidth, num, pct, printJson, table, type Cell } from "../format.js";
import { PREVIEW_CHARS, messagePreview, oneLine } from "../preview.js";
import { accent, bold, dim, tone, warn } from "../style.js";
import { action, clientOptions, globals, positiveInt, withSessions } from "./shared.js";
import { terminalBlock, terminalText, writeStdout } from "../terminal-text.js";

interface ContextOptions {
  budget: number;
  compact?: boolean;
  prompt?: string;
  model?: string;
  agent?: string;
  full?: boolean;
  width?: number;
}

const SECTION_NAMES = { summary: "summary", message: "messages", tool_result: "tool results" } as const;

/**
 * `contextctl context ID --budget N`: what the model would be sent on a turn with that budget —
 * SessionService.Assemble, routed as the runtime's own call is (the session's stored agent id picks
 * the engine), printed message by message with tokens and totals by section.
 *
 * By default the Assemble carries `auto_compact: false`, so looking never compacts the session; an
 * over-budget view is then shown as it is (mode DEGRADED). `--compact` lets the host compact first
 * as a real turn would — that commits a compaction entry.
 */
export function registerContext(program: Command): void {
  program
    .command("context")
    .description("show what the model would be sent: summary, messages, tool results and system prompt addition, with tokens")
    .argument("<id>", "session id")
    .requiredOption("--budget <tokens>", "token budget of the turn", positiveInt)
    .option("--compact", "let contextd compact first when over the budget, as a real turn would (changes the session)")
    .option(
      "--prompt <text>",
      'the runtime\'s prompt for the turn (AssembleRequest.prompt; some engines retrieve by it); default: the latest user message; "" for none',
    )
    .option("--model <name>", "the model the turn is for (AssembleRequest.model)")
    .option("--agent <id>", "route as this agent id (default: the session's own)")
    .option("--full", "print every message in full instead of a one-line preview per message")
    .option("--width <chars>", `preview width (default: the terminal's width, ${PREVIEW_CHARS} in a pipe)`, positiveInt)
    .addHelpText(
      "after",
      "\nInspecting never changes the session: without --compact the Assemble is sent with auto_compact: false\n" +
        "(the engine is still asked, so a sidecar hears an Assemble). With --compact contextd compacts first when the\n" +
        "view is over the budget, exactly as on a runtime's turn, and the compaction is committed.\n" +
        "Tokens are the host's stored counts; a message an engine made has none and is counted by contextctl (o200k_base).\n" +
        'With --json: {"session", "budget", "autoCompact", "engineId", "mode", "fallbackReason", "promptAuthority",\n' +
        '"estimatedTokens", "compaction", "systemPromptAddition": {"text", "tokens"}, "messages": [{"index", "section",\n' +
        '"role", "id", "tokens", "tokensCountedBy", "text", "message"}], "sections": {"summaryTokens", "messageTokens",\n' +
        '"toolResultTokens", "systemAdditionTokens", "totalTokens"}} (sections named as GetSession\'s overview).\n' +
        examples(
          "contextctl context chat-42 --budget 32000",
          "contextctl context chat-42 --budget 8000 --full | less",
          "contextctl --json context chat-42 --budget 32000 | jq .sections",
        ),
    )
    .action(
      action(async (id: string, opts: ContextOptions, cmd: Command) => {
        const g = globals(cmd);
        const autoCompact = Boolean(opts.compact);
        const { ctx, raw } = await withSessions(clientOptions(g, autoCompact ? 300_000 : 30_000), (client) =>
          previewContext(client, id, { budget: opts.budget, autoCompact, prompt: opts.prompt, model: opts.model, agentId: opts.agent }),
        );
        if (g.json) return printJson(ctx);
        writeStdout(`${render(ctx, raw, opts)}\n`);
      }),
    );
}

function render(ctx: AssembledContext, raw: Message[], opts: ContextOptions): string {
  const s = ctx.sections;
  const header: [string, string][] = [
    ["session", terminalText(ctx.session.agentId ? `${ctx.session.sessionId} (agent ${ctx.session.agentId})` : ctx.session.sessionId)],
    ["engine", `${accent(terminalText(ctx.engineId || "-"))}, mode ${tone(ctx.mode)}`],
    ...(ctx.fallbackReason ? ([["fallback reason", warn(terminalText(ctx.fallbackReason))]] as [string, string][]) : []),
    ["prompt authority", tone(ctx.promptAuthority)],
    ["budget", `${num(ctx.budget)} tokens`],
    ["assembled", `${num(ctx.messages.length)} messages, ${num(ctx.estimatedTokens)} tokens (${pct(ctx.estimatedTokens, ctx.budget)} of the budget)`],
    ["compaction", compactionText(ctx)],
  ];
  const body = opts.full ? fullText(ctx) : itemTable(ctx, raw, opts.width);
  const totals = [
    ["summary", count(ctx, "summary"), s.summaryTokens, pct(s.summaryTokens, s.totalTokens)],
    ["messages", count(ctx, "message"), s.messageTokens, pct(s.messageTokens, s.totalTokens)],
    ["tool results", count(ctx, "tool_result"), s.toolResultTokens, pct(s.toolResultTokens, s.totalTokens)],
    ["system addition", ctx.systemPromptAddition.text ? 1 : 0, s.systemAdditionTokens, pct(s.systemAdditionTokens, s.totalTokens)],
    ["total", ctx.messages.length + (ctx.systemPromptAddition.text ? 1 : 0), s.totalTokens, s.totalTokens > 0 ? "100.0%" : "-"],
  ];
  return `${keyValues(header)}\n\n${body}\n\ntokens by section\n${table(["section", "items", "tokens", "share"], totals)}`;
}

function compactionText(ctx: AssembledContext): string {
  const c = ctx.compaction as { tokensBefore?: number; tokensAfter?: number } | null;
  if (c) return `compacted first: ${num(c.tokensBefore ?? 0)} → ${num(c.tokensAfter ?? 0)} tokens`;
  if (ctx.autoCompact) return "none needed";
  return dim("off (inspection only; --compact compacts as a real turn would)");
}

function count(ctx: AssembledContext, section: ContextItem["section"]): number {
  return ctx.messages.filter((m) => m.section === section).length;
}

/** One row per thing the model reads: the system prompt addition first (it leads the system prompt), then the messages. */
function itemTable(ctx: AssembledContext, raw: Message[], width: number | undefined): string {
  const head = ["#", "section", "role", "id", "tokens", "text"];
  const rows: Cell[][] = [];
  const texts: string[] = [];
  if (ctx.systemPromptAddition.text) {
    rows.push(["-", "system addition", "system", "-", ctx.systemPromptAddition.tokens]);
    texts.push(ctx.systemPromptAddition.text);
  }
  for (const m of ctx.messages) {
    rows.push([String(m.index), SECTION_NAMES[m.section], m.role, terminalText(m.id || "-"), m.tokensCountedBy === "host" ? m.tokens : `~${num(m.tokens)}`]);
    texts.push(messagePreview(raw[m.index - 1], 10_000));
  }
  if (rows.length === 0) return "no messages";
  const max = width ?? lastColumnWidth(head, rows, PREVIEW_CHARS);
  const aligns = ["left", "left", "left", "left", "right", "left"] as const;
  return table(
    head,
    rows.map((r, i) => [...r, oneLine(texts[i], max)]),
    [...aligns],
  );
}

/** Every message in full, each under a rule naming its position, section, role, id and tokens. */
function fullText(ctx: AssembledContext): string {
  const blocks: string[] = [];
  if (ctx.systemPromptAddition.text)
    blocks.push(`${bold(`── system addition · ${num(ctx.systemPromptAddition.tokens)} tokens`)}\n${terminalBlock(ctx.systemPromptAddition.text)}`);
  for (const m of ctx.messages) {
    const tokens = `${m.tokensCountedBy === "host" ? "" : "~"}${num(m.tokens)} tokens`;
    blocks.push(`${bold(`── ${m.index} · ${SECTION_NAMES[m.section]} · ${m.role} · ${terminalText(m.id || "-")} · ${tokens}`)}\n${terminalBlock(m.text)}`);
  }
  return blocks.length ? blocks.join("\n\n") : "no messages";
}
