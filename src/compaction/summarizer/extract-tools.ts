/**
 * Tool calls, reduced to their name and salient arguments (paths, commands, URLs, search
 * patterns); bodies such as file contents or edit strings are left out.
 */
import { extractPaths, MAX_ID_CHARS, type Identifier } from "./extract-identifiers.js";
import { clip, oneLine } from "./extract-text.js";

const PATH_KEY =
  /^(?:paths?|files?|file_?paths?|file_?names?|target(?:_?file)?|source|src|dest(?:ination)?|dir(?:ectory)?|cwd|workdir|working_?directory|old_?path|new_?path|notebook_?path|module)$/i;
const COMMAND_KEY = /^(?:command|cmd|script|args|argv|shell)$/i;
const URL_KEY = /^(?:url|uri|href|endpoint|link)$/i;
const QUERY_KEY = /^(?:pattern|query|q|glob|regex|search|symbol|name|branch|ref)$/i;

export interface ToolCallSummary {
  /** "name: salient args", or just the name. */
  text: string;
  ids: Identifier[];
}

function strings(v: unknown): string[] {
  if (typeof v === "string") return [v];
  if (Array.isArray(v)) return v.filter((x): x is string => typeof x === "string").slice(0, 5);
  return [];
}

export function describeToolCall(name: string, argumentsJson: string): ToolCallSummary {
  const tool = clip(oneLine(name), 60) || "tool";
  const parts: string[] = [];
  const ids: Identifier[] = [];
  let args: unknown;
  if (argumentsJson && argumentsJson.length <= 100_000) {
    try {
      args = JSON.parse(argumentsJson);
    } catch {
      args = undefined;
    }
  }
  if (args && typeof args === "object" && !Array.isArray(args)) {
    for (const [key, value] of Object.entries(args as Record<string, unknown>)) {
      if (COMMAND_KEY.test(key)) {
        const cmd = Array.isArray(value) ? strings(value).join(" ") : (strings(value)[0] ?? "");
        if (!cmd) continue;
        parts.push(clip(oneLine(cmd), 160));
        ids.push(...extractPaths(cmd.slice(0, 4000)).filter((i) => i.kind !== "ticket"));
        continue;
      }
      for (const v of strings(value)) {
        const val = v.trim();
        if (!val || val.includes("\n")) continue;
        if (PATH_KEY.test(key) && val.length <= MAX_ID_CHARS) {
          parts.push(val);
          ids.push({ kind: /^[a-z][\w+.-]*:\/\//i.test(val) ? "url" : "file", value: val });
        } else if (URL_KEY.test(key) && val.length <= 300) {
          parts.push(val);
          ids.push({ kind: "url", value: val });
        } else if (QUERY_KEY.test(key)) {
          parts.push(`"${clip(val, 60)}"`);
        }
      }
    }
  } else if (argumentsJson) {
    for (const id of extractPaths(argumentsJson.slice(0, 4000))) {
      if (id.kind === "ticket") continue;
      ids.push(id);
      if (parts.length < 3) parts.push(id.value);
    }
  }
  return { text: parts.length > 0 ? `${tool}: ${clip(parts.join(" "), 200)}` : tool, ids };
}
