import { InvalidArgumentError } from "../contract/errors.js";
import { CompactionEntry, CustomEntry, Role, TranscriptEntry, type Message } from "../contract/gen/contextd/v1/types.js";
import { fromContextdMessage, toContextdMessage } from "./agent-message.js";
import { fromJsonText, isCount, isRecord, isString, toJsonText, type Json, type JsonObject } from "./json.js";
import { compact, extraJsonOf, parseExtra, restore } from "./lossless.js";
import { loadedEntry } from "./session-file.js";

/**
 * OpenClaw session JSONL entries ↔ contextd TranscriptEntries, losslessly (lossless.ts): an entry
 * exported from what was imported deep-equals the line it came from.
 *
 * - `message` → a message entry (agent-message.ts maps the message);
 * - `custom_message` and `branch_summary` → message entries (ROLE_CUSTOM, ROLE_BRANCH_SUMMARY)
 *   with `runtime_type` naming the entry type, because they reach the model; their message is the
 *   one OpenClaw builds from them (`createCustomMessage`, `createBranchSummaryMessage`);
 * - `compaction` → a compaction entry (summary, firstKeptEntryId, tokensBefore, tokensAfter,
 *   details); `custom` → a custom entry (customType, data);
 * - every other type (`model_change`, `thinking_level_change`, `label`, `session_info`, `reset`,
 *   `leaf`, and any row OpenClaw itself would not recognise) → a RuntimeEntry of that type.
 *
 * Entry timestamps are ISO strings in OpenClaw and milliseconds here (entryMillis); one that does
 * not survive the conversion exactly stays in `extra_json`.
 */
export function toTranscriptEntry(raw: JsonObject, recognized: boolean, field: string): TranscriptEntry {
  if (!isString(raw.id) || raw.id === "") throw new InvalidArgumentError(`${field}: an entry needs a non-empty string "id"`);
  const entry = TranscriptEntry.fromPartial({
    id: raw.id,
    parentId: isString(raw.parentId) ? raw.parentId : "",
    timestampMs: entryMillis(raw.timestamp),
  });
  const type = isString(raw.type) ? raw.type : "";
  const at = entry.timestampMs;
  if (!recognized) {
    entry.entry = { $case: "runtime", value: { type } };
  } else if (type === "message") {
    // The message as OpenClaw loads it (e.g. a legacy string content as a text block); when that
    // differs from the line, the line's own message stays in the entry's extra_json.
    entry.entry = { $case: "message", value: toContextdMessage(loadedEntry(raw).message, `${field}: message`) };
  } else if (type === "custom_message") {
    const message = { role: "custom", customType: raw.customType, content: raw.content, display: raw.display, details: raw.details, timestamp: at };
    entry.entry = { $case: "message", value: toContextdMessage(compact(message as Record<string, Json | undefined>), `${field}: custom_message`) };
    entry.runtimeType = type;
  } else if (type === "branch_summary") {
    const message = { role: "branchSummary", summary: raw.summary, fromId: raw.fromId, timestamp: at };
    entry.entry = { $case: "message", value: toContextdMessage(compact(message as Record<string, Json | undefined>), `${field}: branch_summary`) };
    entry.runtimeType = type;
  } else if (type === "compaction") {
    entry.entry = {
      $case: "compaction",
      value: CompactionEntry.fromPartial({
        summary: isString(raw.summary) ? raw.summary : "",
        firstKeptEntryId: isString(raw.firstKeptEntryId) ? raw.firstKeptEntryId : "",
        tokensBefore: isCount32(raw.tokensBefore) ? raw.tokensBefore : 0,
        tokensAfter: isCount32(raw.tokensAfter) ? raw.tokensAfter : 0,
        engineId: isString(raw.engineId) ? raw.engineId : "",
        details: isRecord(raw.details) ? raw.details : undefined,
      }),
    };
  } else if (type === "custom") {
    entry.entry = {
      $case: "custom",
      value: CustomEntry.fromPartial({ customType: isString(raw.customType) ? raw.customType : "", dataJson: toJsonText(raw.data) }),
    };
  } else {
    entry.entry = { $case: "runtime", value: { type } };
  }
  entry.extraJson = extraJsonOf(raw, rebuild(entry));
  return entry;
}

/** A TranscriptEntry as an OpenClaw session JSONL entry (the inverse of toTranscriptEntry). */
export function fromTranscriptEntry(entry: TranscriptEntry): JsonObject {
  return restore(rebuild(entry), parseExtra(entry.extraJson));
}

/** The OpenClaw entry that the proto fields alone describe, keys in the order OpenClaw writes them. */
function rebuild(entry: TranscriptEntry): JsonObject {
  const head = { id: entry.id, parentId: entry.parentId || null, timestamp: entry.timestampMs ? new Date(entry.timestampMs).toISOString() : undefined };
  const e = entry.entry;
  switch (e?.$case) {
    case "message":
      return rebuildMessageEntry(entry, e.value, head);
    case "compaction": {
      const c = e.value;
      return compact({
        type: "compaction",
        ...head,
        summary: c.summary,
        // OpenClaw needs a first kept entry; its own id keeps nothing before the compaction.
        firstKeptEntryId: c.firstKeptEntryId || entry.id,
        tokensBefore: c.tokensBefore,
        tokensAfter: c.tokensAfter || undefined,
        details: c.details as Json | undefined,
        engineId: c.engineId || undefined,
      });
    }
    case "custom":
      return compact({ type: "custom", customType: e.value.customType, data: fromJsonText(e.value.dataJson), ...head });
    case "runtime":
      return compact({ type: e.value.type, ...head });
    default:
      return compact({ type: "", ...head });
  }
}

function rebuildMessageEntry(entry: TranscriptEntry, message: Message, head: Record<string, Json | undefined>): JsonObject {
  const m = fromContextdMessage(message);
  if (entry.runtimeType === "custom_message" && message.role === Role.ROLE_CUSTOM) {
    return compact({ type: "custom_message", customType: m.customType, content: m.content, display: m.display, details: m.details, ...head });
  }
  if (entry.runtimeType === "branch_summary" && message.role === Role.ROLE_BRANCH_SUMMARY) {
    return compact({ type: "branch_summary", ...head, fromId: m.fromId, summary: m.summary });
  }
  return compact({ type: "message", ...head, message: m });
}

/**
 * Milliseconds of an entry timestamp as OpenClaw reads them (`parseDateStringTimestampMs`:
 * `Date.parse`, so "…T09:12:03Z" and "…+02:00" count too); 0 for none. OpenClaw dates the messages
 * it builds from entries (summaries, custom messages) so. A string that is not exactly what the
 * milliseconds print as (`toISOString`) is kept verbatim in `extra_json`.
 */
function entryMillis(value: unknown): number {
  const ms = isString(value) ? Date.parse(value) : NaN;
  return Number.isFinite(ms) ? ms : 0;
}

function isCount32(v: unknown): v is number {
  return isCount(v) && v <= 0xffffffff;
}
