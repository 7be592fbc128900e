import { escapeUnsafe, hasUnsafeCharacters } from "./unsafe-characters.js";

/** The character class is unsafe-characters.ts's, shared with contextctl's terminal output. */
export { hasUnsafeCharacters };

/**
 * An untrusted value as it may appear in an error message or a log line: JSON-quoted (so control
 * characters, bidi overrides and zero-width characters show as escapes instead of acting on a
 * terminal or a log viewer) and cut to `max` characters, with its full length said. A caller's
 * 1 MB page token or a 25 MB session key must not become a 1 MB log line, nor an echo of what it sent.
 */
export function quote(value: string, max = 64): string {
  const shown = value.length > max ? `${value.slice(0, max)}…` : value;
  const text = escapeUnsafe(JSON.stringify(shown));
  return value.length > max ? `${text} (${value.length} characters)` : text;
}

/**
 * A message with untrusted parts — an engine's error text, a reason it gave — as it may be stored,
 * echoed to runtimes or logged: unsafe characters escaped as quote() escapes them, cut to at most
 * `max` characters (escapes included) with its full length said. Not quoted: it reads as the
 * sentence it is.
 */
export function boundedText(value: string, max = 1024): string {
  const shown = escapeUnsafe(value.length > max ? value.slice(0, max) : value);
  if (shown.length <= max && value.length <= max) return shown;
  return `${withoutCutEscape(shown.slice(0, max))}… (${value.length} characters)`;
}

/**
 * `text` without what, at its end, reads as a cut escape (`\u00` would read as a different
 * character): one of ours cut short, or a backslash-u the text itself held where it was cut —
 * repeatedly, since removing one can leave another (`\u202e\u\u2`). Linear: each step looks at
 * the last few characters only.
 */
function withoutCutEscape(text: string): string {
  for (;;) {
    const at = text.lastIndexOf("\\u");
    if (at < 0 || text.length - at > 5 || !/^[0-9a-fA-F]*$/.test(text.slice(at + 2))) return text;
    text = text.slice(0, at);
  }
}
