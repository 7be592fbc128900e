import { readFileSync } from "node:fs";
import { ContextdClient, tlsCredentials } from "contextd/client";
import { resolveSecret } from "./openclaw-runtime.js";

/**
 * The plugin's config, `plugins.entries.contextd.config` in openclaw.json. OpenClaw validates it
 * against `configSchema` in openclaw.plugin.json before the plugin loads (keep the two in step);
 * this fills in the defaults. The runtime token follows OpenClaw's secret conventions: `token` is a
 * SecretInput (a SecretRef such as `{ "source": "env", "provider": "default", "id": "VAR" }`, or
 * `"${VAR}"`), declared in the manifest's `configContracts.secretInputs` so OpenClaw redacts it;
 * without it the plugin reads $CONTEXTD_RUNTIME_TOKEN. Nothing secret sits in the file.
 */
export interface PluginConfig {
  /** contextd's gRPC address, `host:port` or `unix:/path`. */
  address: string;
  /** The token as configured (a SecretInput), resolved when the first engine is built. */
  token?: unknown;
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  /** contextd's agent id for OpenClaw's sessions (selects contextd's engine slot); default: OpenClaw's agent id. */
  agentId?: string;
  /** Budget for Assemble and Compact when OpenClaw passes none. */
  defaultTokenBudget: number;
  /**
   * Deadline of every call but Compact. Longer than contextd's own engine deadline for Assemble
   * (engines.timeouts.assemble, 10 s) plus the reserve it keeps for legacy's answer: a hung engine
   * then times out inside contextd, which answers from legacy, long before the plugin gives up.
   */
  callTimeoutMs: number;
  /** Deadline of Compact; OpenClaw's own compaction safety timeout (its abort signal) still applies. */
  compactTimeoutMs: number;
  /**
   * Tokens set aside per tool a model request carries, for its schema, which OpenClaw's budgets
   * leave out (budget.ts). 12 of OpenClaw's coding tools take about 2,600 tokens.
   */
  toolSchemaTokens: number;
  /** How often the Gateway's service checks that contextd answers (health-service.ts). */
  healthCheckIntervalMs: number;
  /** Whether the agent gets the history tools `contextd_search` and `contextd_expand` (history-tools.ts). */
  historyTools: boolean;
}

const DEFAULTS = {
  address: "127.0.0.1:50051",
  tokenEnv: "CONTEXTD_RUNTIME_TOKEN",
  defaultTokenBudget: 128_000,
  callTimeoutMs: 15_000,
  compactTimeoutMs: 180_000,
  toolSchemaTokens: 250,
  healthCheckIntervalMs: 30_000,
};

export function parseConfig(raw: Record<string, unknown> | undefined): PluginConfig {
  const c = raw ?? {};
  const num = (key: string, fallback: number, min = 1) => {
    const v = c[key];
    if (v === undefined) return fallback;
    if (typeof v !== "number" || !Number.isInteger(v) || v < min) {
      throw new Error(`contextd plugin config: ${key} must be an integer of at least ${min}`);
    }
    return v;
  };
  const bool = (key: string, fallback: boolean) => {
    const v = c[key];
    if (v === undefined) return fallback;
    if (typeof v !== "boolean") throw new Error(`contextd plugin config: ${key} must be true or false`);
    return v;
  };
  const tls = c.tls as PluginConfig["tls"] | boolean | undefined;
  return {
    address: typeof c.address === "string" && c.address ? c.address : DEFAULTS.address,
    token: c.token,
    tls: tls === true ? {} : tls === false || tls === undefined ? undefined : tls,
    agentId: typeof c.agentId === "string" && c.agentId ? c.agentId : undefined,
    defaultTokenBudget: num("defaultTokenBudget", DEFAULTS.defaultTokenBudget),
    callTimeoutMs: num("callTimeoutMs", DEFAULTS.callTimeoutMs),
    compactTimeoutMs: num("compactTimeoutMs", DEFAULTS.compactTimeoutMs),
    toolSchemaTokens: num("toolSchemaTokens", DEFAULTS.toolSchemaTokens, 0),
    healthCheckIntervalMs: num("healthCheckIntervalMs", DEFAULTS.healthCheckIntervalMs, 100),
    historyTools: bool("historyTools", true),
  };
}

// One channel per distinct connection config for the life of the process: OpenClaw builds a fresh
// engine (and disposes it) for every turn, /compact and subagent hook.
const clients = new Map<string, ContextdClient>();

/** The shared client for `config`, its token resolved through OpenClaw's secret resolver. */
export async function clientFor(config: PluginConfig, openclawConfig: unknown, env: NodeJS.ProcessEnv = process.env): Promise<ContextdClient> {
  const token = (await resolveSecret(config.token, openclawConfig, "plugins.entries.contextd.config.token", env)) ?? env[DEFAULTS.tokenEnv] ?? undefined;
  const key = JSON.stringify([config.address, token ?? "", config.tls ?? null, config.callTimeoutMs]);
  let client = clients.get(key);
  if (!client) {
    const read = (f?: string) => (f ? readFileSync(f) : undefined);
    const credentials = config.tls
      ? tlsCredentials({ ca: read(config.tls.caFile), cert: read(config.tls.certFile), key: read(config.tls.keyFile) })
      : undefined;
    client = new ContextdClient({ address: config.address, token: token || undefined, credentials, timeoutMs: config.callTimeoutMs });
    clients.set(key, client);
  }
  return client;
}
