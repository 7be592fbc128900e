import { z } from "zod";
import { CORE_OWNER, LEGACY_ENGINE_ID } from "../contract/engine-id.js";
import { OPENAI_DEFAULTS, type SummarizerConfig } from "../compaction/summarizer/summarizer-config.js";
import type { TokenizerName } from "../tokens/tokenizer.js";
import {
  address,
  bool,
  duration,
  durationOrZero,
  envName,
  expected,
  filePath,
  httpUrl,
  int,
  number,
  oneOf,
  retentionDuration,
  sha256,
  show,
  storeUrl,
  text,
} from "./config-values.js";
import { engines } from "./engines-config-schema.js";
import { DEFAULT_TENANT_LIMITS } from "../contract/tenant-limits.js";

/**
 * The config file's schema (docs/configuration.md's key tables are generated from it), and the
 * config's types derived from it. Every object is strict: an unknown key is an error. Keys stay
 * snake_case as in the file, so the docs, the YAML and the code use the same names; durations come
 * out as milliseconds. The value types and their error texts are in config-values.ts.
 */

const secretShape = { token_env: envName.optional(), token_sha256: sha256.optional() };
type SecretFields = { token_env?: string; token_sha256?: string };
/** What exactlyOneSecret guarantees, said in the type, so the code reading a secret need not check it again. */
type OneSecret = { token_env: string; token_sha256?: undefined } | { token_sha256: string; token_env?: undefined };
const exactlyOneSecret = (v: SecretFields, ctx: z.RefinementCtx) => {
  if ((v.token_env === undefined) === (v.token_sha256 === undefined))
    ctx.addIssue({ code: "custom", message: "set exactly one of token_env or token_sha256", input: v });
};
/** Runs only on a value exactlyOneSecret passed (a pipe stops at the first failing side). */
const asOneSecret = <T extends SecretFields>(v: T) => v as T & OneSecret;
const agentPattern = text("an agent id or pattern").refine((v) => !v.slice(0, -1).includes("*"), {
  error: (iss) => `${show(iss.input)}: "*" may only end a pattern ("*", "team-*")`,
});

const auth = z.strictObject({
  required: bool().prefault(true),
  /** owner name -> secret that proves it (engine registration). */
  owners: z
    .record(
      z.string().refine((k) => k.trim() === k && k !== "" && k !== CORE_OWNER, {
        error: (iss) => (iss.input === CORE_OWNER ? `owner "${CORE_OWNER}" is reserved for contextd itself` : `${show(iss.input)} is not an owner name`),
      }),
      z
        .strictObject({
          ...secretShape,
          /**
           * Engine ids reserved for this owner: any other owner is refused OWNED_BY_OTHER, registered
           * or not. Slots may route only to reserved ids when auth is required (engine-reservations.ts).
           */
          engines: z.array(text("an engine id")).prefault([]),
        })
        .superRefine(exactlyOneSecret)
        .transform(asOneSecret),
    )
    .prefault({}),
  operators: z
    .array(
      z
        .strictObject({ ...secretShape, name: text().optional() })
        .superRefine(exactlyOneSecret)
        .transform(asOneSecret),
    )
    .prefault([]),
  /** `agents`: agent ids this token may use; `"*"` is any, `"team-*"` a prefix. Default `["*"]`. */
  runtimes: z
    .array(
      z
        .strictObject({ ...secretShape, name: text().optional(), agents: z.array(agentPattern).min(1).prefault(["*"]) })
        .superRefine(exactlyOneSecret)
        .transform(asOneSecret),
    )
    .prefault([]),
});

/** One agent's hour of the summarizer model (0 or unset: no limit). */
const spendLimit = { calls_per_hour: int(0).optional(), tokens_per_hour: int(0).optional() };

/** `compaction.summarizer` kind openai; unset keys take OPENAI_DEFAULTS (src/compaction/summarizer/create-summarizer.ts). */
const openaiSummarizer = z
  .strictObject({
    kind: z.literal("openai"),
    base_url: httpUrl(),
    model: text("a model name"),
    api_key_env: envName,
    timeout: duration().optional(),
    max_retries: int(0)
      .refine((v) => v <= 10, { error: (iss) => `${show(iss.input)} is too many (at most 10)` })
      .optional(),
    retry_base_delay: duration().optional(),
    context_window_tokens: int(1)
      .refine((v) => v >= 2048, { error: (iss) => `${show(iss.input)} is too small for a summary prompt (at least 2048)` })
      .optional(),
    max_output_tokens: int(1).optional(),
    max_tokens_param: oneOf(["max_tokens", "max_completion_tokens"]).optional(),
    temperature: number(0, 2).optional(),
    limits: z.strictObject({ ...spendLimit, agents: z.record(z.string().min(1), z.strictObject(spendLimit)).optional() }).optional(),
  })
  .superRefine((v, ctx) => {
    const window = v.context_window_tokens ?? OPENAI_DEFAULTS.context_window_tokens;
    const output = v.max_output_tokens ?? OPENAI_DEFAULTS.max_output_tokens;
    // A window already refused on its own needs no second message.
    if (window >= 2048 && output > window / 2)
      ctx.addIssue({
        code: "custom",
        path: [v.max_output_tokens === undefined ? "context_window_tokens" : "max_output_tokens"],
        input: v.max_output_tokens ?? v.context_window_tokens,
        message: `max_output_tokens (${output}) must be at most half of context_window_tokens (${window}), to leave room for the history`,
      });
  });

