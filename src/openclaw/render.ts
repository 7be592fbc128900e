import { tryString } from "./json.js";

/**
 * How OpenClaw 2026.9.x renders its harness messages for the model (`convertToLlm` and the summary
 * constructors in its `packages/agent-core/src/harness/messages.ts`), copied so that contextd's
 * `content` for these roles is exactly the text the model reads — and its token counts right.
 */
export const COMPACTION_SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
export const COMPACTION_SUMMARY_SUFFIX = "\n</summary>";
export const BRANCH_SUMMARY_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
export const BRANCH_SUMMARY_SUFFIX = "</summary>";

export interface BashExecution {
  command?: unknown;
  output?: unknown;
  exitCode?: unknown;
  cancelled?: unknown;
  truncated?: unknown;
  fullOutputPath?: unknown;
}

/**
 * A field as OpenClaw's template literals render it, for the values they can render. Where
 * `String()` throws (tryString) OpenClaw's own turn would fail; contextd renders the value's JSON
 * text instead, so that such a message is kept, not refused or lost.
 */
function textOf(v: unknown): string {
  if (v === null || v === undefined) return "";
  return tryString(v) ?? JSON.stringify(v) ?? "";
}

export function bashExecutionText(m: BashExecution): string {
  let text = `Ran \`${textOf(m.command)}\`\n`;
  if (m.output) text += `\`\`\`\n${textOf(m.output)}\n\`\`\``;
  else text += "(no output)";
  if (m.cancelled) text += "\n\n(command cancelled)";
  else if (m.exitCode !== null && m.exitCode !== undefined && m.exitCode !== 0) text += `\n\nCommand exited with code ${textOf(m.exitCode)}`;
  if (m.truncated && m.fullOutputPath) text += `\n\n[Output truncated. Full output: ${textOf(m.fullOutputPath)}]`;
  return text;
}

export function branchSummaryText(summary: unknown): string {
  return BRANCH_SUMMARY_PREFIX + textOf(summary) + BRANCH_SUMMARY_SUFFIX;
}

export function compactionSummaryText(summary: unknown): string {
  return COMPACTION_SUMMARY_PREFIX + textOf(summary) + COMPACTION_SUMMARY_SUFFIX;
}
