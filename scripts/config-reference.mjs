// The configuration reference of docs/configuration.md, generated from the config schema
// (src/server/config-schema.ts, engines-config-schema.ts) so that it cannot drift from it: the keys,
// their nesting, defaults and allowed values are read from the zod schema; only what a key is for is
// written here, in DESCRIPTIONS. A key the schema has and DESCRIPTIONS lacks (or the other way round)
// is an error, so a new config key cannot ship undocumented.
//
// `npm run docs:config` (scripts/docs-config.mjs) writes the tables into docs/configuration.md;
// test/unit/server/config-schema.reference.test.ts fails when the file differs from what this renders.

/** What a key is for: the part of the reference no schema can say. Keys are full paths. */
export const DESCRIPTIONS = {
  // Top level
  listen: "gRPC address: `host:port` (`[::1]:port` for IPv6; port 0 picks one) or `unix:/path`.",
  metrics_listen: "HTTP address of `/metrics` (Prometheus), `/healthz` and `/readyz` ([operations.md](operations.md)); `host:port` or `unix:/path`.",
  host_endpoint:
    "The address engines dial to call HostService back. Default: the `listen` address (a wildcard host made loopback). With replicas, each replica's **own** address, never the load balancer's ([deployment.md](deployment.md#what-each-replica-needs)).",
  store:
    "Where transcripts, idempotency keys, registrations and quarantine records live: `sqlite:PATH`, or `postgres://USER@HOST:5432/DB` for replicas sharing one database (password in `$PGPASSWORD` or the whole URL in `CONTEXTD_STORE`, never in the file; pool options as query parameters: `?pool_max=10&connect_timeout_ms=5000&idle_timeout_ms=30000&query_timeout_ms=60000`). The schema is migrated at start; `contextctl migrate-store FROM TO` copies a SQLite store over.",
  log_level: "pino JSON logs on stdout.",
  tokenizer: "How tokens are counted, once, at append ([concepts.md](concepts.md#the-transcript)). `heuristic` is an estimate.",
  image_tokens: "What one image counts as.",

  // tls
  "tls.cert_file": "Server certificate (PEM). Setting `tls` turns TLS on for every client.",
  "tls.key_file": "Its private key.",
  "tls.client_ca_file": "CA that client certificates are verified against; an owner can then prove itself with a certificate naming it.",
  "tls.require_client_cert": "mTLS: refuse clients without a certificate `client_ca_file` verifies (needs `client_ca_file`).",

  // slots
  "slots.context_engine": "The engine that serves sessions (`legacy` is built in).",
  "slots.agents": "Agent id → engine id, over `context_engine`, e.g. `{coder: lossless}`.",

  // auth
  "auth.required":
    "`false` trusts every caller — any agent, any owner, operator rights — and logs a warning: local development only ([security.md](security.md)).",
  "auth.owners.<owner>.token_env": "Name of the environment variable holding the owner's token (set exactly one of `token_env`, `token_sha256`).",
  "auth.owners.<owner>.token_sha256": "sha256 of the owner's token, 64 hex characters.",
  "auth.owners.<owner>.engines":
    "Engine ids reserved for this owner: any other owner is refused `OWNED_BY_OTHER`, registered or not. With `auth.required`, every id a slot names must be reserved ([registry.md](registry.md#ownership)).",
  "auth.operators[].token_env": "An operator (quarantine, release, deregister any engine): name of the variable holding its token.",
  "auth.operators[].token_sha256": "Or the token's sha256.",
  "auth.operators[].name": "A name for logs.",
  "auth.runtimes[].token_env": "A runtime (SessionService): name of the variable holding its token.",
  "auth.runtimes[].token_sha256": "Or the token's sha256.",
  "auth.runtimes[].name": "A name for logs.",
  "auth.runtimes[].agents": 'Agent ids this token may use: exact ids, `"team-*"` prefixes, `"*"` for any.',

  // engines
  "engines.allow_endpoints":
    "Where engines may be registered: IPs, CIDR ranges, host names (resolved; every address must be covered by an IP/CIDR entry or be public; contextd dials the addresses it checked and re-checks before each health check), `unix:/dir/` prefixes (no unix socket unless listed) ([security.md](security.md#the-endpoint-allow-list)).",
  "engines.timeouts.*":
    "Deadline of each engine call by operation, capped by what is left of the runtime's own deadline. With the `openai` summarizer keep `assemble` above its `timeout`: auto-compaction runs inside Assemble.",
  "engines.health.interval": "How often every sidecar's grpc.health.v1 is checked.",
  "engines.health.timeout": "Deadline of one check (at most `interval`).",
  "engines.health.unhealthy_threshold": "Failed checks in a row that quarantine an engine (an instance of it).",
  "engines.health.remove_after":
    "An instance whose checks have failed this long while its engine has other instances is removed, as if it had deregistered (a sidecar that is alive registers again at its next heartbeat). An engine's last instance is never removed ([registry.md](registry.md#instances)).",
  "engines.quarantine.base_ejection": "A quarantine lasts `base_ejection` × the engine's consecutive ejections …",
  "engines.quarantine.max_ejection": "… at most this; then a passing health check releases it.",
  "engines.max_instances":
    "Instances one engine id may have at once ([registry.md](registry.md#instances)); a new one beyond is refused `TOO_MANY_INSTANCES`, which the SDKs retry (a dead instance is removed after `engines.health.remove_after`). Also bounds the per-instance metric series.",
  "engines.on_failure": "When an engine fails: `fallback` answers from `legacy` (`MODE_FALLBACK`); `strict` fails the call instead.",
  "engines.fallback_reserve":
    "Kept back from the runtime's deadline for legacy's answer when a sidecar call may fall back (never more than half of what is left).",
  "engines.answer_limits.max_bytes": "No engine answer is larger, whatever its request (refused on the length prefix, unread).",
  "engines.answer_limits.base_bytes": "What any answer may take besides its budget's share; every answer but Assemble and Compact is held to it.",
  "engines.answer_limits.bytes_per_budget_token":
    "An Assemble answer may be `base_bytes` + this × `token_budget` (or its own request's size, whichever is more) and hold no more messages than the budget can; a Compact is bounded likewise by its budget. Over it: a contract violation found on the wire bytes before decoding — `legacy` answers and the engine is quarantined.",
  "engines.max_concurrent_calls":
    "The bulkhead: calls in flight to one sidecar at most. A call over it is not queued but answered by `legacy` at once (`RESOURCE_EXHAUSTED` under `strict`), counted in `fallbacks` and logged (a warning at most once a second per engine, with the count); not a failure, so no quarantine.",
  "engines.reconcile_interval":
    "Replicas on PostgreSQL: how often each re-reads every registration and quarantine record besides LISTEN/NOTIFY (repairs a missed notification).",
  "engines.overrides.<engine>.timeouts.*": "This engine's deadlines, each over `engines.timeouts`.",
  "engines.overrides.<engine>.on_failure": "This engine's failure mode, over `engines.on_failure`.",
  "engines.locality.replica":
    "This replica's name: an engine instance registered with the same `locality.replica` (a sidecar in its pod) is local, called first while it is healthy and below its bulkhead ([registry.md](registry.md#instances)).",
  "engines.locality.node":
    "This replica's machine; empty: its hostname. Without a `replica` on both sides, an instance registered with the same `locality.node` is local.",
  "engines.locality.zone": "This replica's zone, shown beside the instances' (not used for routing yet).",
  "engines.overrides.<engine>.max_concurrent_calls": "This engine's bulkhead, over `engines.max_concurrent_calls`.",
  "engines.managed[].id":
    "A sidecar contextd starts itself, restarts with backoff when it exits, and stops on shutdown; this is its engine id (reserved for its `owner`).",
  "engines.managed[].command": "`[program, ...args]`, run without a shell.",
  "engines.managed[].owner": "The owner it registers as; contextd gives it a fresh owner token each start (`CONTEXTD_OWNER_TOKEN`).",
  "engines.managed[].env": "Extra environment; it also gets `CONTEXTD_REGISTRY`, `CONTEXTD_OWNER` and `CONTEXTD_OWNER_TOKEN`.",
  "engines.managed[].cwd": "Working directory.",
  "engines.tls.ca_file": "Setting `engines.tls` dials engines over TLS, verified against this CA (names checked against the endpoint's host name).",
  "engines.tls.cert_file": "Client certificate for mTLS to engines (both `cert_file` and `key_file`, or neither).",
  "engines.tls.key_file": "Its private key.",

  // compaction
  "compaction.reserve_tokens":
    "Kept free for the model's answer under a `BUDGET` target: the prompt budget is `token_budget − reserve_tokens`, never below min(8000, budget/2).",
  "compaction.keep_recent_tokens": "Newest history native compaction keeps verbatim.",
  "compaction.summary_max_chars": "Cap of a compaction summary.",
  "compaction.cold_cache_compact_ratio":
    "Cache-aware auto-compaction: before an Assemble whose `prompt_cache` telemetry says the provider's cache is cold (expired, or the last call read and wrote nothing), native compaction also runs when the view is at this fraction of the budget or more — compacting then rewrites nothing a cache holds, so a forced compaction on a warm cache later is avoided. `0` is off ([concepts.md](concepts.md#prompt-caching)).",
  "compaction.summarizer.kind": "What writes native compaction's summaries ([concepts.md](concepts.md#summarizers)); the keys below are for `openai`.",
  "compaction.summarizer.base_url": "The OpenAI-compatible endpoint (`…/v1`): `POST {base_url}/chat/completions`.",
  "compaction.summarizer.model": "The model name.",
  "compaction.summarizer.api_key_env":
    "Name of the environment variable holding the API key (never the key); unset, contextd refuses to start. A keyless local server takes any non-empty value.",
  "compaction.summarizer.timeout": "Per request; a request that times out is not retried (the summary falls back to `extractive`).",
  "compaction.summarizer.max_retries": "Retries on 429, 408, 5xx and network errors.",
  "compaction.summarizer.retry_base_delay": "Full-jitter backoff from this, doubling, at most 30 s; a `Retry-After` is honoured up to 60 s.",
  "compaction.summarizer.context_window_tokens": "The model's window: longer histories are summarized chunk by chunk.",
  "compaction.summarizer.max_output_tokens": "Per request, at most half the window; also caps `HostService.Complete`.",
  "compaction.summarizer.max_tokens_param": "The request field that carries it (`max_completion_tokens` for OpenAI's reasoning models).",
  "compaction.summarizer.temperature": "0..2; unset, none is sent (the server's own default).",
  "compaction.summarizer.limits.calls_per_hour":
    "Model requests (retries included) each agent may make in any hour, model summaries and HostService.Complete together; 0 or unset: no limit. Over it (or over `tokens_per_hour`), a compaction's summary is extractive (`summarizer_spend_limited` in its details) and Complete is RESOURCE_EXHAUSTED `MODEL_SPEND_LIMITED`, counted in `contextd_model_spend_limited_total`. Kept per process.",
  "compaction.summarizer.limits.tokens_per_hour": "Model tokens (input + output, as the model reports them) per agent per hour; 0 or unset: no limit.",
  "compaction.summarizer.limits.agents.<agent>.calls_per_hour": "A named agent's own limit, in place of the one above; 0 or unset: no limit.",
  "compaction.summarizer.limits.agents.<agent>.tokens_per_hour": "That agent's model tokens per hour; 0 or unset: no limit.",

  // health
  "health.store_ping_interval": "contextd pings its store this often: a failed ping sets its own grpc.health.v1 NOT_SERVING until one succeeds.",
  "health.store_ping_timeout":
    "A ping slower than this fails. A ping queues for a pool connection like any call: keep it above PostgreSQL's `connect_timeout_ms`, or a busy replica reads as down.",
  "health.drain_delay":
    "On SIGTERM, NOT_SERVING while still serving every call this long, then no new calls. Behind a health-checking balancer: at least its check interval × fall.",
  "health.shutdown_grace": "Then the calls in flight get this long to finish before they are cancelled and contextd exits.",

  // server
  "server.max_concurrent_calls":
    "Load shedding: calls in flight at most, across connections; one over it is answered `RESOURCE_EXHAUSTED` at once, unprocessed (safe to retry with backoff), and counted in `contextd_rpc_shed_total`. Health, reflection, HostService callbacks and WatchEngines are not counted. Keep it well above `engines.max_concurrent_calls` × the engines that may be slow at once ([operations.md](operations.md#overload-and-load-shedding)).",
  "server.max_concurrent_streams": "HTTP/2 streams per connection; unset, unlimited. A client over it queues (no error).",
  "server.heap_growth_percent":
    "V8 collects its old generation when it has grown this much past the last collection's live heap (V8 alone lets it reach ~3×: ~50 MB of dead objects at the memory bench's peak); `0` leaves V8's heuristics alone. Lower: less memory, more GC CPU (at 50: ~20–35 % more CPU per sidecar Assemble; src/server/heap-growth.ts).",

  // subagents
  "subagents.sweep_interval": "How often children whose `ttl_ms` passed are swept: their engine hears `OnSubagentEnded` SWEPT once, across replicas too.",

  // retention
  "retention.max_idle":
    "Sessions idle this long (no append, compaction or rewrite) are deleted by the sweep, with their subagents, and every engine that served them is told (`ForgetSession`). A duration or whole days (`30d`); unset: no idle limit ([operations.md](operations.md#retention-and-deletion)).",
  "retention.max_age":
    "Sessions created this long ago are deleted likewise, however active. Unset: no age limit. Both unset (the default): sessions are kept for ever.",
  "retention.sweep_interval": "How often one replica (the holder of the `retention-sweep` lease) looks for expired sessions.",
  "retention.agents.<agent>.max_idle":
    "This agent's idle limit. An agent listed here takes its limits from its entry alone: an entry without a key has no such limit.",
  "retention.agents.<agent>.max_age": "This agent's age limit.",

  // forget
  "forget.poll_interval":
    "How often each replica looks for due `ForgetSession` deliveries (a deletion on the replica wakes it at once; this catches deletions on other replicas and retries).",
  "forget.backoff.initial":
    "The delay before a failed delivery is tried again; doubled per attempt, with jitter. An engine that registers again or is released is tried at once.",
  "forget.backoff.max": "The longest delay between two attempts: an engine that is down hears its deletions at most this long after it is back.",

  // tracing
  "tracing.otlp_endpoint":
    "OTLP/HTTP collector (`/v1/traces` is appended); unset, tracing is off and costs nothing. A runtime's `traceparent` continues through contextd into engine calls and their callbacks.",
  "tracing.service_name": "`service.name` of the spans.",

  // explorer
  "explorer.enabled":
    "Serve the context explorer, a web UI over the sessions and the registry, at `/explorer/` on `metrics_listen`, with the same authorization as the gRPC API ([operations.md](operations.md#the-context-explorer)). It shows transcripts: expose `metrics_listen` accordingly.",

  // limits
  "quotas.max_sessions":
    "Sessions one agent may hold (subagent children and imports count); a call that would create one more is refused `RESOURCE_EXHAUSTED` `QUOTA_EXCEEDED` and writes nothing. 0: no quota ([operations.md](operations.md#quotas)).",
  "quotas.max_stored_bytes":
    "Bytes one agent's sessions may hold in the store (entries and replaced revisions, as stored); an append or import that would take it past is refused `QUOTA_EXCEEDED` and writes nothing. 0: no quota.",
  "quotas.agents.<agent>.max_sessions": "A named agent's own session quota, in place of the default; 0: none for it.",
  "quotas.agents.<agent>.max_stored_bytes": "A named agent's own byte quota, in place of the default; 0: none for it.",
  "audit.retention_days": "How long audit records are kept; older ones are deleted every hour (by each replica: a second delete finds nothing).",
  "limits.max_message_bytes": "One message, encoded.",
  "limits.max_messages_per_append": "Messages in one AppendMessages.",
  "limits.max_session_entries":
    "Entries in one session; appends past it are refused, but a compaction is still committed at the limit, so a full session can always be compacted.",
  "limits.max_import_bytes": "One ImportTranscript file.",
  "limits.tenant.max_calls_in_flight":
    "Calls in flight per runtime token: the running ones and a queue for their turns. Raise it for runtimes that send more calls at once; a refused call was not processed (retry it with backoff).",
  "limits.tenant.max_calls_in_flight_per_agent": "Calls in flight per agent, across tokens (the one tenant limit without auth).",
  "limits.tenant.append_bytes_per_second":
    "Bytes appended per second per runtime token (AppendMessages, ImportTranscript): a one-second burst; one append larger than that goes into debt rather than being refused forever.",
  "limits.tenant.max_watch_streams": "WatchEngines streams per caller.",
  "limits.tenant.max_calls_running":
    "Of a token's calls in flight, how many do work at once; the rest wait their turn in order (a call waiting on a sidecar engine or the summarizer's model gives its turn up) ([security.md](security.md#resource-exhaustion)).",
};

