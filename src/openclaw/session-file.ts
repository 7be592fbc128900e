import { InvalidArgumentError } from "../contract/errors.js";
import { isBoolean, isRecord, isString, tryString, type JsonObject } from "./json.js";
import { eachLine, runAll, type Steps } from "../contract/time-slices.js";

/**
 * Reading and writing OpenClaw session JSONL files (OpenClaw 2026.9.x, `CURRENT_SESSION_VERSION =
 * 4`): a header line `{"type":"session","version":N,"id","timestamp","cwd",...}`, then one entry
 * per line, each with `type`, `id`, `parentId` and an ISO `timestamp`. Versions 3 and 4 share the
 * entry schema (v4 only changes how OpenClaw renders some text for the model); older files need
 * `openclaw doctor` first.
 */
export const SESSION_VERSION = 4;
export const READABLE_VERSIONS = [3, 4];

export interface SessionFileLine {
  /** 1-based line number in the file. */
  line: number;
  raw: JsonObject;
  /** Whether OpenClaw recognises the row as an entry (its `indexedSessionEntrySchema`). */
  recognized: boolean;
}

export interface SessionFile {
  header: JsonObject;
  entries: SessionFileLine[];
}

/**
 * Whether `text` is meant as an OpenClaw session file: its first line is a JSON object with a
 * string `type` (the header, or — in a file missing its header — an entry). Conversation lines (one
 * message per line, no `type`) are not.
 */
export function isSessionFile(text: string): boolean {
  const first = text.split(/\r?\n/, 50).find((l) => l.trim() !== "");
  if (!first) return false;
  try {
    const value = JSON.parse(first) as unknown;
    return isRecord(value) && isString(value.type);
  } catch {
    return false;
  }
}

/**
 * Parses a whole file. Throws InvalidArgumentError naming the 1-based line for a line that is not a
 * JSON object, an entry without a string id, an id used twice, or an unsupported version.
 */
export function parseSessionFile(text: string): SessionFile {
  return runAll(sessionFileSteps(text));
}

/**
 * {@link parseSessionFile} as steps, one per line, so a large file can be read a time slice at a
 * time (src/contract/time-slices.ts) without holding the event loop.
 */
export function* sessionFileSteps(text: string): Steps<SessionFile> {
  let header: JsonObject | undefined;
  const entries: SessionFileLine[] = [];
  const lineOf = new Map<string, number>();
  for (const [line, n] of eachLine(text)) {
    yield;
    if (line.trim() === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw new InvalidArgumentError(`jsonl line ${n}: invalid JSON (${(err as Error).message})`);
    }
    if (!isRecord(value)) throw new InvalidArgumentError(`jsonl line ${n}: a line must be a JSON object`);
    if (!header) {
      if (value.type !== "session") throw new InvalidArgumentError(`jsonl line ${n}: the first line must be the session header ({"type":"session",...})`);
      const version = value.version ?? 1;
      if (!READABLE_VERSIONS.includes(version as number)) {
        throw new InvalidArgumentError(
          `jsonl line ${n}: session version ${JSON.stringify(version)} is not supported (${READABLE_VERSIONS.join(" or ")}); migrate older files with \`openclaw doctor\` first`,
        );
      }
      header = value;
      continue;
    }
    if (value.type === "session") throw new InvalidArgumentError(`jsonl line ${n}: a second session header`);
    if (!isString(value.id) || value.id.trim() === "") throw new InvalidArgumentError(`jsonl line ${n}: an entry needs a non-empty string "id"`);
    if (value.id.length > 256) throw new InvalidArgumentError(`jsonl line ${n}: entry id is longer than 256 characters`);
    const first = lineOf.get(value.id);
    if (first !== undefined) throw new InvalidArgumentError(`jsonl line ${n}: entry id "${value.id}" is used on line ${first} too`);
    lineOf.set(value.id, n);
    entries.push({ line: n, raw: value, recognized: isRecognizedEntry(value) });
  }
  if (!header) throw new InvalidArgumentError("jsonl is empty: send the content of an OpenClaw session JSONL file");
  return { header, entries };
}