const summarizer = z.discriminatedUnion("kind", [z.strictObject({ kind: z.literal("extractive") }), openaiSummarizer]);

/** contextd's own grpc.health.v1 status and its SIGTERM drain. */
const health = z.strictObject({
  /** How often contextd pings its store; a ping that fails (or takes longer than store_ping_timeout) sets NOT_SERVING until one succeeds. */
  store_ping_interval: duration().prefault("1s"),
  /**
   * A ping waits for a pool connection like any call, so under a heavy load it may queue: keep this
   * above that wait (PostgreSQL's connect_timeout_ms, 5 s by default), or a busy replica reads as
   * down. A refused connection (the server is down) fails the ping at once, whatever this is.
   */
  store_ping_timeout: duration().prefault("5s"),
  /** On SIGTERM: how long contextd says NOT_SERVING while still serving every call, before it stops taking new ones (0: at once). */
  drain_delay: durationOrZero().prefault("0s"),
  /** Then: how long calls in flight may take to finish before they are cancelled and contextd exits. */
  shutdown_grace: duration().prefault("10s"),
});

/** Admission to the gRPC server. */
const server = z.strictObject({
  /**
   * Calls in flight at most, across all connections (health checks, reflection, HostService
   * callbacks and WatchEngines streams not counted); a call over it is answered RESOURCE_EXHAUSTED
   * unprocessed (src/server/middleware/load-shedding.ts).
   */
  max_concurrent_calls: int(1).prefault(1000),
  /** HTTP/2 streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS); unset: unlimited. */
  max_concurrent_streams: int(1).optional(),
  /**
   * How far V8 lets the old generation grow past what the last full collection kept before it
   * collects again, in percent; 0 leaves it to V8 (src/server/heap-growth.ts says why 50).
   */
  heap_growth_percent: int(0)
    .max(400, { error: expected("a percentage from 0 to 400") })
    .prefault(100),
});

/**
 * OpenTelemetry tracing (docs/operations.md, "Tracing"): spans exported over OTLP/HTTP to
 * `otlp_endpoint` (the collector's base URL; `/v1/traces` is appended unless given). Optional as a
 * whole: without it tracing is off.
 */
const tracing = z.strictObject({
  otlp_endpoint: httpUrl().optional(),
  service_name: text("a service name").prefault("contextd"),
});

/**
 * The context explorer (docs/operations.md, "The context explorer"): a read-mostly web UI on the
 * `metrics_listen` HTTP server under /explorer/. Off by default: it shows tenants' transcripts.
 */
const explorer = z.strictObject({ enabled: bool().prefault(false) });

