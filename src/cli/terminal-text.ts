import { escapeCharacter, escapeUnsafe, UNSAFE_CHARACTER_RANGES } from "../contract/unsafe-characters.js";
import { colourEnabled } from "./style.js";

/**
 * What contextctl writes to a terminal. Tenant-controlled text — message content, session and
 * agent ids, session keys, engine ids, owners, quarantine reasons, error details — must not act on
 * the terminal of whoever runs contextctl: a colour code (`ESC[8m` hides text, black on black
 * hides it too), a bell, a cursor move, a right-to-left override that reorders what follows, a
 * line separator. Every such character shows as a `\uXXXX` escape (the class of
 * src/contract/unsafe-characters.ts, which quote() and boundedText() use too).
 *
 * Two layers:
 * - at the source, tenant text goes through terminalText() (one line: newlines and tabs escaped
 *   too) or terminalBlock() (a block that keeps its lines) before contextctl styles it;
 * - at the sink, everything written to stdout and stderr goes through terminalOutput(), which
 *   escapes every unsafe character except newlines, tabs and contextctl's own colours (only the
 *   SGR codes style.ts emits, and only while colour is on). Commands write through writeStdout /
 *   writeStderr / writeOut here, never process.stdout.write (eslint.config.js enforces it for src/cli).
 *
 * `--json` output goes through the sink as well: JSON.stringify escapes C0 controls but not DEL, C1
 * controls, bidi or zero-width characters; the sink writes those as `\uXXXX` escapes inside the
 * JSON strings (the only place they can be), which is valid JSON that parses to the same values.
 * So `--json` output is safe to look at on a terminal and loses nothing for a script.
 */

/** Tenant text on one line: every unsafe character escaped, newlines and tabs included. */
export function terminalText(text: string): string {
  return escapeUnsafe(text);
}

/** Tenant text as a block (message content shown whole): unsafe characters escaped, newlines and tabs kept. */
export function terminalBlock(text: string): string {
  return escapeUnsafe(text, "\n\t");
}

/** The SGR sequences style.ts emits: bold, dim, their reset; red, green, yellow, cyan, their reset. */
const OWN_COLOURS = "\\u001b\\[(?:1|2|22|31|32|33|36|39)m";
const WITH_COLOUR = new RegExp(`${OWN_COLOURS}|[${UNSAFE_CHARACTER_RANGES}]`, "g");
const WITHOUT_COLOUR = new RegExp(`[${UNSAFE_CHARACTER_RANGES}]`, "g");

/**
 * Output as it may reach a terminal: every unsafe character escaped except newlines, tabs and
 * (while colour is on) contextctl's own colour codes. Any other escape sequence — whoever's text it
 * came from — shows as `\u001b[…`.
 */
export function terminalOutput(text: string): string {
  return text.replace(colourEnabled() ? WITH_COLOUR : WITHOUT_COLOUR, (m) => (m.length > 1 || m === "\n" || m === "\t" ? m : escapeCharacter(m)));
}

/** A table cell (one line, maybe styled by contextctl): every unsafe character escaped except contextctl's own colour codes. */
export function terminalCell(text: string): string {
  return text.replace(WITH_COLOUR, (m) => (m.length > 1 ? m : escapeCharacter(m)));
}

/** Writes `text` to stdout through terminalOutput. */
export function writeStdout(text: string): void {
  // eslint-disable-next-line no-restricted-syntax -- the one place contextctl writes to stdout
  process.stdout.write(terminalOutput(text));
}

/** Writes `text` to stderr through terminalOutput (stderr is never coloured). */
export function writeStderr(text: string): void {
  // eslint-disable-next-line no-restricted-syntax -- the one place contextctl writes to stderr
  process.stderr.write(escapeUnsafe(text, "\n\t"));
}

/** Writes to stdout through terminalOutput and resolves once it is flushed (large outputs must not be cut by process.exit). */
export function writeOut(text: string): Promise<void> {
  return new Promise((resolve, reject) =>
    // eslint-disable-next-line no-restricted-syntax -- as writeStdout, with a callback
    process.stdout.write(terminalOutput(text), (err) => (err ? reject(err) : resolve())),
  );
}
