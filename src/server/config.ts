import { accessSync, constants, readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import type { z } from "zod";
import { deepMerge, parseMergeValue } from "./config-env-merge.js";
import { configSchema, type ContextdConfig } from "./config-schema.js";
import { containersAt, knownKeys } from "./config-shape.js";
import { show } from "./config-values.js";
import { engineReservations } from "./engine-ownership.js";

export type * from "./config-schema.js";
export { parseDuration, formatDuration } from "./duration.js";

/**
 * Loading the config file (every key and its default: docs/configuration.md).
 *
 * Sources, later wins: built-in defaults < the YAML file < `CONTEXTD_*` environment variables.
 * - The file is `file`, else `$CONTEXTD_CONFIG`, else `config/contextd.yaml` under the cwd. Only the
 *   implicit default may be missing (then the built-in defaults apply; they require auth).
 * - `CONTEXTD_` + the key path upper-cased, `__` between levels: `CONTEXTD_ENGINES__TIMEOUTS__COMPACT=2s`.
 *   Values are YAML (`false`, `12`, `[a, b]`, `{a: 1}`); a value that is not valid YAML is taken as text;
 *   an empty value counts as unset; `null` removes the key (back to its default). A variable replaces
 *   the whole value at its path (no deep merge). Map keys (agent, engine, owner ids) match existing keys
 *   case-insensitively with `-` written as `_`, and a new key is taken lower-cased; list items are
 *   addressed by index (`..._RUNTIMES__0__AGENTS`). A key a name cannot spell (`Team-A`, `a.b`) goes in
 *   the value: `CONTEXTD_SLOTS__AGENTS='{Team-A: lossless}'` replaces the map, and
 *   `CONTEXTD_SLOTS__AGENTS='@merge {Team-A: lossless}'` merges into it (config-env-merge.ts).
 *   Variables whose first segment is not a top-level key (CONTEXTD_RUNTIME_TOKEN, CONTEXTD_REGISTRY, ...)
 *   are not config: clients and engines read them. But a name with `__` is a key path and nothing else
 *   uses that form, so an unknown first segment there is an unknown key (an error, not ignored); and a
 *   single-segment name one typo away from a top-level key (CONTEXTD_LISTN) is reported by
 *   `misspeltEnvVariables` for the server to warn about.
 * - A YAML `null` (a key left empty) means "not set": the default applies.
 *
 * Every problem is a ConfigError with one line: `config: <key path>: <why>`.
 */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

export interface LoadConfigOptions {
  file?: string;
  env?: NodeJS.ProcessEnv;
}

export const DEFAULT_CONFIG_FILE = "config/contextd.yaml";

type Path = PropertyKey[];
interface Origin {
  path: Path;
  variable: string;
}

export function loadConfig(options: LoadConfigOptions = {}): ContextdConfig {
  const env = options.env ?? process.env;
  const explicit = options.file ?? (env.CONTEXTD_CONFIG || undefined);
  const file = explicit ?? DEFAULT_CONFIG_FILE;
  let raw: Record<string, unknown> = {};
  let source: string | undefined;
  try {
    source = readFileSync(file, "utf8");
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (explicit !== undefined || err.code !== "ENOENT") throw new ConfigError(`config: cannot read ${file}: ${err.code ?? err.message}`);
  }
  if (source !== undefined) {
    let doc: unknown;
    try {
      doc = parseYaml(source);
    } catch (e) {
      throw new ConfigError(`config: ${file}: invalid YAML: ${(e as Error).message.split("\n")[0].replace(/:$/, "")}`);
    }
    if (doc !== null && doc !== undefined) {
      if (typeof doc !== "object" || Array.isArray(doc)) throw new ConfigError(`config: ${file}: the top level must be a mapping of keys, got ${show(doc)}`);
      raw = doc as Record<string, unknown>;
    }
  }
  const origins = applyEnvOverrides(raw, env);
  return validate(stripNulls(raw), origins, env);
}

/** The engine ids the config reserves, `[id, owner]` (validated by loadConfig). */
export function reservedEngines(cfg: ContextdConfig): Array<[string, string]> {
  return engineReservations(cfg, (path, why) => new ConfigError(`config: ${pathText(path)}: ${why}`));
}

/** The built-in defaults (those docs/configuration.md lists): what an empty config file yields. */
export function defaultConfig(): ContextdConfig {
  return validate({}, [], {});
}

/**
 * The HostService address engines dial when `host_endpoint` is not configured: the listen address with a
 * wildcard host replaced by loopback. Call it again with the bound address when `listen` used port 0.
 */
export function defaultHostEndpoint(listen: string): string {
  return listen.replace(/^0\.0\.0\.0:/, "127.0.0.1:").replace(/^\[::\]:/, "[::1]:");
}

function validate(raw: unknown, origins: Origin[], env: NodeJS.ProcessEnv): ContextdConfig {
  const result = configSchema.safeParse(raw, { reportInput: true, error: errorMap });
  if (!result.success) throw new ConfigError(formatIssues(result.error.issues, origins));
  const cfg: ContextdConfig = { ...result.data, host_endpoint: result.data.host_endpoint ?? defaultHostEndpoint(result.data.listen) };
  const fail = (path: Path, why: string) => new ConfigError(`config: ${pathText(path)}${fromEnv(path, origins)}: ${why}`);

  if (/^postgres/.test(cfg.store) && new URL(cfg.store).password && !origins.some((o) => o.path[0] === "store"))
    throw fail(["store"], "no passwords in the config file: set PGPASSWORD, or the whole URL in CONTEXTD_STORE");
  const files: Array<[Path, string | undefined]> = [
    [["tls", "cert_file"], cfg.tls?.cert_file],
    [["tls", "key_file"], cfg.tls?.key_file],
    [["tls", "client_ca_file"], cfg.tls?.client_ca_file],
    [["engines", "tls", "ca_file"], cfg.engines.tls?.ca_file],
    [["engines", "tls", "cert_file"], cfg.engines.tls?.cert_file],
    [["engines", "tls", "key_file"], cfg.engines.tls?.key_file],
  ];
  for (const [path, f] of files) {
    if (f === undefined) continue;
    try {
      accessSync(f, constants.R_OK);
    } catch (e) {
      throw fail(path, `cannot read ${show(f)} (${(e as NodeJS.ErrnoException).code ?? "error"})`);
    }
  }
  engineReservations(cfg, fail);
  const s = cfg.compaction.summarizer;
  if (s.kind === "openai" && !env[s.api_key_env]) throw fail(["compaction", "summarizer", "api_key_env"], `environment variable ${s.api_key_env} is not set`);
  return cfg;
}

// ---- environment overrides ----

function applyEnvOverrides(raw: Record<string, unknown>, env: NodeJS.ProcessEnv): Origin[] {
  const top = new Set(knownKeys([]));
  const vars = Object.entries(env)
    .filter((e): e is [string, string] => e[0].startsWith("CONTEXTD_") && e[1] !== undefined && e[1] !== "")
    .map(([variable, value]) => ({ variable, value, segs: variable.slice("CONTEXTD_".length).toLowerCase().split("__") }))
    .filter((v) => {
      if (top.has(v.segs[0])) return true;
      if (v.segs.length > 1 && v.segs[0] !== "")
        throw new ConfigError(`config: unknown key ${JSON.stringify(v.segs[0])}${unknownKeyHint([], v.segs[0])} (from env ${v.variable})`);
      return false;
    })
    .sort((a, b) => a.segs.length - b.segs.length || a.variable.localeCompare(b.variable));
  const origins: Origin[] = [];
  for (const { variable, value, segs } of vars) {
    if (segs.includes("")) throw new ConfigError(`config: ${variable}: malformed name (CONTEXTD_ + key path, "__" between levels)`);
    let node = raw as Record<string | number, unknown>;
    const path: Path = [];
    let merged = false;
    segs.forEach((seg, i) => {
      let key: string | number = seg;
      if (Array.isArray(node)) {
        if (!/^\d+$/.test(seg) || Number(seg) > node.length)
          throw new ConfigError(`config: ${variable}: ${pathText(path)} is a list; use an index 0..${node.length}`);
        key = Number(seg);
      } else {
        key = Object.keys(node).find((k) => k.toLowerCase().replace(/-/g, "_") === seg) ?? seg;
      }
      const containers = containersAt(path);
      if (!containers.some((c) => c.kind !== "section" || c.keys.includes(String(key))))
        throw new ConfigError(`config: unknown key ${JSON.stringify(pathText([...path, key]))}${unknownKeyHint(path, String(key))} (from env ${variable})`);
      path.push(key);
      if (i === segs.length - 1) {
        const merge = parseMergeValue(value);
        if (merge === undefined) node[key] = parseEnvValue(value);
        else mergeEnvValue(node, key, merge, path, variable, origins);
        merged = merge !== undefined;
        return;
      }
      if (node[key] === undefined || node[key] === null) node[key] = containersAt(path).some((c) => c.kind === "list") ? [] : {};
      else if (typeof node[key] !== "object")
        throw new ConfigError(`config: ${pathText(path)} (from env ${variable}): is ${show(node[key])} in the file, not a section`);
      node = node[key] as Record<string | number, unknown>;
    });
    // A @merge recorded the keys it wrote: the file's other keys in that map are not from the env.
    if (!merged) origins.push({ path, variable });
  }
  return origins;
}

/**
 * `CONTEXTD_*` variables that are not config but look like a top-level key misspelt (`CONTEXTD_LISTN`),
 * each with the variable it likely meant. Not an error: clients and engines have variables of their own
 * in the same namespace, and one of those may come within a typo of a key.
 */
export function misspeltEnvVariables(env: NodeJS.ProcessEnv): Array<{ variable: string; meant: string }> {
  const top = knownKeys([]);
  return Object.keys(env)
    .filter((variable) => variable.startsWith("CONTEXTD_") && !variable.includes("__"))
    .flatMap((variable) => {
      const key = variable.slice("CONTEXTD_".length).toLowerCase();
      if (top.includes(key)) return [];
      const meant = closestKey(top, key);
      return meant ? [{ variable, meant: `CONTEXTD_${meant.toUpperCase()}` }] : [];
    });
}

/** Applies a `@merge` value at `node[key]` (`path`): records an origin for every key it writes. */
function mergeEnvValue(
  node: Record<string | number, unknown>,
  key: string | number,
  merge: NonNullable<ReturnType<typeof parseMergeValue>>,
  path: Path,
  variable: string,
  origins: Origin[],
): void {
  if ("problem" in merge) throw new ConfigError(`config: ${variable}: ${merge.problem}`);
  const kinds = containersAt(path).map((c) => c.kind);
  if (!kinds.includes("section") && !kinds.includes("map"))
    throw new ConfigError(
      `config: ${variable}: "@merge" needs a section or a map, and ${pathText(path)} is ${kinds.includes("list") ? "a list (set it whole, or an item by index)" : "a single value"}`,
    );
  const current = node[key];
  if (current === undefined || current === null) node[key] = {};
  else if (typeof current !== "object" || Array.isArray(current))
    throw new ConfigError(`config: ${pathText(path)} (from env ${variable}): is ${show(current)} in the file, not a section`);
  deepMerge(node[key] as Record<string, unknown>, merge.mapping, (rel) => origins.push({ path: [...path, ...rel], variable }));
}

function parseEnvValue(value: string): unknown {
  try {
    return parseYaml(value) ?? null;
  } catch {
    return value;
  }
}

function stripNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stripNulls);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== null)
      .map(([k, v]) => [k, stripNulls(v)]),
  );
}

