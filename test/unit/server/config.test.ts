import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  ConfigError,
  defaultConfig,
  defaultHostEndpoint,
  formatDuration,
  loadConfig,
  misspeltEnvVariables,
  parseDuration,
  type ContextdConfig,
} from "../../../src/server/config.js";

const dir = mkdtempSync(join(tmpdir(), "contextd-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
function file(yaml: string): string {
  const path = join(dir, `c${n++}.yaml`);
  writeFileSync(path, yaml);
  return path;
}
const load = (yaml: string, env: NodeJS.ProcessEnv = {}) => loadConfig({ file: file(yaml), env });
function problem(yaml: string, env: NodeJS.ProcessEnv = {}): string {
  try {
    load(yaml, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    const message = (e as Error).message;
    expect(message).not.toContain("\n");
    expect(message.startsWith("config: ")).toBe(true);
    return message;
  }
  throw new Error("expected a ConfigError");
}

const DEFAULTS: ContextdConfig = {
  listen: "127.0.0.1:50051",
  metrics_listen: "127.0.0.1:9464",
  host_endpoint: "127.0.0.1:50051",
  store: "sqlite:./data/contextd.db",
  log_level: "info",
  slots: { context_engine: "legacy", agents: {} },
  auth: { required: true, owners: {}, operators: [], runtimes: [] },
  engines: {
    allow_endpoints: ["127.0.0.1", "localhost", "::1"],
    timeouts: { ingest: 5000, assemble: 10000, compact: 180000, after_turn: 30000, maintain: 60000, bootstrap: 60000, subagent: 10000, forget: 30000 },
    health: { interval: 5000, timeout: 1000, unhealthy_threshold: 2, remove_after: 60000 },
    quarantine: { base_ejection: 30000, max_ejection: 300000 },
    on_failure: "fallback",
    max_instances: 64,
    fallback_reserve: 1000,
    answer_limits: { max_bytes: 67108864, base_bytes: 1048576, bytes_per_budget_token: 64 },
    max_concurrent_calls: 64,
    reconcile_interval: 5000,
    locality: { replica: "", node: "", zone: "" },
    overrides: {},
    managed: [],
  },
  compaction: { reserve_tokens: 16384, keep_recent_tokens: 20000, summary_max_chars: 16000, cold_cache_compact_ratio: 0, summarizer: { kind: "extractive" } },
  tokenizer: "o200k_base",
  image_tokens: 1200,
  limits: {
    max_message_bytes: 4194304,
    max_messages_per_append: 1000,
    max_session_entries: 1000000,
    max_import_bytes: 16777216,
    tenant: { max_calls_in_flight: 16, max_calls_in_flight_per_agent: 32, append_bytes_per_second: 8388608, max_watch_streams: 16, max_calls_running: 2 },
  },
  health: { store_ping_interval: 1000, store_ping_timeout: 5000, drain_delay: 0, shutdown_grace: 10000 },
  server: { max_concurrent_calls: 1000, heap_growth_percent: 100 },
  subagents: { sweep_interval: 5000 },
  retention: { sweep_interval: 60000, agents: {} },
  forget: { poll_interval: 5000, backoff: { initial: 1000, max: 300000 } },
  quotas: { max_sessions: 0, max_stored_bytes: 0, agents: {} },
  audit: { retention_days: 90 },
  explorer: { enabled: false },
};

const HASH = "ab".repeat(32);

describe("defaults", () => {
  it("defaultConfig() has every documented default (docs/configuration.md)", () => {
    expect(defaultConfig()).toEqual(DEFAULTS);
    expect(defaultConfig().tls).toBeUndefined();
    expect(defaultConfig().engines.tls).toBeUndefined();
  });

  it("returns fresh objects", () => {
    const a = defaultConfig();
    a.engines.allow_endpoints.push("x");
    a.auth.owners.x = { token_env: "X", engines: [] };
    expect(defaultConfig()).toEqual(DEFAULTS);
  });

  it("an empty file, a comment-only file and empty sections yield the defaults", () => {
    expect(load("")).toEqual(DEFAULTS);
    expect(load("# nothing\n")).toEqual(DEFAULTS);
    expect(load("slots:\nauth:\n  owners:\nengines:\n  timeouts:\n")).toEqual(DEFAULTS);
  });

  it("the checked-in config/contextd.yaml is the defaults with auth.required false, the explorer on and the three sample engines managed", () => {
    const cfg = loadConfig({ file: fileURLToPath(new URL("../../../config/contextd.yaml", import.meta.url)), env: {} });
    expect(cfg).toEqual({
      ...DEFAULTS,
      auth: { ...DEFAULTS.auth, required: false },
      explorer: { enabled: true },
      engines: {
        ...DEFAULTS.engines,
        managed: [
          { id: "lossless", command: ["node", "dist/engines/lossless/main.js"], owner: "local", env: { LOSSLESS_DB: "./data/lossless.db" } },
          { id: "window", command: ["/usr/bin/python3", "engines/window/main.py"], owner: "local", env: {} },
          { id: "recall", command: ["/usr/bin/python3", "engines/recall/main.py"], owner: "local", env: { RECALL_DB: "./data/recall.db" } },
        ],
      },
    });
  });

  it("without a file option reads config/contextd.yaml under the cwd, or uses the defaults when it is absent", () => {
    const cwd = process.cwd();
    try {
      process.chdir(dir);
      expect(loadConfig({ env: {} })).toEqual(DEFAULTS);
      process.chdir(fileURLToPath(new URL("../../..", import.meta.url)));
      expect(loadConfig({ env: {} }).auth.required).toBe(false);
    } finally {
      process.chdir(cwd);
    }
  });

  it("CONTEXTD_CONFIG names the file when no file option is given", () => {
    const path = file("listen: 127.0.0.1:7000\n");
    expect(loadConfig({ env: { CONTEXTD_CONFIG: path } }).listen).toBe("127.0.0.1:7000");
  });

  it("an explicitly named file must exist", () => {
    expect(() => loadConfig({ file: join(dir, "nope.yaml"), env: {} })).toThrow(/^config: cannot read .*nope\.yaml: ENOENT$/);
  });
});

describe("a full file", () => {
  const yaml = `
listen: "[::1]:6000"
metrics_listen: unix:/tmp/metrics.sock
host_endpoint: host.docker.internal:6000
store: postgres://contextd@db:5432/contextd
log_level: debug
slots:
  context_engine: lossless
  agents: { coder: lossless, 2024: legacy }
auth:
  required: true
  owners:
    acme: { token_env: ACME_ENGINE_TOKEN }
    beta: { token_sha256: ${HASH.toUpperCase()} }
  operators: [ { token_env: CONTEXTD_ADMIN_TOKEN, name: ops } ]
  runtimes:
    - { token_env: CONTEXTD_RUNTIME_TOKEN }
    - { token_sha256: ${HASH}, agents: [coder, "team-*"] }
engines:
  allow_endpoints: [10.0.0.0/8]
  timeouts: { ingest: 500ms, assemble: 2s, compact: 3m, after_turn: 1m30s, maintain: 1h, bootstrap: 1.5s, subagent: 10s }
  health: { interval: 10s, timeout: 2s, unhealthy_threshold: 5 }
  quarantine: { base_ejection: 1m, max_ejection: 1m }
  on_failure: strict
  max_concurrent_calls: 16
  overrides:
    lossless: { timeouts: { compact: 5m }, on_failure: fallback, max_concurrent_calls: 4 }
    quiet: {}
  managed:
    - { id: lossless, command: [node, engines/lossless/main.js], env: { PORT: 7001, DEBUG: true }, cwd: /srv }
    - { id: py, command: [python3, -m, engine] }
compaction:
  reserve_tokens: 0
  keep_recent_tokens: 8000
  summary_max_chars: 4000
  summarizer: { kind: openai, base_url: "http://localhost:11434/v1", model: llama3, api_key_env: LLM_KEY }
tokenizer: heuristic
image_tokens: 0
limits: { max_message_bytes: 1024, max_messages_per_append: 10, max_session_entries: 50 }
`;

  it("is normalized: durations in ms, hashes lower case, defaults filled in", () => {
    const cfg = load(yaml, { LLM_KEY: "k" });
    expect(cfg).toEqual({
      listen: "[::1]:6000",
      metrics_listen: "unix:/tmp/metrics.sock",
      host_endpoint: "host.docker.internal:6000",
      store: "postgres://contextd@db:5432/contextd",
      log_level: "debug",
      slots: { context_engine: "lossless", agents: { coder: "lossless", "2024": "legacy" } },
      auth: {
        required: true,
        owners: { acme: { token_env: "ACME_ENGINE_TOKEN", engines: [] }, beta: { token_sha256: HASH, engines: [] } },
        operators: [{ token_env: "CONTEXTD_ADMIN_TOKEN", name: "ops" }],
        runtimes: [
          { token_env: "CONTEXTD_RUNTIME_TOKEN", agents: ["*"] },
          { token_sha256: HASH, agents: ["coder", "team-*"] },
        ],
      },
      engines: {
        allow_endpoints: ["10.0.0.0/8"],
        timeouts: { ingest: 500, assemble: 2000, compact: 180000, after_turn: 90000, maintain: 3600000, bootstrap: 1500, subagent: 10000, forget: 30000 },
        health: { interval: 10000, timeout: 2000, unhealthy_threshold: 5, remove_after: 60000 },
        quarantine: { base_ejection: 60000, max_ejection: 60000 },
        on_failure: "strict",
        max_instances: 64,
        fallback_reserve: 1000,
        answer_limits: { max_bytes: 67108864, base_bytes: 1048576, bytes_per_budget_token: 64 },
        max_concurrent_calls: 16,
        reconcile_interval: 5000,
        locality: { replica: "", node: "", zone: "" },
        overrides: { lossless: { timeouts: { compact: 300000 }, on_failure: "fallback", max_concurrent_calls: 4 }, quiet: { timeouts: {} } },
        managed: [
          { id: "lossless", command: ["node", "engines/lossless/main.js"], owner: "local", env: { PORT: "7001", DEBUG: "true" }, cwd: "/srv" },
          { id: "py", command: ["python3", "-m", "engine"], owner: "local", env: {} },
        ],
      },
      compaction: {
        reserve_tokens: 0,
        keep_recent_tokens: 8000,
        summary_max_chars: 4000,
        cold_cache_compact_ratio: 0,
        summarizer: { kind: "openai", base_url: "http://localhost:11434/v1", model: "llama3", api_key_env: "LLM_KEY" },
      },
      tokenizer: "heuristic",
      image_tokens: 0,
      limits: {
        max_message_bytes: 1024,
        max_messages_per_append: 10,
        max_session_entries: 50,
        max_import_bytes: 16777216,
        tenant: { max_calls_in_flight: 16, max_calls_in_flight_per_agent: 32, append_bytes_per_second: 8388608, max_watch_streams: 16, max_calls_running: 2 },
      },
      health: { store_ping_interval: 1000, store_ping_timeout: 5000, drain_delay: 0, shutdown_grace: 10000 },
      server: { max_concurrent_calls: 1000, heap_growth_percent: 100 },
      subagents: { sweep_interval: 5000 },
      retention: { sweep_interval: 60000, agents: {} },
      forget: { poll_interval: 5000, backoff: { initial: 1000, max: 300000 } },
      quotas: { max_sessions: 0, max_stored_bytes: 0, agents: {} },
      audit: { retention_days: 90 },
      explorer: { enabled: false },
    });
  });

  it("TLS files must be readable", () => {
    const cert = file("not really a cert");
    expect(load(`tls: { cert_file: ${cert}, key_file: ${cert}, client_ca_file: ${cert}, require_client_cert: true }`).tls).toEqual({
      cert_file: cert,
      key_file: cert,
      client_ca_file: cert,
      require_client_cert: true,
    });
    expect(load(`tls: { cert_file: ${cert}, key_file: ${cert} }`).tls?.require_client_cert).toBe(false);
    expect(load(`engines: { tls: { ca_file: ${cert} } }`).engines.tls).toEqual({ ca_file: cert });
    expect(problem(`tls: { cert_file: ${join(dir, "missing.pem")}, key_file: ${cert} }`)).toBe(
      `config: tls.cert_file: cannot read "${join(dir, "missing.pem")}" (ENOENT)`,
    );
  });
});

describe("host_endpoint", () => {
  it("defaults to the listen address with wildcard hosts made dialable", () => {
    expect(load("listen: 0.0.0.0:6000").host_endpoint).toBe("127.0.0.1:6000");
    expect(load("listen: '[::]:6000'").host_endpoint).toBe("[::1]:6000");
    expect(load("listen: unix:/run/contextd.sock").host_endpoint).toBe("unix:/run/contextd.sock");
    expect(defaultHostEndpoint("localhost:1")).toBe("localhost:1");
  });
});

describe("environment overrides", () => {
  it("override nested keys, booleans, numbers, lists and maps; env wins over the file", () => {
    const cfg = load("engines:\n  timeouts:\n    compact: 10m\nslots:\n  context_engine: legacy\n", {
      CONTEXTD_ENGINES__TIMEOUTS__COMPACT: "2s",
      CONTEXTD_SLOTS__CONTEXT_ENGINE: "lossless",
      CONTEXTD_AUTH__REQUIRED: "false",
      CONTEXTD_LIMITS__MAX_MESSAGES_PER_APPEND: "12",
      CONTEXTD_ENGINES__ALLOW_ENDPOINTS: "[a, b]",
      CONTEXTD_SLOTS__AGENTS: "{coder: lossless}",
      CONTEXTD_LISTEN: "0.0.0.0:7000",
    });
    expect(cfg.engines.timeouts.compact).toBe(2000);
    expect(cfg.engines.timeouts.assemble).toBe(10000);
    expect(cfg.slots.context_engine).toBe("lossless");
    expect(cfg.auth.required).toBe(false);
    expect(cfg.limits.max_messages_per_append).toBe(12);
    expect(cfg.engines.allow_endpoints).toEqual(["a", "b"]);
    expect(cfg.slots.agents).toEqual({ coder: "lossless" });
    expect(cfg.listen).toBe("0.0.0.0:7000");
    expect(cfg.host_endpoint).toBe("127.0.0.1:7000");
  });

  it("ignores CONTEXTD_ variables that are not config paths", () => {
    const env = {
      CONTEXTD_RUNTIME_TOKEN: "rt",
      CONTEXTD_ADMIN_TOKEN: "adm",
      CONTEXTD_REGISTRY: "127.0.0.1:50051",
      CONTEXTD_OWNER: "acme",
      CONTEXTD_OWNER_TOKEN: "tok",
      CONTEXTD_ENGINE_LISTEN: "127.0.0.1:0",
      CONTEXTD_ADDRESS: "127.0.0.1:50051",
      NOT_CONTEXTD_LISTEN: "x",
      contextd_listen: "x",
    };
    expect(load("", env)).toEqual(DEFAULTS);
  });

  it("refuses a key path (with __) whose first segment is no top-level key, and names misspelt single-segment variables", () => {
    expect(() => load("", { CONTEXTD_SOMETHING__ELSE: "x" })).toThrow('config: unknown key "something" (from env CONTEXTD_SOMETHING__ELSE)');
    expect(() => load("", { CONTEXTD_ENGINEZ__ON_FAILURE: "strict" })).toThrow(
      'config: unknown key "enginez" (did you mean "engines"?) (from env CONTEXTD_ENGINEZ__ON_FAILURE)',
    );
    expect(misspeltEnvVariables({ CONTEXTD_LISTN: "x", CONTEXTD_LISTEN: "y", CONTEXTD_RUNTIME_TOKEN: "t", CONTEXTD_STOR: "z" })).toEqual([
      { variable: "CONTEXTD_LISTN", meant: "CONTEXTD_LISTEN" },
      { variable: "CONTEXTD_STOR", meant: "CONTEXTD_STORE" },
    ]);
  });

  it("creates sections missing from the file, and addresses map keys case-insensitively with - as _", () => {
    // auth off: with auth required, a slot may name only reserved engine ids (tested below).
    const cfg = load("auth: { required: false }\nslots:\n  agents: { My-Bot: legacy }\n", {
      CONTEXTD_SLOTS__AGENTS__MY_BOT: "lossless",
      CONTEXTD_SLOTS__AGENTS__OTHER: "x",
      CONTEXTD_ENGINES__OVERRIDES__LOSSLESS__TIMEOUTS__COMPACT: "5m",
      CONTEXTD_AUTH__OWNERS__ACME__TOKEN_SHA256: HASH,
    });
    expect(cfg.slots.agents).toEqual({ "My-Bot": "lossless", other: "x" });
    expect(cfg.engines.overrides).toEqual({ lossless: { timeouts: { compact: 300000 } } });
    expect(cfg.auth.owners).toEqual({ acme: { token_sha256: HASH, engines: [] } });
  });

  it("addresses list items by index; a whole section is replaced; null resets; empty is unset", () => {
    const yaml = `auth:\n  runtimes: [ { token_env: A, agents: [x] } ]\nengines:\n  timeouts: { compact: 10m, ingest: 1s }\nlog_level: warn\n`;
    const cfg = load(yaml, {
      CONTEXTD_AUTH__RUNTIMES__0__AGENTS: "[y, z]",
      CONTEXTD_AUTH__RUNTIMES__1: "{token_env: B}",
      CONTEXTD_ENGINES__TIMEOUTS: "{assemble: 3s}",
      CONTEXTD_LOG_LEVEL: "null",
      CONTEXTD_STORE: "",
    });
    expect(cfg.auth.runtimes).toEqual([
      { token_env: "A", agents: ["y", "z"] },
      { token_env: "B", agents: ["*"] },
    ]);
    expect(cfg.engines.timeouts).toEqual({ ...DEFAULTS.engines.timeouts, assemble: 3000 });
    expect(cfg.log_level).toBe("info");
    expect(cfg.store).toBe(DEFAULTS.store);
  });

  it("a value that is not YAML is taken as text", () => {
    expect(problem("", { CONTEXTD_ENGINES__ON_FAILURE: "@strict" })).toBe(
      'config: engines.on_failure (from env CONTEXTD_ENGINES__ON_FAILURE): "@strict" is not one of fallback, strict',
    );
  });

  it("an unknown key below a known top-level key is an error naming the variable", () => {
    expect(problem("", { CONTEXTD_SLOTS__CONTXT_ENGINE: "x" })).toBe(
      'config: unknown key "slots.contxt_engine" (did you mean "context_engine"?) (from env CONTEXTD_SLOTS__CONTXT_ENGINE)',
    );
    expect(problem("", { CONTEXTD_ENGINES__TIMEOUTS__NAP: "1s" })).toBe(
      'config: unknown key "engines.timeouts.nap" (from env CONTEXTD_ENGINES__TIMEOUTS__NAP)',
    );
    expect(problem("", { CONTEXTD_STORE__PATH: "x" })).toBe('config: unknown key "store.path" (from env CONTEXTD_STORE__PATH)');
    expect(problem("", { CONTEXTD_ENGINES__TIMEOUTS: "{compct: 2s}" })).toBe(
      'config: unknown key "engines.timeouts.compct" (did you mean "compact"?) (from env CONTEXTD_ENGINES__TIMEOUTS)',
    );
    expect(problem("", { CONTEXTD_AUTH__RUNTIMES__2: "{token_env: X}" })).toBe(
      "config: CONTEXTD_AUTH__RUNTIMES__2: auth.runtimes is a list; use an index 0..0",
    );
    expect(problem("", { CONTEXTD_SLOTS____X: "x" })).toMatch(/^config: CONTEXTD_SLOTS____X: malformed name/);
  });

  it("a bad value names the key and the variable", () => {
    expect(problem("", { CONTEXTD_ENGINES__TIMEOUTS__COMPACT: "2x" })).toBe(
      'config: engines.timeouts.compact (from env CONTEXTD_ENGINES__TIMEOUTS__COMPACT): "2x" is not a duration (use 500ms, 2s, 3m)',
    );
    expect(problem("", { CONTEXTD_AUTH__REQUIRED: "nope" })).toBe(
      'config: auth.required (from env CONTEXTD_AUTH__REQUIRED): expected true or false, got "nope"',
    );
  });
});

describe("one-line problems", () => {
  const cases: Array<[string, string]> = [
    ["slots:\n  contxt_engine: x\n", 'config: unknown key "slots.contxt_engine" (did you mean "context_engine"?)'],
    ["listn: 1\n", 'config: unknown key "listn" (did you mean "listen"?)'],
    ["engines:\n  timeouts:\n    compact: 2x\n", 'config: engines.timeouts.compact: "2x" is not a duration (use 500ms, 2s, 3m)'],
    ["engines: { timeouts: { compact: 180 } }", "config: engines.timeouts.compact: 180 is not a duration (use 500ms, 2s, 3m)"],
    ["engines: { timeouts: { compact: 0s } }", 'config: engines.timeouts.compact: "0s" must be longer than 0'],
    ["engines: { timeouts: { compact: 1000h } }", 'config: engines.timeouts.compact: "1000h" is too long (at most 596h)'],
    [
      "engines: { overrides: { x: { timeouts: { compact: soon } } } }",
      'config: engines.overrides.x.timeouts.compact: "soon" is not a duration (use 500ms, 2s, 3m)',
    ],
    ["engines: { overrides: { x: { retries: 3 } } }", 'config: unknown key "engines.overrides.x.retries"'],
    ["engines: { on_failure: panic }", 'config: engines.on_failure: "panic" is not one of fallback, strict'],
    ["engines: { max_concurrent_calls: 0 }", "config: engines.max_concurrent_calls: expected a positive integer, got 0"],
    ["engines: { overrides: { x: { max_concurrent_calls: 2.5 } } }", "config: engines.overrides.x.max_concurrent_calls: expected a positive integer, got 2.5"],
    ["engines: { health: { timeout: 6s } }", "config: engines.health.timeout: 6s must not exceed engines.health.interval (5s)"],
    ["engines: { health: { unhealthy_threshold: 0 } }", "config: engines.health.unhealthy_threshold: expected a positive integer, got 0"],
    [
      "engines: { quarantine: { base_ejection: 60s, max_ejection: 30s } }",
      "config: engines.quarantine.max_ejection: 30s must be at least engines.quarantine.base_ejection (1m)",
    ],
    ["engines: { managed: [ { id: a, command: [] } ] }", "config: engines.managed[0].command: must name a program: [program, ...args]"],
    ["engines: { managed: [ { command: [x] } ] }", "config: engines.managed[0].id: is required"],
    ["engines: { managed: [ { id: a, command: [x] }, { id: a, command: [y] } ] }", 'config: engines.managed[1].id: engine "a" is listed twice'],
    ["engines: { managed: { id: a } }", 'config: engines.managed: expected a list, got {"id":"a"}'],
    ["engines: { tls: { cert_file: /x } }", "config: engines.tls: set both cert_file and key_file (client certificate) or neither"],
    ["engines: 5", "config: engines: expected a mapping, got 5"],
    ["listen: 50051", 'config: listen: "50051" is not an address (use host:port, [::1]:port or unix:/path)'],
    ["listen: 'localhost:70000'", "config: listen: port 70000 out of range (0..65535)"],
    ["listen: '::1:50051'", 'config: listen: "::1:50051" is not an address (use host:port, [::1]:port or unix:/path); write IPv6 hosts in brackets'],
    ["listen: 'unix:'", "config: listen: unix: needs a socket path"],
    ["host_endpoint: 'localhost:0'", "config: host_endpoint: port 0 out of range (1..65535)"],
    ["metrics_listen: ''", "config: metrics_listen: must not be empty"],
    ["store: mysql://x", 'config: store: "mysql://x" is not a store URL (use sqlite:./path.db or postgres://user@host:5432/db)'],
    ["store: 'sqlite:'", 'config: store: "sqlite:" is not a store URL (use sqlite:./path.db or postgres://user@host:5432/db): sqlite: needs a file path'],
    ["store: postgres://u:secret@db/contextd", "config: store: no passwords in the config file: set PGPASSWORD, or the whole URL in CONTEXTD_STORE"],
    ["log_level: loud", 'config: log_level: "loud" is not one of fatal, error, warn, info, debug, trace, silent'],
    ["tokenizer: gpt2", 'config: tokenizer: "gpt2" is not one of o200k_base, cl100k_base, heuristic'],
    ["image_tokens: -1", "config: image_tokens: expected a non-negative integer, got -1"],
    ["limits: { max_message_bytes: 1.5 }", "config: limits.max_message_bytes: expected a positive integer, got 1.5"],
    ["limits: { max_message_bytes: '4MiB' }", 'config: limits.max_message_bytes: expected a positive integer, got "4MiB"'],
    [
      "limits: { max_message_bytes: -1, max_messages_per_append: 0 }",
      "config: limits.max_message_bytes: expected a positive integer, got -1 (and 1 more problem)",
    ],
    ["auth: { required: yes }", 'config: auth.required: expected true or false, got "yes"'],
    [
      "auth: { owners: { acme: { token_sha256: abc } } }",
      "config: auth.owners.acme.token_sha256: is not a sha256 hex digest (64 hex characters); the value is not shown: if it is the token itself, write the token's sha256 here instead",
    ],
    [`auth: { owners: { acme: { token_env: A, token_sha256: ${HASH} } } }`, "config: auth.owners.acme: set exactly one of token_env or token_sha256"],
    ["auth: { owners: { acme: {} } }", "config: auth.owners.acme: set exactly one of token_env or token_sha256"],
    ["auth: { owners: { core: { token_env: A } } }", 'config: auth.owners.core: owner "core" is reserved for contextd itself'],
    [
      "auth: { owners: { acme: { token_env: 'not a name' } } }",
      'config: auth.owners.acme.token_env: is not an environment variable name (letters, digits and "_", not starting with a digit, at most 128 characters); the value is not shown',
    ],
    [
      "auth: { runtimes: [ { token: abc } ] }",
      'config: unknown key "auth.runtimes[0].token" (no plain-text secrets: use token_env / token_sha256, or api_key_env) (and 1 more problem)',
    ],
    ["auth: { runtimes: [ { token_env: A, agents: [] } ] }", "config: auth.runtimes[0].agents: must list at least 1"],
    ["auth: { runtimes: [ { token_env: A, agents: ['a*b'] } ] }", 'config: auth.runtimes[0].agents[0]: "a*b": "*" may only end a pattern ("*", "team-*")'],
    ["auth: { operators: {} }", "config: auth.operators: expected a list, got {}"],
    ["tls: { cert_file: /x }", "config: tls.key_file: is required"],
    ["tls: { cert_file: /x, key_file: /y, require_client_cert: true }", "config: tls.client_ca_file: is required when require_client_cert is true"],
    ["compaction: { summarizer: { kind: foo } }", 'config: compaction.summarizer.kind: "foo" is not one of extractive, openai'],
    ["compaction: { summarizer: { kind: openai } }", "config: compaction.summarizer.base_url: is required (and 2 more problems)"],
    [
      "compaction: { summarizer: { kind: openai, base_url: 'ftp://x', model: m, api_key_env: K } }",
      'config: compaction.summarizer.base_url: "ftp://x" is not an http(s) URL',
    ],
    [
      "compaction: { summarizer: { kind: openai, base_url: 'http://x', model: m, api_key_env: NOPE_KEY } }",
      "config: compaction.summarizer.api_key_env: environment variable NOPE_KEY is not set",
    ],
    ["compaction: { summarizer: { kind: extractive, model: m } }", 'config: unknown key "compaction.summarizer.model"'],
    ["compaction: { reserve_tokens: many }", 'config: compaction.reserve_tokens: expected a non-negative integer, got "many"'],
    ["slots: { agents: { coder: '' } }", "config: slots.agents.coder: must not be empty"],
    ["slots: { agents: { 'a.b': [x] } }", 'config: slots.agents["a.b"]: expected an engine id, got ["x"]'],
  ];
  it.each(cases)("%s", (yaml, message) => {
    expect(problem(yaml)).toBe(message);
  });

  it("YAML syntax errors and a non-mapping top level", () => {
    const bad = file("a: 1\n b: [\n");
    expect(() => loadConfig({ file: bad, env: {} })).toThrow(
      new ConfigError(`config: ${bad}: invalid YAML: Nested mappings are not allowed in compact mappings at line 1, column 4`),
    );
    const dup = file("listen: a:1\nlisten: b:2\n");
    expect(() => loadConfig({ file: dup, env: {} })).toThrow(/^config: .*: invalid YAML: Map keys must be unique at line 2, column 1$/);
    const list = file("- listen\n");
    expect(() => loadConfig({ file: list, env: {} })).toThrow(new ConfigError(`config: ${list}: the top level must be a mapping of keys, got ["listen"]`));
  });

  it("a postgres password may come from the environment", () => {
    expect(load("", { CONTEXTD_STORE: "postgres://u:secret@db/contextd" }).store).toBe("postgres://u:secret@db/contextd");
  });
});

describe("durations", () => {
  it.each([
    ["500ms", 500],
    ["2s", 2000],
    ["3m", 180000],
    ["1h", 3600000],
    ["1m30s", 90000],
    ["1.5s", 1500],
    [" 10s ", 10000],
    ["0s", 0],
  ])("%s = %d ms", (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(["", "2", "2x", "s", "2 s", "-1s", "1d", "1s2", "ms", "1.s"])("%j is not a duration", (text) => {
    expect(() => parseDuration(text)).toThrow(`${JSON.stringify(text)} is not a duration (use 500ms, 2s, 3m)`);
  });

  it("formats milliseconds back", () => {
    expect([180000, 1500, 2000, 3600000, 0].map(formatDuration)).toEqual(["3m", "1500ms", "2s", "1h", "0ms"]);
  });
});
