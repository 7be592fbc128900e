import { z } from "zod";
import { envNameProblem, redactTokens, redactUrlCredentials } from "../contract/redact.js";
import { DURATION_HINT, MAX_DURATION_MS, formatDuration, parseDuration } from "./duration.js";

/**
 * The value types of the config file (config-schema.ts builds its sections from them): each
 * validates one value and says what was expected in the one-line `config: <path>: <why>` message.
 */

/**
 * Renders a value for an error message, short, with the credentials of any URL in it and any word
 * that reads as a token hidden (redact.ts): whatever field it was, a secret is not repeated.
 */
export function show(value: unknown): string {
  if (value === undefined) return "nothing";
  const s = redactTokens(redactUrlCredentials(JSON.stringify(value) ?? String(value)));
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

/**
 * A field that holds a secret, or something a secret is easily pasted into by mistake (a token in
 * `token_sha256`, a token in `token_env`): a string (a YAML number taken as its text), trimmed and
 * not empty, checked by `problem`. No message, of any kind of failure, repeats the value.
 */
const secretField = (what: string, problem: (v: string) => string | undefined) =>
  z.unknown().transform((v, ctx): string => {
    const fail = (message: string) => {
      ctx.issues.push({ code: "custom", message, input: undefined });
      return z.NEVER;
    };
    if (v === undefined) return fail("is required");
    if (typeof v !== "string" && typeof v !== "number") return fail(`expected ${what}, got a ${Array.isArray(v) ? "list" : typeof v} (the value is not shown)`);
    const text = String(v).trim();
    if (!text) return fail("must not be empty");
    const why = problem(text);
    return why ? fail(why) : text;
  });

export const expected = (what: string) => (iss: { input?: unknown }) => (iss.input === undefined ? "is required" : `expected ${what}, got ${show(iss.input)}`);

/** A non-empty trimmed string; YAML numbers are accepted as their text (an engine id `2024`). */
export const text = (what = "a string") =>
  z.preprocess(
    (v) => (typeof v === "number" ? String(v) : v),
    z
      .string({ error: expected(what) })
      .trim()
      .min(1, { error: "must not be empty", abort: true }),
  );

export const int = (min: 0 | 1) => {
  const error = expected(min ? "a positive integer" : "a non-negative integer");
  return z.number({ error }).int({ error }).min(min, { error }).max(Number.MAX_SAFE_INTEGER, { error });
};

export const bool = () => z.boolean({ error: expected("true or false") });

export const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: (iss) => `${show(iss.input)} is not one of ${values.join(", ")}` });

/** A duration string (`500ms`, `2s`, `3m`) as milliseconds: longer than 0, or with `allowZero` `0s` too ("no wait"). */
function durationMs(allowZero: boolean) {
  return z.unknown().transform((v, ctx): number => {
    let ms: number;
    try {
      if (typeof v !== "string") throw new RangeError(`${show(v)} is not a duration (${DURATION_HINT})`);
      ms = parseDuration(v);
    } catch (e) {
      ctx.issues.push({ code: "custom", message: (e as Error).message, input: v });
      return z.NEVER;
    }
    if ((ms <= 0 && !allowZero) || ms > MAX_DURATION_MS) {
      const why = ms <= 0 ? "must be longer than 0" : `is too long (at most ${formatDuration(3_600_000 * 596)})`;
      ctx.issues.push({ code: "custom", message: `${show(v)} ${why}`, input: v });
      return z.NEVER;
    }
    return ms;
  });
}
export const duration = () => durationMs(false);

/** The longest retention limit: 100 years. */
const MAX_RETENTION_MS = 100 * 365 * 86_400_000;

/**
 * A retention limit: a duration (`90s`, `12h`) or whole days (`30d`), longer than 0. Not bound by
 * setTimeout's ~24.8 days: nothing waits on it, it is compared with stored times.
 */
