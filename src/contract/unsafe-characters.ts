/**
 * Characters that act on a terminal or a log viewer instead of showing as themselves: C0 and C1
 * controls, DEL, line and paragraph separators (U+2028, U+2029), bidi embeddings, overrides and
 * isolates (U+202A–U+202E, U+2066–U+2069), zero-width characters and the BOM. Untrusted text shows
 * them as `\uXXXX` escapes. One class for everything contextd and contextctl print or store:
 * quote() and boundedText() (quote.ts), contextctl's terminal output (src/cli/terminal-text.ts).
 */
export const UNSAFE_CHARACTER_RANGES = "\\u0000-\\u001f\\u007f-\\u009f\\u200b-\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2060-\\u2069\\ufeff";

const UNSAFE_CHARACTERS = new RegExp(`[${UNSAFE_CHARACTER_RANGES}]`, "g");

/** `c` (one UTF-16 unit) as the escape untrusted text shows it as: `\u001b`. */
export function escapeCharacter(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

/** `text` with every unsafe character escaped, except those in `keep` (e.g. "\n\t" for a block of text). */
export function escapeUnsafe(text: string, keep = ""): string {
  return text.replace(UNSAFE_CHARACTERS, (c) => (keep.includes(c) ? c : escapeCharacter(c)));
}

/** Whether `value` holds any character that would act instead of showing (see UNSAFE_CHARACTER_RANGES). */
export function hasUnsafeCharacters(value: string): boolean {
  UNSAFE_CHARACTERS.lastIndex = 0;
  const found = UNSAFE_CHARACTERS.test(value);
  UNSAFE_CHARACTERS.lastIndex = 0;
  return found;
}