/** A whole file: the header, then each entry, one JSON object per line, with a trailing newline. */
export function serializeSessionFile(header: JsonObject, entries: JsonObject[]): string {
  return [header, ...entries].map((o) => JSON.stringify(o)).join("\n") + "\n";
}

const RESET_REASONS = new Set(["new", "reset", "idle", "daily", "cron-stale"]);
const COMPACTION_REPLAYS = new Set(["anthropic-compaction", "openai-responses-compaction", "openai-responses-retained-compaction"]);

/**
 * A row as OpenClaw's reader hands it on, before it classifies it: its JSONL parser
 * (`normalizeLoadedFileEntry`) turns an assistant's or tool result's string content into one text
 * block — dropping a compaction-type `providerReplay` of such a message — and a tool result's single
 * content object into a list; its classifier (`normalizePersistedLegacyHookMessage`) gives a
 * `custom` message without `customType` the type `"hook"`. The file itself keeps the row as written
 * (and contextd exports it so); the loaded form is what the model sees. Returns `raw` itself when
 * nothing changes.
 */
export function loadedEntry(raw: JsonObject): JsonObject {
  if (raw.type !== "message" || !isRecord(raw.message)) return raw;
  const m = raw.message;
  if ((m.role === "assistant" || m.role === "toolResult") && isString(m.content)) {
    const loaded: JsonObject = { ...m, content: [{ type: "text", text: m.content }] };
    if (isRecord(m.providerReplay) && COMPACTION_REPLAYS.has(m.providerReplay.type as string)) delete loaded.providerReplay;
    return { ...raw, message: loaded };
  }
  if (m.role === "toolResult" && isRecord(m.content)) return { ...raw, message: { ...m, content: [m.content] } };
  if (m.role === "custom" && m.customType === undefined && isReadableContent(m.content)) return { ...raw, message: { ...m, customType: "hook" } };
  return raw;
}

/**
 * OpenClaw's `indexedSessionEntrySchema` (src/config/sessions/session-entry-codec.ts), applied as
 * OpenClaw applies it: to the loaded form of the row (loadedEntry).
 */
export function isRecognizedEntry(row: JsonObject): boolean {
  const e = loadedEntry(row);
  if (!isString(e.id) || e.id === "") return false;
  if (e.parentId !== undefined && e.parentId !== null && !isString(e.parentId)) return false;
  if (e.timestamp !== undefined && !isString(e.timestamp)) return false;
  const nonEmpty = (v: unknown) => isString(v) && v !== "";
  switch (e.type) {
    case "message":
      return isReadableMessage(e.message);
    case "thinking_level_change":
      return nonEmpty(e.thinkingLevel);
    case "model_change":
      return nonEmpty(e.provider) && nonEmpty(e.modelId);
    case "compaction":
      return isString(e.summary) && nonEmpty(e.firstKeptEntryId) && typeof e.tokensBefore === "number";
    case "reset":
      // OpenClaw coerces the reason to a string first (`z.coerce.string()`): `["new"]` is "new"; a
      // reason String() throws on fails the row.
      return RESET_REASONS.has(tryString(e.reason) ?? "") && (e.firstKeptEntryId === undefined || isString(e.firstKeptEntryId));
    case "branch_summary":
      return isString(e.fromId) && isString(e.summary);
    case "custom":
      return nonEmpty(e.customType);
    case "custom_message":
      return nonEmpty(e.customType) && isReadableContent(e.content) && isBoolean(e.display);
    case "label":
      return nonEmpty(e.targetId) && (e.label === undefined || isString(e.label));
    case "session_info":
      return e.name === undefined || isString(e.name);
    default:
      return false;
  }
}

function isReadableContent(c: unknown): boolean {
  return isString(c) || (Array.isArray(c) && c.every((b) => isRecord(b) && isString(b.type)));
}

function isReadableMessage(m: unknown): boolean {
  if (!isRecord(m)) return false;
  switch (m.role) {
    case "user":
    case "assistant":
      return isReadableContent(m.content);
    case "toolResult":
      return isString(m.toolCallId) && isString(m.toolName) && isBoolean(m.isError) && Array.isArray(m.content);
    case "custom":
      return isString(m.customType) && isReadableContent(m.content);
    case "bashExecution":
      return isString(m.command) && isString(m.output);
    default:
      return false;
  }
}
