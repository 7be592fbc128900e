/**
 * An untrusted value as it may appear in an error message or a log line: JSON-quoted (so control
 * characters, bidi overrides and zero-width characters show as escapes instead of acting on a
 * terminal or a log viewer) and cut to `max` characters, with its full length said. A caller's
 * 1 MB page token or a 25 MB session key must not become a 1 MB log line, nor an echo of what it sent.
 */
export function quote(value: string, max = 64): string {
  const shown = value.length > max ? `${value.slice(0, max)}…` : value;
  const text = JSON.stringify(shown).replace(
    /[\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  return value.length > max ? `${text} (${value.length} characters)` : text;
}