// ---- error messages ----

type Issue = z.core.$ZodIssue;

/** Messages for the issues whose schema did not bring its own text. */
function errorMap(iss: z.core.$ZodRawIssue): string | undefined {
  const input = iss.input as Record<string, unknown> | undefined;
  switch (iss.code) {
    case "invalid_type": {
      if (input === undefined) return "is required";
      const names: Record<string, string> = { object: "a mapping", record: "a mapping", array: "a list", string: "a string" };
      return `expected ${names[iss.expected] ?? iss.expected}, got ${show(input)}`;
    }
    case "too_small":
      if (iss.origin === "array") return `must list at least ${iss.minimum}`;
      return iss.origin === "string" ? "must not be empty" : undefined;
    case "invalid_union":
      if ("discriminator" in iss) return `${show(input?.[String(iss.discriminator)])} is not one of ${(iss.options as unknown[]).join(", ")}`;
      return undefined;
    case "invalid_value":
      return `${show(input)} is not one of ${iss.values.map(String).join(", ")}`;
    default:
      return undefined;
  }
}

function formatIssues(issues: readonly Issue[], origins: Origin[]): string {
  const first = [...issues].sort((a, b) => Number(a.code !== "unrecognized_keys") - Number(b.code !== "unrecognized_keys"))[0];
  const total = issues.reduce((n, i) => n + (i.code === "unrecognized_keys" ? i.keys.length : 1), 0);
  let line: string;
  if (first.code === "unrecognized_keys") {
    const path = [...first.path, first.keys[0]];
    line = `unknown key ${JSON.stringify(pathText(path))}${unknownKeyHint(first.path, first.keys[0])}${fromEnv(path, origins)}`;
  } else {
    const why = first.code === "invalid_key" ? (first.issues[0]?.message ?? first.message) : first.message;
    line = `${pathText(first.path)}${fromEnv(first.path, origins)}: ${why}`;
  }
  return `config: ${line}${total > 1 ? ` (and ${total - 1} more problem${total > 2 ? "s" : ""})` : ""}`;
}

