/**
 * Identifier and error-line recognition for the extractive summarizer. Identifiers are the exact
 * tokens a model needs to continue work after compaction: file paths, function names, URLs,
 * ticket numbers, versions, environment variables, error messages and numbers with units.
 */

export type IdKind = "error" | "file" | "function" | "url" | "ticket" | "env" | "symbol" | "version" | "number";

export interface Identifier {
  kind: IdKind;
  value: string;
}

/** Render order of kinds in the Identifiers section; also the set of valid kind labels. */
export const ID_KINDS: readonly IdKind[] = ["file", "function", "url", "ticket", "error", "env", "symbol", "version", "number"];

/** How much a kind is worth keeping when the budget is tight. */
export const KIND_WEIGHT: Record<IdKind, number> = {
  error: 6,
  file: 6,
  function: 6,
  ticket: 6,
  url: 6,
  env: 5,
  symbol: 4,
  version: 4,
  number: 3,
};

export const MAX_ID_CHARS = 200;

export interface IdOptions {
  /** Also look for function/method names, camelCase symbols and `code spans` (prose, not raw output). */
  code: boolean;
  /** Also look for numbers with units (user and assistant prose only). */
  numbers: boolean;
}

const FILE_EXT =
  "ts|tsx|mts|cts|js|jsx|mjs|cjs|json|jsonc|json5|yaml|yml|toml|ini|cfg|conf|env|md|mdx|rst|txt|csv|tsv|xml|html|htm|css|scss|" +
  "sass|less|py|pyi|ipynb|rb|go|rs|java|kt|kts|scala|c|h|cc|cpp|cxx|hpp|hh|cs|fs|swift|m|mm|php|pl|lua|r|sql|sh|bash|zsh|" +
  "fish|ps1|bat|cmd|proto|graphql|gql|vue|svelte|astro|dart|ex|exs|erl|hs|ml|clj|tf|tfvars|hcl|lock|log|pem|crt|key|" +
  "gradle|sln|csproj|wasm|zip|tar|gz|tgz|db|sqlite|parquet|pdf|png|jpg|jpeg|gif|svg|dockerfile|mk|cmake|patch|diff";
const BARE_FILE = new RegExp(`^[\\w@+-][\\w@+.-]*\\.(?:${FILE_EXT})$`, "i");
const EXT_ONLY = new RegExp(`^(?:${FILE_EXT})$`, "i");
/** Product names that look like files. */
const NOT_FILES = new Set(["node.js", "next.js", "vue.js", "nuxt.js", "react.js", "three.js", "express.js", "d3.js", "chart.js", "socket.io"]);