export const retentionDuration = () =>
  z.unknown().transform((v, ctx): number => {
    const days = typeof v === "string" ? /^(\d+(?:\.\d+)?)d$/.exec(v.trim()) : null;
    let ms: number;
    try {
      if (typeof v !== "string") throw new RangeError(`${show(v)} is not a duration (use 12h, 30d)`);
      ms = days ? Math.round(Number(days[1]) * 86_400_000) : parseDuration(v);
    } catch (e) {
      ctx.issues.push({ code: "custom", message: (e as Error).message.replace(DURATION_HINT, "use 12h, 30d"), input: v });
      return z.NEVER;
    }
    if (ms <= 0 || ms > MAX_RETENTION_MS) {
      ctx.issues.push({ code: "custom", message: `${show(v)} ${ms <= 0 ? "must be longer than 0" : "is too long (at most 36500d)"}`, input: v });
      return z.NEVER;
    }
    return ms;
  });
export const durationOrZero = () => durationMs(true);

/** Checks `host:port` (`[v6]:port` for IPv6) or `unix:/path`; returns why it is not one. */
export function addressProblem(addr: string, allowPortZero: boolean): string | undefined {
  if (addr.startsWith("unix:")) return addr.length > 5 ? undefined : "unix: needs a socket path";
  const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/.exec(addr);
  const bad = `${show(addr)} is not an address (use host:port, [::1]:port or unix:/path)`;
  if (!m) return addr.split(":").length > 2 && !addr.startsWith("[") ? `${bad}; write IPv6 hosts in brackets` : bad;
  const port = Number(m[2]);
  if (port > 65535 || (port === 0 && !allowPortZero)) return `port ${port} out of range (${allowPortZero ? 0 : 1}..65535)`;
  return undefined;
}

export const address = (allowPortZero = true) =>
  text("an address").superRefine((v, ctx) => {
    const problem = addressProblem(v, allowPortZero);
    if (problem) ctx.addIssue({ code: "custom", message: problem, input: v });
  });

export const storeUrl = text("a store URL").superRefine((v, ctx) => {
  const bad = `${show(v)} is not a store URL (use sqlite:./path.db or postgres://user@host:5432/db)`;
  if (/^sqlite:/.test(v)) {
    if (v.length === 7) ctx.addIssue({ code: "custom", message: `${bad}: sqlite: needs a file path`, input: v });
    return;
  }
  if (!/^postgres(ql)?:\/\//.test(v) || !URL.canParse(v)) ctx.addIssue({ code: "custom", message: bad, input: v });
});

/**
 * The NAME of an environment variable (`token_env`, `api_key_env`): the POSIX grammar, and not a
 * value that reads as a token (redact.ts envNameProblem). The value is never echoed in an error;
 * one that passes may be (`environment variable X is not set`).
 */
export const envName = secretField("an environment variable name", envNameProblem);
/** A sha256 digest as 64 hex characters, lower-cased. A raw token pasted here is not echoed. */
export const sha256 = secretField("64 hex characters", (v) =>
  /^[0-9a-fA-F]{64}$/.test(v)
    ? undefined
    : "is not a sha256 hex digest (64 hex characters); the value is not shown: if it is the token itself, write the token's sha256 here instead",
).transform((v) => v.toLowerCase());

export const filePath = text("a file path");
/** A map of strings; YAML numbers and booleans are taken as their text (env values). */
export const stringMap = z.record(
  z.string(),
  z.preprocess((v) => (typeof v === "number" || typeof v === "boolean" ? String(v) : v), z.string({ error: expected("a string") })),
);

export const number = (min: number, max: number) => {
  const error = expected(`a number from ${min} to ${max}`);
  return z.number({ error }).min(min, { error }).max(max, { error });
};

/** An http:// or https:// URL. */
export const httpUrl = () =>
  text("a URL").refine((v) => /^https?:\/\//.test(v) && URL.canParse(v), { error: (iss) => `${show(iss.input)} is not an http(s) URL` });