/** Names of the keys of maps whose values are sections (a map of plain values is one key). */
const MAP_KEYS = {
  "auth.owners": "<owner>",
  "engines.overrides": "<engine>",
  "compaction.summarizer.limits.agents": "<agent>",
  "retention.agents": "<agent>",
  "quotas.agents": "<agent>",
};

/** Sections shown as one row: their keys say the same thing for different operations. */
const COLLAPSED = new Set(["engines.timeouts", "engines.overrides.<engine>.timeouts"]);

/** Sections the reference groups keys under, in this order (the top level's own keys first), with what holds for all their keys. */
const SECTIONS = {
  "": { title: "Top level" },
  tls: {
    title: "`tls`: TLS for clients",
    intro: "Absent: no TLS. Without TLS, bearer tokens cross the network in clear ([security.md](security.md#a-network-attacker)).",
  },
  slots: { title: "`slots`: which engine serves a session" },
  auth: {
    title: "`auth`: who may call",
    intro:
      "Every credential is exactly one of `token_env` (the NAME of an environment variable holding the token) or `token_sha256` (the token's sha256); a token is never written in the file. Who may do what: [security.md](security.md#principals).",
  },
  engines: { title: "`engines`: the registry, routing and sidecars", intro: "How they are used: [registry.md](registry.md)." },
  compaction: { title: "`compaction`: native compaction and its summarizer", intro: "How they are used: [concepts.md](concepts.md#compaction)." },
  health: { title: "`health`: contextd's own health and drain", intro: "How they are used: [deployment.md](deployment.md#health-and-restarts)." },
  server: { title: "`server`: admission to the gRPC server" },
  subagents: { title: "`subagents`" },
  retention: {
    title: "`retention`: how long sessions are kept",
    intro: "What is deleted, from where, how fast: [operations.md](operations.md#retention-and-deletion).",
  },
  forget: {
    title: "`forget`: telling engines of deletions",
    intro: "Delivery of `ContextEngineService.ForgetSession` ([operations.md](operations.md#retention-and-deletion)).",
  },
  quotas: {
    title: "`quotas`: what one agent may hold",
    intro: "Off by default. How they are counted and shown: [operations.md](operations.md#quotas).",
  },
  audit: { title: "`audit`: the audit trail", intro: "What it records and how to read it: [operations.md](operations.md#the-audit-trail)." },
  tracing: { title: "`tracing`: OpenTelemetry", intro: "Absent: tracing off ([operations.md](operations.md#tracing))." },
  explorer: { title: "`explorer`: the context explorer (web UI)" },
  limits: {
    title: "`limits`: sizes and per-tenant limits",
    intro:
      "Over a limit: `RESOURCE_EXHAUSTED` naming it, before the call does any work, nothing written (safe to retry with backoff). Not configurable: `session_id`, `session_key`, `agent_id` and `idempotency_key` are at most 256 characters of valid UTF-8 without control characters (`INVALID_ARGUMENT`).",
  },
};