/** `engines.timeouts.compact`, `auth.runtimes[0].agents`, `slots.agents["a.b"]`. */
export function pathText(path: Path): string {
  return path
    .map((p, i) => (typeof p === "number" ? `[${p}]` : /^[A-Za-z0-9_-]+$/.test(String(p)) ? `${i ? "." : ""}${String(p)}` : `[${JSON.stringify(String(p))}]`))
    .join("");
}

function fromEnv(path: Path, origins: Origin[]): string {
  const prefix = (a: Path, b: Path) => a.length <= b.length && a.every((p, i) => p === b[i]);
  const hit = [...origins].reverse().find((o) => prefix(o.path, path));
  return hit ? ` (from env ${hit.variable})` : "";
}

function unknownKeyHint(parent: Path, key: string): string {
  if (/token$|password|secret|api_key$/.test(key)) return " (no plain-text secrets: use token_env / token_sha256, or api_key_env)";
  const best = closestKey(knownKeys(parent), key);
  return best ? ` (did you mean "${best}"?)` : "";
}

/** The key `key` is most likely a typo of (at most one edit per four characters), if any. */
function closestKey(keys: readonly string[], key: string): string | undefined {
  let best: [string, number] | undefined;
  for (const k of keys) {
    const d = editDistance(k, key);
    if (d > 0 && d <= Math.max(1, Math.floor(k.length / 4)) && (!best || d < best[1])) best = [k, d];
  }
  return best?.[0];
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}