export const configSchema = z.strictObject({
  listen: address().prefault("127.0.0.1:50051"),
  metrics_listen: address().prefault("127.0.0.1:9464"),
  /** Address engines use to call HostService. Always set by loadConfig (defaults from `listen`). */
  host_endpoint: address(false).optional(),
  store: storeUrl.prefault("sqlite:./data/contextd.db"),
  log_level: oneOf(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).prefault("info"),
  tls: z
    .strictObject({ cert_file: filePath, key_file: filePath, client_ca_file: filePath.optional(), require_client_cert: bool().prefault(false) })
    .superRefine((v, ctx) => {
      if (v.require_client_cert && v.client_ca_file === undefined)
        ctx.addIssue({ code: "custom", path: ["client_ca_file"], message: "is required when require_client_cert is true" });
    })
    .optional(),
  slots: z
    .strictObject({ context_engine: text("an engine id").prefault(LEGACY_ENGINE_ID), agents: z.record(z.string().min(1), text("an engine id")).prefault({}) })
    .prefault({}),
  auth: auth.prefault({}),
  engines: engines.prefault({}),
  compaction: z
    .strictObject({
      reserve_tokens: int(0).prefault(16384),
      keep_recent_tokens: int(0).prefault(20000),
      summary_max_chars: int(1).prefault(16000),
      cold_cache_compact_ratio: number(0, 1).prefault(0),
      summarizer: summarizer.prefault({ kind: "extractive" }),
    })
    .prefault({}),
  tokenizer: oneOf(["o200k_base", "cl100k_base", "heuristic"]).prefault("o200k_base"),
  image_tokens: int(0).prefault(1200),
  health: health.prefault({}),
  server: server.prefault({}),
  /** Subagent TTLs: how often children whose ttl_ms passed are swept. */
  subagents: z.strictObject({ sweep_interval: duration().prefault("5s") }).prefault({}),
  /** Retention (src/host/retention.ts): unset limits keep sessions for ever. */
  retention: z
    .strictObject({
      max_idle: retentionDuration().optional(),
      max_age: retentionDuration().optional(),
      sweep_interval: duration().prefault("1m"),
      agents: z.record(z.string().min(1), z.strictObject({ max_idle: retentionDuration().optional(), max_age: retentionDuration().optional() })).prefault({}),
    })
    .prefault({}),
  /** Delivery of ForgetSession to engines (src/host/forget-delivery.ts). */
  forget: z
    .strictObject({
      poll_interval: duration().prefault("5s"),
      backoff: z.strictObject({ initial: duration().prefault("1s"), max: duration().prefault("5m") }).prefault({}),
    })
    .prefault({}),
  tracing: tracing.optional(),
  /** Per-agent quotas (src/host/agent-quotas.ts): 0 is no quota; `agents.<agent>` replaces a default for one agent. */
  quotas: z
    .strictObject({
      max_sessions: int(0).prefault(0),
      max_stored_bytes: int(0).prefault(0),
      agents: z.record(z.string().min(1), z.strictObject({ max_sessions: int(0).optional(), max_stored_bytes: int(0).optional() })).prefault({}),
    })
    .prefault({}),
  /** The audit trail (src/server/audit-trail.ts): how long its records are kept. */
  audit: z.strictObject({ retention_days: int(1).prefault(90) }).prefault({}),
  explorer: explorer.prefault({}),
  limits: z
    .strictObject({
      max_message_bytes: int(1).prefault(4194304),
      max_messages_per_append: int(1).prefault(1000),
      max_session_entries: int(1).prefault(1000000),
      /** The largest ImportTranscript file (bytes): parsing one is bounded by it (16 MiB). */
      max_import_bytes: int(1).prefault(16777216),
      /** Per runtime token and per agent (src/contract/tenant-limits.ts): one tenant must not take the service from the others. */
      tenant: z
        .strictObject({
          max_calls_in_flight: int(1).prefault(DEFAULT_TENANT_LIMITS.maxCallsInFlight),
          max_calls_in_flight_per_agent: int(1).prefault(DEFAULT_TENANT_LIMITS.maxCallsInFlightPerAgent),
          append_bytes_per_second: int(1).prefault(DEFAULT_TENANT_LIMITS.appendBytesPerSecond),
          max_watch_streams: int(1).prefault(DEFAULT_TENANT_LIMITS.maxWatchStreams),
          max_calls_running: int(1).prefault(DEFAULT_TENANT_LIMITS.maxCallsRunning),
        })
        .prefault({}),
    })
    .prefault({}),
});

// ---- The normalized config (what loadConfig returns), derived from the schema. Durations are ms. ----

type Parsed = z.output<typeof configSchema>;
export type ContextdConfig = Omit<Parsed, "host_endpoint"> & { host_endpoint: string };
export type LogLevel = ContextdConfig["log_level"];
export type AuthConfig = ContextdConfig["auth"];
/** A secret: exactly one of the name of an env var holding the token, or the token's sha256 (hex, lower case). */
export type SecretRef = AuthConfig["operators"][number];
export type EnginesConfig = ContextdConfig["engines"];
export type EngineTimeouts = EnginesConfig["timeouts"];
export type OnFailure = EnginesConfig["on_failure"];
export type ManagedEngineConfig = EnginesConfig["managed"][number];
export type ServerTlsConfig = NonNullable<ContextdConfig["tls"]>;
export type HealthConfig = ContextdConfig["health"];
export type ServerConfig = ContextdConfig["server"];
/** `compaction.summarizer`; the openai keys are documented with the type. */
export type { SummarizerConfig } from "../compaction/summarizer/summarizer-config.js";

// The two shapes that live below this layer must be what the schema yields: the summarizer's config
// (the legacy layer cannot import the schema) and the tokenizer names (src/tokens).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const summarizerMatches: Same<Parsed["compaction"]["summarizer"], SummarizerConfig> = true;
const tokenizerMatches: Same<Parsed["tokenizer"], TokenizerName> = true;
void summarizerMatches;
void tokenizerMatches;