/**
 * The Markdown between docs/configuration.md's markers. `m` holds the modules' exports it reads:
 * `configSchema` (src/server/config-schema), `OPENAI_DEFAULTS`
 * (src/compaction/summarizer/summarizer-config) and `formatDuration` (src/server/duration) — from dist/
 * for the script, from the sources for the test.
 */
export function renderConfigReference(m) {
  // Keys that are optional in the schema but take a default in code (absent: that value).
  const codeDefaults = {
    "compaction.summarizer.timeout": m.formatDuration(m.OPENAI_DEFAULTS.timeout),
    "compaction.summarizer.max_retries": m.OPENAI_DEFAULTS.max_retries,
    "compaction.summarizer.retry_base_delay": m.formatDuration(m.OPENAI_DEFAULTS.retry_base_delay),
    "compaction.summarizer.context_window_tokens": m.OPENAI_DEFAULTS.context_window_tokens,
    "compaction.summarizer.max_output_tokens": m.OPENAI_DEFAULTS.max_output_tokens,
    "compaction.summarizer.max_tokens_param": m.OPENAI_DEFAULTS.max_tokens_param,
  };
  const rows = [];
  collect(m.configSchema, "", rows, codeDefaults);

  const documented = new Set(rows.map((r) => r.key));
  const missing = [...documented].filter((k) => !(k in DESCRIPTIONS));
  const stale = Object.keys(DESCRIPTIONS).filter((k) => !documented.has(k));
  if (missing.length || stale.length)
    throw new Error(
      [
        missing.length ? `config keys without a description in scripts/config-reference.mjs: ${missing.join(", ")}` : "",
        stale.length ? `descriptions in scripts/config-reference.mjs of keys the schema does not have: ${stale.join(", ")}` : "",
      ]
        .filter(Boolean)
        .join("\n"),
    );

  const sections = new Map(Object.keys(SECTIONS).map((s) => [s, []]));
  for (const row of rows) {
    const top = row.key.includes(".") ? row.key.split(".")[0] : "";
    if (!sections.has(top)) throw new Error(`config section "${top}" has no entry in scripts/config-reference.mjs SECTIONS`);
    sections.get(top).push(row);
  }
  const out = [];
  for (const [section, list] of sections) {
    if (!list.length) continue;
    const { title, intro } = SECTIONS[section];
    out.push(`### ${title}`, "");
    if (intro) out.push(intro, "");
    out.push("| key | default | meaning |", "|---|---|---|");
    for (const r of list) out.push(`| \`${r.key}\` | ${r.default} | ${cell(DESCRIPTIONS[r.key] + r.values)} |`);
    out.push("");
  }
  return out.join("\n");
}

