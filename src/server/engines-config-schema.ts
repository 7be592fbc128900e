import { z } from "zod";
import { DEFAULT_ANSWER_LIMITS } from "../registry/answer-limits.js";
import { allowListEntryProblem } from "../registry/endpoint-allow-list.js";
import { formatDuration } from "./duration.js";
import { duration, filePath, int, oneOf, show, stringMap, text } from "./config-values.js";

// The `engines` section of the config file's schema (config-schema.ts has the rest): its own file
// because it is the largest section and the registry's settings are read from it alone.

const timeoutDefaults = {
  ingest: "5s",
  assemble: "10s",
  compact: "180s",
  after_turn: "30s",
  maintain: "60s",
  bootstrap: "60s",
  subagent: "10s",
  forget: "30s",
};
const eachTimeout = <S>(f: (dflt: string) => S) =>
  Object.fromEntries(Object.entries(timeoutDefaults).map(([k, d]) => [k, f(d)])) as Record<keyof typeof timeoutDefaults, S>;
const timeouts = z.strictObject(eachTimeout((d) => duration().prefault(d)));
const partialTimeouts = z.strictObject(eachTimeout(() => duration().optional()));
const onFailure = oneOf(["fallback", "strict"]);

/**
 * `engines`: how the registry reaches, watches, bounds and quarantines sidecars (docs/configuration.md,
 * `engines`).
 */
export const engines = z.strictObject({
  /**
   * Hosts, addresses, CIDR ranges and `unix:/path/prefix` entries engine endpoints may use (the
   * registry resolves names and checks every address; endpoint-allow-list.ts). No unix socket by
   * default: a bare `unix:` would let an owner make contextd dial any local socket.
   */
  allow_endpoints: z
    .array(text())
    .prefault(["127.0.0.1", "localhost", "::1"])
    .superRefine((entries, ctx) =>
      entries.forEach((entry, i) => {
        const problem = allowListEntryProblem(entry);
        if (problem) ctx.addIssue({ code: "custom", path: [i], input: entry, message: problem });
      }),
    ),
  timeouts: timeouts.prefault({}),
  health: z
    .strictObject({
      interval: duration().prefault("5s"),
      timeout: duration().prefault("1s"),
      unhealthy_threshold: int(1).prefault(2),
      remove_after: duration().prefault("1m"),
    })
    .superRefine((v, ctx) => {
      if (v.timeout > v.interval)
        ctx.addIssue({
          code: "custom",
          path: ["timeout"],
          input: v.timeout,
          message: `${formatDuration(v.timeout)} must not exceed engines.health.interval (${formatDuration(v.interval)})`,
        });
    })
    .prefault({}),
  quarantine: z
    .strictObject({ base_ejection: duration().prefault("30s"), max_ejection: duration().prefault("300s") })
    .superRefine((v, ctx) => {
      if (v.max_ejection < v.base_ejection)
        ctx.addIssue({
          code: "custom",
          path: ["max_ejection"],
          input: v.max_ejection,
          message: `${formatDuration(v.max_ejection)} must be at least engines.quarantine.base_ejection (${formatDuration(v.base_ejection)})`,
        });
    })
    .prefault({}),
  on_failure: onFailure.prefault("fallback"),
  /**
   * Instances one engine id may have at once (docs/registry.md, "Instances"): each costs health
   * checks, a channel and metric series, so an owner gets a bounded number. A new one beyond is
   * refused TOO_MANY_INSTANCES (the SDKs retry).
   */
  max_instances: int(1).prefault(64),
  /**
   * Kept back from a runtime's deadline for legacy's answer when a sidecar call may fall back (at
   * most half of what is left): a sidecar that hangs gets the runtime's deadline less this, so the
   * runtime still gets legacy's answer in time.
   */
  fallback_reserve: duration().prefault("1s"),
  /**
   * How large an engine's answer may be (src/registry/answer-limits.ts): over the bound its request
   * justifies, it is a contract violation, refused on its wire bytes before it is decoded.
   */
  answer_limits: z
    .strictObject({
      max_bytes: int(1).prefault(DEFAULT_ANSWER_LIMITS.maxBytes),
      base_bytes: int(1).prefault(DEFAULT_ANSWER_LIMITS.baseBytes),
      bytes_per_budget_token: int(1).prefault(DEFAULT_ANSWER_LIMITS.bytesPerBudgetToken),
    })
    .prefault({}),
  /**
   * The bulkhead: calls in flight to one sidecar instance at most; the ones over it go to another
   * instance, or fall back at once.
   */
  max_concurrent_calls: int(1).prefault(64),
  /**
   * Where this replica runs: an engine instance registered with the same `locality.replica` (or else
   * the same `locality.node`) is local, and called first while it is healthy and below its bulkhead
   * (docs/registry.md, "Instances"). `node` empty: this machine's hostname.
   */
  locality: z
    .strictObject({
      replica: z.string().prefault(""),
      node: z.string().prefault(""),
      zone: z.string().prefault(""),
    })
    .prefault({}),
  /**
   * With replicas on one database: how often each re-reads every registration and quarantine record,
   * whatever LISTEN/NOTIFY said (a missed notification is repaired then).
   */
  reconcile_interval: duration().prefault("5s"),
  /** engine id -> per-engine deadlines / failure mode / bulkhead (see src/server/settings.ts). */
  overrides: z
    .record(
      z.string().min(1),
      z.strictObject({ timeouts: partialTimeouts.prefault({}), on_failure: onFailure.optional(), max_concurrent_calls: int(1).optional() }),
    )
    .prefault({}),
  managed: z
    .array(
      z.strictObject({
        id: text("an engine id"),
        /** [program, ...args] — run without a shell. */
        command: z.array(text()).min(1, { error: "must name a program: [program, ...args]" }),
        /** The owner the sidecar registers as; contextd issues it a fresh owner token per start. */
        owner: text("an owner").default("local"),
        env: stringMap.prefault({}),
        cwd: filePath.optional(),
      }),
    )
    .superRefine((list, ctx) => {
      list.forEach((m, i) => {
        if (list.findIndex((o) => o.id === m.id) < i)
          ctx.addIssue({ code: "custom", path: [i, "id"], input: m.id, message: `engine ${show(m.id)} is listed twice` });
      });
    })
    .prefault([]),
  /** Client TLS for registry→engine calls; when set, engines are dialled over TLS. */
  tls: z
    .strictObject({ ca_file: filePath.optional(), cert_file: filePath.optional(), key_file: filePath.optional() })
    .superRefine((v, ctx) => {
      if ((v.cert_file === undefined) !== (v.key_file === undefined))
        ctx.addIssue({ code: "custom", input: v, message: "set both cert_file and key_file (client certificate) or neither" });
    })
    .optional(),
});
