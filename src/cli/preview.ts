import { isSummaryMessage, summaryOf } from "../contract/messages.js";
import { messageBody, roleName } from "../sdk/message-text.js";
import { type Message, type TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import { num } from "./format.js";
import { terminalText } from "./terminal-text.js";

/**
 * Text for people: what a message or transcript entry says, as a one-line preview for tables or
 * in full for `contextctl context --full`. Never used for anything a script parses (--json
 * carries the proto JSON instead).
 */

/** Default preview width in a pipe (a terminal uses what is left of its width). */
export const PREVIEW_CHARS = 60;

/**
 * `text` on one line (runs of whitespace become one space), cut to `max` characters with `…`,
 * its control, bidi and zero-width characters escaped (terminal-text.ts): previews are tenant text.
 */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat.length <= max) return terminalText(flat);
  return `${terminalText(flat.slice(0, Math.max(0, max - 1)))}…`;
}

export { messageBody, roleName } from "../sdk/message-text.js";

/** A message for a table cell: a summary shows the summary itself rather than its preamble. */
export function messagePreview(m: Message, max: number): string {
  return oneLine(isSummaryMessage(m) ? summaryOf(m) : messageBody(m), max);
}

/**
 * The type column of `contextctl transcript`: a message entry by its role (or the runtime's own
 * entry type when it has one, e.g. `custom_message`), `compaction`, `custom`, or a runtime entry's
 * type (`model_change`, `label`, …).
 */
export function entryType(e: TranscriptEntry): string {
  const x = e.entry;
  if (!x) return e.runtimeType || "empty";
  switch (x.$case) {
    case "message":
      return e.runtimeType || roleName(x.value.role);
    case "compaction":
      return "compaction";
    case "custom":
      return "custom";
    case "runtime":
      return x.value.type || e.runtimeType || "runtime";
  }
}

/** Stored tokens of an entry: a message's count; other entries are not sent as they are. */
export function entryTokens(e: TranscriptEntry): number | undefined {
  return e.entry?.$case === "message" ? e.entry.value.tokenCount : undefined;
}

/** A transcript entry for a table cell. */
export function entryPreview(e: TranscriptEntry, max: number): string {
  const x = e.entry;
  if (!x) return oneLine(e.extraJson, max);
  switch (x.$case) {
    case "message":
      return messagePreview(x.value, max);
    case "compaction": {
      const c = x.value;
      return oneLine(`${num(c.tokensBefore)} → ${num(c.tokensAfter)} tokens by ${c.engineId || "?"}: ${c.summary}`, max);
    }
    case "custom":
      return oneLine(`${x.value.customType} ${x.value.dataJson}`, max);
    case "runtime":
      return oneLine(e.extraJson === "{}" ? "" : e.extraJson, max);
  }
}