/** Unwraps optional/default/prefault (noting what they say) and an object's refinements. */
function unwrap(schema) {
  let s = schema;
  let dflt;
  let optional = false;
  for (;;) {
    const d = s._zod.def;
    if (d.type === "optional") optional = true;
    else if (d.type === "default" || d.type === "prefault") dflt ??= { value: d.defaultValue };
    else if (d.type === "pipe" && isSection(d.in)) {
      s = d.in; // an object checked and transformed afterwards (the auth secrets)
      continue;
    } else break;
    s = d.innerType;
  }
  return { s, dflt, optional };
}

/** An object, an object piped on, or a union of objects: keys of its own rather than one value. */
function isSection(schema) {
  const d = schema._zod.def;
  if (d.type === "pipe") return isSection(d.in);
  return d.type === "object" || (d.type === "union" && d.options.every((o) => o._zod.def.type === "object"));
}

function collect(schema, key, rows, codeDefaults, variant) {
  const { s, dflt, optional } = unwrap(schema);
  const d = s._zod.def;
  if (key && COLLAPSED.has(key)) {
    const parts = Object.entries(d.shape).map(([k, v]) => {
      const u = unwrap(v);
      return u.dflt ? `${k} ${u.dflt.value}` : k;
    });
    const anyDefault = Object.values(d.shape).some((v) => unwrap(v).dflt);
    rows.push({ key: `${key}.*`, default: anyDefault ? parts.join(", ") : `unset: ${parts.join(", ")}`, values: "" });
    return;
  }
  if (d.type === "object") {
    for (const [k, v] of Object.entries(d.shape)) collect(v, key ? `${key}.${k}` : k, rows, codeDefaults, variant);
    return;
  }
  if (d.type === "union" && isSection(s)) {
    // A discriminated union (compaction.summarizer): its tag as one key, then every variant's own keys.
    const tag = Object.keys(d.options[0]._zod.def.shape).find((k) => d.options.every((o) => o._zod.def.shape[k]?._zod.def.type === "literal"));
    const kinds = d.options.map((o) => o._zod.def.shape[tag]._zod.def.values[0]);
    rows.push({ key: `${key}.${tag}`, default: dflt ? code(dflt.value[tag]) : "required", values: oneOf(kinds) });
    for (const o of d.options)
      for (const [k, v] of Object.entries(o._zod.def.shape))
        if (k !== tag) collect(v, `${key}.${k}`, rows, codeDefaults, o._zod.def.shape[tag]._zod.def.values[0]);
    return;
  }
  const element = d.type === "record" ? d.valueType : d.type === "array" ? d.element : undefined;
  if (element && isSection(unwrap(element).s)) {
    const name = d.type === "array" ? "[]" : `.${MAP_KEYS[key] ?? missingMapKey(key)}`;
    collect(element, `${key}${name}`, rows, codeDefaults, variant);
    return;
  }
  let shown;
  if (dflt) shown = value(key, dflt.value);
  else if (key in codeDefaults) shown = value(key, codeDefaults[key]);
  else if (optional) shown = "unset";
  else shown = variant ? `required with ${code(variant)}` : "required";
  rows.push({ key, default: shown, values: d.type === "enum" ? oneOf(Object.values(d.entries)) : "" });
}