const WIN_PATH = /^[A-Za-z]:\\[^\s"'<>|*?]*$/;
const UNIX_PATH = /^(?:~|\.{1,2})?\/?(?:[\w@+.-]+\/)*[\w@+.-]*$/;
const URL = /^(?:https?|wss?|ftp|file|ssh|git):\/\/\S+$/i;
const TICKET = /^(?:CVE-\d{4}-\d{4,7}|[A-Z][A-Z0-9]{1,9}-\d{1,6}|#\d{1,7})$/;
const TICKET_STOP = new Set(["UTF", "SHA", "ISO", "AES", "RSA", "MD", "ES", "TLS", "SSL", "HTTP", "IPV", "X", "COVID", "GPT", "P", "Q", "TOP", "K"]);
const VERSION =
  /^(?:v\d+(?:\.\d+){1,3}(?:-[0-9A-Za-z.]+)?|\d+\.\d+\.\d+(?:\.\d+)?(?:-[0-9A-Za-z.]+)?|@?[\w.-]+(?:\/[\w.-]+)?@[\^~]?\d+(?:\.[\dx*]+)*(?:-[0-9A-Za-z.]+)?)$/;
const ENV = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$/;
const CAMEL = /^[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*$/;
const NOT_SYMBOLS = new Set(["iPhone", "iPad", "iCloud", "iTunes", "macOS", "watchOS", "tvOS", "eBay", "eCommerce"]);
const URL_SCAN = /(?<![\w+.-])[a-z][\w+.-]*:\/\/[^\s"'`<>()[\]{}]+/gi;

const FUNC_CALL = /(?<![\w$.])([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*){0,3})\((\))?/g;
const CLASS_METHOD = /(?<![\w$./])([A-Z][\w$]*\.[a-z_$][\w$]*)(?![\w$(./])/g;
const CODE_SPAN = /`([^`\n]{2,120})`/g;
const KEYWORDS = new Set(
  "if for while switch catch function return typeof sizeof await yield new delete void import export require print with and or not".split(" "),
);
const NUMBER_UNIT =
  /(?<![\w.,$])(\$\s?\d(?:[\d,]{0,14}\d)?(?:\.\d{1,6})?|\d(?:[\d,]{0,14}\d)?(?:\.\d{1,6})?\s?(?:ms|milliseconds?|seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|[KMGTP]i?B|bytes?|tokens?|chars?|characters?|lines?|%|px|rps|qps|rpm|req\/s|MHz|GHz|cores?|vCPUs?|CPUs?|replicas?|retries|attempts?|workers?|threads?|connections?|users?|requests?|messages?|USD|EUR|GBP)|\d{1,9}(?:\.\d{1,6})?[smhdkKMG])(?![\w])/g;
const PORT = /\bport\s+(\d{2,5})\b/gi;
const TOKEN_SPLIT = /[\s"'`()[\]{}<>,;|=]+/;

const TRIM_START = new Set(["*", "_"]);
const TRIM_END = new Set([".", ":", "!", "?", "*", "_"]);

/** Strips emphasis markers and sentence punctuation around a token (a loop: no regex backtracking). */
function trimToken(t: string): string {
  let start = 0;
  let end = t.length;
  while (start < end && TRIM_START.has(t[start])) start++;
  while (end > start && TRIM_END.has(t[end - 1])) end--;
  return t.slice(start, end);
}

function isUnixPath(t: string): boolean {
  if (!UNIX_PATH.test(t) || !/[A-Za-z]/.test(t)) return false;
  const rooted = /^(?:~|\.{1,2})?\//.test(t);
  const segments = t.split("/").filter((s) => s && s !== "." && s !== ".." && s !== "~");
  const last = segments[segments.length - 1] ?? "";
  const hasExt = /\.[A-Za-z0-9]{1,10}$/.test(last) && !/^\d+\.\d+$/.test(last);
  if (rooted) return segments.length >= 2 || hasExt || t.startsWith("./") || t.startsWith("~/");
  return hasExt || segments.length >= 3;
}

/** Classifies one whitespace-delimited token; undefined when it is not an identifier. */
export function classifyToken(raw: string): Identifier | undefined {
  let t = raw;
  if (t.length > 400) return undefined;
  if (URL.test(t)) {
    t = trimToken(t);
    while (/[,;'"]$/.test(t)) t = trimToken(t.slice(0, -1));
    return t.length <= 300 ? { kind: "url", value: t } : undefined;
  }
  t = trimToken(t);
  if (t.length < 2 || t.length > MAX_ID_CHARS) return undefined;
  if (WIN_PATH.test(t)) return { kind: "file", value: t };
  if (t.includes("/") && !t.includes("//")) {
    const path = t.replace(/(?::\d+){1,2}$/, "");
    if (isUnixPath(path)) return { kind: "file", value: path };
  }
  if (TICKET.test(t)) {
    const prefix = t.split("-")[0];
    if (t.startsWith("#") || t.startsWith("CVE-") || !TICKET_STOP.has(prefix)) return { kind: "ticket", value: t };
    return undefined;
  }
  if (VERSION.test(t)) return { kind: "version", value: t };
  const file = t.replace(/(?::\d+){1,2}$/, "");
  if (BARE_FILE.test(file) && !NOT_FILES.has(file.toLowerCase()) && /[A-Za-z_-][\w@+-]/.test(file.slice(0, file.lastIndexOf(".")))) {
    return { kind: "file", value: file };
  }
  if (ENV.test(t) && t.length >= 4) return { kind: "env", value: t };
  return undefined;
}

/** All identifiers in `text`, in order of appearance (duplicates included; callers dedupe). */
export function extractIdentifiers(text: string, opts: IdOptions): Identifier[] {
  const out: Identifier[] = [];
  if (text.length > 200_000) text = text.slice(0, 200_000);
  if (opts.code) {
    for (const m of text.matchAll(CODE_SPAN)) {
      const inner = m[1].trim();
      const id = classifyToken(inner);
      if (id) out.push(id);
      else if (/^[A-Za-z_$][\w$]*(?:\.[\w$]+)*\(.*\)$/.test(inner)) out.push({ kind: "function", value: inner });
      else if (inner.length >= 2) out.push({ kind: "symbol", value: inner });
    }
  }
  // URLs first (they hold characters the token split below cuts at), then masked out.
  const prose = text.replace(URL_SCAN, (url) => {
    const id = classifyToken(url);
    if (id) out.push(id);
    return " ";
  });
  for (const token of prose.split(TOKEN_SPLIT)) {
    if (token.length < 2) continue;
    const id = classifyToken(token);
    if (id) out.push(id);
    else if (opts.code) {
      const word = trimToken(token);
      if (word.length >= 6 && CAMEL.test(word) && !NOT_SYMBOLS.has(word)) out.push({ kind: "symbol", value: word });
    }
  }
  if (opts.code) {
    for (const m of prose.matchAll(FUNC_CALL)) {
      const name = m[1];
      const called = m[2] !== undefined;
      if (KEYWORDS.has(name)) continue;
      if (called || name.includes("_") || name.includes(".") || /[a-z][A-Z]/.test(name)) {
        out.push({ kind: "function", value: `${name}()` });
      }
    }
    for (const m of prose.matchAll(CLASS_METHOD)) {
      const method = m[1].slice(m[1].indexOf(".") + 1);
      if (!EXT_ONLY.test(method) && !NOT_FILES.has(m[1].toLowerCase())) out.push({ kind: "function", value: m[1] });
    }
  }
  if (opts.numbers) {
    for (const m of text.matchAll(NUMBER_UNIT)) out.push({ kind: "number", value: m[1] });
    for (const m of text.matchAll(PORT)) out.push({ kind: "number", value: `port ${m[1]}` });
  }
  return out;
}

/** Tokens that may be a path, URL or ticket: they hold a slash, a backslash after a drive, or look like a ticket. */
const PATHISH =
  /(?<![\w.@~+:/\\-])(?:[a-z][\w+.-]*:\/\/[^\s"'`<>()[\]{}]+|[A-Za-z]:\\[^\s"'<>|*?]+|[\w.@~+-]*\/[\w.@+/-]*[\w@+-]|(?<![\w-])(?:[A-Z][A-Z0-9]{1,9}-\d{1,6}|#\d{1,7})(?![\w-]))/gi;
const PATHISH_TICKET = /^(?:[A-Z][A-Z0-9]{1,9}-\d{1,6}|#\d{1,7})$/;

/**
 * File paths, URLs and tickets in `text`, found by a cheap candidate scan (for bulk tool output):
 * at most `limit` distinct values not in `skip`.
 */
export function extractPaths(text: string, limit = Number.POSITIVE_INFINITY, skip?: ReadonlySet<string> | ReadonlyMap<string, unknown>): Identifier[] {
  const out: Identifier[] = [];
  const seen = new Set<string>();
  if (limit <= 0) return out;
  for (const m of text.matchAll(PATHISH)) {
    // Case-insensitive scan; tickets must really be upper case.
    if (PATHISH_TICKET.test(m[0].toUpperCase()) && !PATHISH_TICKET.test(m[0])) continue;
    const id = classifyToken(m[0]);
    if (!id || (id.kind !== "file" && id.kind !== "url" && id.kind !== "ticket")) continue;
    if (seen.has(id.value) || skip?.has(id.value)) continue;
    seen.add(id.value);
    out.push(id);
    if (out.length >= limit) break;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Error lines

/** A line that states an error message outright (`TypeError: …`, `error TS2322: …`, `panic: …`). */
const ERROR_MESSAGE =
  /(?:(?<![\w.])[A-Z][\w.]*(?:Error|Exception|Fault|Failure)\b|\bE(?:NO[A-Z]+|ACCES|ADDRINUSE|CONN[A-Z]+|PERM|EXIST|ISDIR|NOTDIR|TIMEDOUT|PIPE|MFILE|AI_AGAIN)\b|\berror(?:\[[\w-]+\])?|\bError|\bERROR|\bfatal|\bFATAL|\bpanic)(?:\s+TS\d+)?:\s*\S[^\n]*/;
/** Strong signals: an error message, a traceback, a test failure marker, an errno-style code. */
const STRONG_ERROR =
  /(?:\bTraceback \(most recent call last\)|\bpanicked at\b|\b[Ss]egmentation fault\b|\bnpm ERR!|^\s*(?:FAIL|FAILED|ERROR|FATAL)\b|^\s*[×✗✘]\s|\bE[A-Z]{3,}:|\b(?:code|errno):?\s*['"]?E[A-Z]{3,}\b|\bERR_[A-Z_]{3,}\b|\bexit(?:ed)? (?:with )?(?:code|status) [1-9]\d*)/;
/** Weak signals: the words the brief lists (error, exception, failed, traceback, panic, fatal). */
const WEAK_ERROR = /\b(?:errors?|exceptions?|fail(?:ed|ure|s|ing)?|traceback|panic(?:ked)?|fatal|denied|refused|timed out|cannot|can't|unable to|not found)\b/i;
const NOT_AN_ERROR = /\b(?:0|no|zero|without)\s+(?:errors?|failures?|failed|exceptions?|problems?)\b|^\s*(?:[✓✔√]|PASS\b|ok\b)/i;
/** Source-code lines mentioning errors (reading a file is not hitting an error). */
const CODE_LINE =
  /^\s*(?:(?:throw|catch|except|raise|if|else|elif|return|const|let|var|def|fn|func|function|class|import|from|export|try|finally|case)\b|\/\/|\/\*|\*\s|#\s|@\w)|new \w*Error\(|[{;]\s*$|=>/;

/** The exact error message inside `line` (from the error token to the end of the line), if any. */
export function errorMessageOf(text: string): string | undefined {
  const m = ERROR_MESSAGE.exec(text.length > 4000 ? text.slice(0, 4000) : text);
  if (!m) return undefined;
  const msg = m[0].trim();
  if (msg.length < 8 || NOT_AN_ERROR.test(msg) || CODE_LINE.test(msg)) return undefined;
  return msg.length > MAX_ID_CHARS ? msg.slice(0, MAX_ID_CHARS - 1).trimEnd() + "…" : msg;
}

/** Cheap pre-check: every error line contains one of these. */
const ERROR_HINT = /err|exception|fail|fault|traceback|panic|fatal|denied|refused|timed out|cannot|can't|unable|not found|exit|[×✗✘]/i;
const E_CODE_HINT = /E[A-Z]{3}/;

/** 2 = clearly an error line, 1 = mentions failure, 0 = not an error line. */
export function errorStrength(line: string): 0 | 1 | 2 {
  const l = line.length > 2000 ? line.slice(0, 2000) : line;
  if (!ERROR_HINT.test(l) && !E_CODE_HINT.test(l)) return 0;
  if (NOT_AN_ERROR.test(l) || CODE_LINE.test(l)) return 0;
  if (ERROR_MESSAGE.test(l) || STRONG_ERROR.test(l)) return 2;
  return WEAK_ERROR.test(l) ? 1 : 0;
}
