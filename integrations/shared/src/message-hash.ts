import { createHash } from "node:crypto";
import { blockText, type Message } from "contextd/client";

/**
 * A hash of what a model reads of a contextd message — role, text, reasoning, tool calls with
 * their arguments in key order, images, the tool result's id and error flag — and of nothing else:
 * never ids, provider metadata or `extra_json`, which a framework carries differently in a step's
 * answer and in the next step's prompt. The integrations put it into their message keys
 * (`<framework>:<position>.<part>:<hash>`), so that the same message at the same position of a
 * conversation has the same key whichever call brings it to contextd.
 */
export function contentHash(m: Message): string {
  const blocks = m.content
    .map((c) => {
      const b = c.block;
      if (b?.$case === "toolCall") return ["c", b.value.id, b.value.name, JSON.stringify(canonical(parseArguments(b.value.argumentsJson)))];
      if (b?.$case === "image") return ["i", b.value.mimeType, b.value.uri, createHash("sha256").update(b.value.data).digest("hex")];
      const t = blockText(c);
      return t ? [b?.$case ?? "", t] : null;
    })
    .filter(Boolean);
  return createHash("sha256")
    .update(JSON.stringify([m.role, m.toolCallId, m.isError, m.customType, blocks]))
    .digest("base64url")
    .slice(0, 22);
}

/** Tool-call arguments as a value (a text that is not JSON stays the text). */
function parseArguments(s: string): unknown {
  try {
    return s.trim() ? JSON.parse(s) : {};
  } catch {
    return s;
  }
}

/** A JSON value with every object's keys sorted. */
function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === "object")
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
    );
  return v;
}