function missingMapKey(key) {
  throw new Error(`config map ${key} holds sections: name its keys in scripts/config-reference.mjs MAP_KEYS`);
}

const code = (v) => `\`${v}\``;
const oneOf = (values) => ` One of ${values.map(code).join(", ")}.`;

/** A default as the YAML file writes it; a byte count also in MiB or KiB. */
function value(key, v) {
  if (Array.isArray(v)) return code(`[${v.map((x) => JSON.stringify(x)).join(", ")}]`);
  if (v !== null && typeof v === "object") return code(JSON.stringify(v));
  if (/bytes/.test(key) && typeof v === "number" && v >= 1024 && v % 1024 === 0)
    return `${code(v)} (${v % 1048576 === 0 ? `${v / 1048576} MiB` : `${v / 1024} KiB`})`;
  return code(v);
}

/** A pipe inside a table cell would end the cell. */
const cell = (text) => text.replaceAll("|", "\\|");

export const START = "<!-- config-reference:start (generated by `npm run docs:config` from the schema; edit scripts/config-reference.mjs) -->";
export const END = "<!-- config-reference:end -->";

/** `markdown` with the text between START and END replaced by the reference. */
export function replaceReference(markdown, m) {
  const from = markdown.indexOf(START);
  const to = markdown.indexOf(END);
  if (from < 0 || to < from) throw new Error("docs/configuration.md: the config-reference markers are missing");
  return `${markdown.slice(0, from + START.length)}\n\n${renderConfigReference(m)}\n${markdown.slice(to)}`;
}
