import { styleText } from "node:util";

type Format = Parameters<typeof styleText>[0];

/**
 * Whether contextctl colours its output: never with NO_COLOR (any non-empty value, no-color.org) or
 * `--no-color`; always with FORCE_COLOR (unless it is `0` or `false`); else only when the stream is
 * a terminal that is not `TERM=dumb`. NO_COLOR wins over FORCE_COLOR, as in picocolors: someone who
 * set NO_COLOR asked for none, whatever a wrapper exported.
 */
export function colourWanted(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env, flag?: boolean): boolean {
  if (flag === false) return false;
  if (env.NO_COLOR) return false;
  const force = env.FORCE_COLOR;
  if (force !== undefined) return force !== "0" && force.toLowerCase() !== "false";
  return Boolean(stream.isTTY) && env.TERM !== "dumb";
}

// Decided once per process for stdout (the program's preAction hook applies `--no-color`); stderr
// lines are one-line errors that scripts match on, so they are never coloured.
let enabled = colourWanted(process.stdout);

export function setColour(on: boolean): void {
  enabled = on;
}

export function colourEnabled(): boolean {
  return enabled;
}

/**
 * `text` in `format` when colour is on, else unchanged. `validateStream: false` because the
 * decision is ours (Node 22+ would otherwise second-guess it against process.stdout; Node 20
 * ignores the option).
 */
export function paint(format: Format, text: string): string {
  return enabled && text ? styleText(format, text, { validateStream: false }) : text;
}

export const bold = (t: string) => paint("bold", t);
export const dim = (t: string) => paint("dim", t);
export const good = (t: string) => paint("green", t);
export const warn = (t: string) => paint("yellow", t);
export const bad = (t: string) => paint("red", t);
export const accent = (t: string) => paint("cyan", t);

/** A status word coloured by what it means: serving/normal green, fallback/degraded yellow, failures red. */
export function tone(word: string): string {
  if (/^(SERVING|NORMAL|ASSEMBLED|REGISTERED|RELEASED)$/.test(word)) return good(word);
  if (/^(FALLBACK|DEGRADED|PREASSEMBLY_MAY_OVERFLOW|UNKNOWN|HEALTH_CHANGED|DEREGISTERED)$/.test(word)) return warn(word);
  if (/^(NOT_SERVING|UNREACHABLE|ERROR|QUARANTINED|SERVICE_UNKNOWN)$/.test(word)) return bad(word);
  return word;
}
