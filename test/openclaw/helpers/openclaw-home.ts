/**
 * A scratch OpenClaw installation state for one test: its own state dir, config file, workspace,
 * HOME and TMPDIR, so tests never share or touch a real `~/.openclaw`. Turns run OpenClaw's own CLI
 * (`openclaw agent --local`, the embedded runner, which loads plugins; `openclaw agent exec` does
 * not load plugins in 2026.9.x) under Node 24.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { cacheDir, type OpenClawInstall } from "./openclaw-install.js";

export const PLUGIN_DIR = path.resolve(import.meta.dirname, "../../../integrations/openclaw");
const STORED_MESSAGES = path.resolve(import.meta.dirname, "../scripts/stored-messages.mjs");

export interface HomeOptions {
  modelBaseUrl: string;
  /** A loopback Gateway on this port (needed by `openclaw sessions compact`, OpenClaw's `/compact`). */
  gatewayPort?: number;
  /** The plugin's config (plugins.entries.contextd.config); omit to run OpenClaw without the plugin. */
  plugin?: Record<string, unknown>;
  /** The model's context window (OpenClaw derives its token budget from it). */
  contextWindow?: number;
}

export interface TurnResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The parsed `--json` envelope, when stdout held one. */
  json?: { payloads?: { text?: string }[]; meta?: { agentMeta?: { sessionId?: string } }; ok?: boolean; error?: unknown };
  /** The reply text of the turn. */
  text: string;
}

const GATEWAY_TOKEN = "test-gateway-token";

export class OpenClawHome {
  readonly dir = mkdtempSync(path.join(tmpdir(), "contextd-openclaw-home-"));
  readonly stateDir = path.join(this.dir, "state");
  readonly configPath = path.join(this.dir, "openclaw.json");

  constructor(
    private readonly install: OpenClawInstall,
    options: HomeOptions,
  ) {
    for (const d of [this.stateDir, path.join(this.dir, "home"), path.join(this.dir, "tmp"), path.join(this.dir, "workspace"), path.join(this.dir, "logs")])
      mkdirSync(d, { recursive: true });
    // What the model server's tool calls read (model-server.ts, TOOLS:<n>:<tag>).
    writeFileSync(
      path.join(this.dir, "workspace", "probe.txt"),
      Array.from({ length: 20 }, (_, i) => `probe line ${i + 1}: invoice_rounding.ts BILL-4821`).join("\n") + "\n",
    );
    this.writeConfig(options);
  }

  writeConfig(options: HomeOptions): void {
    const config: Record<string, unknown> = {
      update: { checkOnStart: false },
      logging: { file: path.join(this.dir, "logs/openclaw.log") },
      models: {
        mode: "replace",
        providers: {
          fake: {
            baseUrl: options.modelBaseUrl,
            apiKey: "sk-test",
            api: "openai-completions",
            timeoutSeconds: 60,
            models: [
              {
                id: "fake-model",
                name: "Fake Model",
                reasoning: false,
                input: ["text"],
                cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
                contextWindow: options.contextWindow ?? 32_000,
                maxTokens: 1024,
              },
            ],
          },
        },
      },
      agents: { defaults: { model: { primary: "fake/fake-model" }, workspace: path.join(this.dir, "workspace"), skipBootstrap: true } },
    };
    if (options.gatewayPort) config.gateway = { mode: "local", bind: "loopback", port: options.gatewayPort, auth: { mode: "token", token: GATEWAY_TOKEN } };
    if (options.plugin) {
      config.plugins = {
        allow: ["contextd"],
        load: { paths: [PLUGIN_DIR] },
        slots: { contextEngine: "contextd" },
        entries: { contextd: { enabled: true, config: options.plugin } },
      };
    }
    writeFileSync(this.configPath, JSON.stringify(config, null, 2));
  }

  env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    // A clean environment: OpenClaw changes behaviour under a test runner's variables (VITEST,
    // NODE_ENV=test: it then prints nothing), and nothing of the developer's OpenClaw may leak in.
    return {
      LANG: process.env.LANG ?? "C.UTF-8",
      PATH: `${path.dirname(this.install.node)}:${process.env.PATH ?? ""}`,
      HOME: path.join(this.dir, "home"),
      TMPDIR: path.join(this.dir, "tmp"),
      // Shared across homes: a warm compile cache halves OpenClaw's start-up.
      NODE_COMPILE_CACHE: path.join(cacheDir(), "compile-cache"),
      OPENCLAW_STATE_DIR: this.stateDir,
      OPENCLAW_CONFIG_PATH: this.configPath,
      OPENCLAW_NO_AUTO_UPDATE: "1",
      ...extra,
    };
  }

  /** One agent turn on `sessionKey` through OpenClaw's embedded runner. */
  turn(sessionKey: string, message: string, extraEnv: Record<string, string> = {}): Promise<TurnResult> {
    return this.cli(["agent", "--local", "--session-key", sessionKey, "--json", "-m", message], extraEnv);
  }

  /**
   * OpenClaw's stored messages of a session (its active branch, oldest first, with entry ids), read
   * through OpenClaw's own SDK (scripts/stored-messages.mjs).
   */
  storedMessages(sessionKey: string, sessionId: string, agentId = "main"): Promise<{ entryId: string; message: Record<string, unknown> }[]> {
    return this.readStored(sessionKey, sessionId, agentId, []);
  }

  /** The session file's rows as OpenClaw's own reader returns them (readSessionTranscriptEvents): header, then every entry. */
  transcriptEvents(sessionKey: string, sessionId: string, agentId = "main"): Promise<Record<string, unknown>[]> {
    return this.readStored(sessionKey, sessionId, agentId, ["events"]);
  }

  private readStored<T>(sessionKey: string, sessionId: string, agentId: string, extra: string[]): Promise<T> {
    const key = sessionKey.startsWith("agent:") ? sessionKey : `agent:${agentId}:${sessionKey}`;
    return new Promise((resolve, reject) => {
      const child = spawn(this.install.node, [STORED_MESSAGES, this.install.packageDir, agentId, key, sessionId, ...extra], {
        env: this.env(),
        cwd: path.join(this.dir, "workspace"),
        stdio: ["ignore", "pipe", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      child.stdio[3]!.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
      child.on("error", reject);
      child.on("close", (code) => {
        if (code !== 0) return reject(new Error(`reading OpenClaw's transcript of ${key} failed (${code}): ${err}`));
        resolve(JSON.parse(out) as T);
      });
    });
  }

  /** Any OpenClaw CLI command, e.g. `["sessions", "compact", key, "--json"]`. */
  cli(args: string[], extraEnv: Record<string, string> = {}): Promise<TurnResult> {
    return new Promise((resolve) => {
      execFile(
        this.install.node,
        [this.install.cli, ...args],
        {
          env: this.env({ OPENCLAW_GATEWAY_TOKEN: GATEWAY_TOKEN, ...extraEnv }),
          cwd: path.join(this.dir, "workspace"),
          timeout: 180_000,
          maxBuffer: 64 * 1024 * 1024,
        },
        (err, stdout, stderr) => {
          let json: TurnResult["json"];
          try {
            json = JSON.parse(stdout) as TurnResult["json"];
          } catch {
            json = undefined;
          }
          const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : null) : 0;
          resolve({ code, stdout, stderr, json, text: json?.payloads?.map((p) => p.text ?? "").join("") ?? "" });
        },
      );
    });
  }

  /**
   * Starts `openclaw gateway run` (configure `gatewayPort` first); resolves once it says it is ready.
   * `output()` is everything it printed so far; `waitFor(re)` resolves once its output matches.
   */
  async startGateway(
    extraEnv: Record<string, string> = {},
  ): Promise<{ stop(): Promise<void>; output(): string; waitFor(re: RegExp, timeoutMs?: number): Promise<void> }> {
    const child: ChildProcess = spawn(this.install.node, [this.install.cli, "gateway", "run"], {
      env: this.env({ OPENCLAW_GATEWAY_TOKEN: GATEWAY_TOKEN, OPENCLAW_DISABLE_BONJOUR: "1", OPENCLAW_SKIP_CHANNELS: "1", ...extraEnv }),
      cwd: path.join(this.dir, "workspace"),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the OpenClaw gateway did not get ready in 120 s:\n${output}`)), 120_000);
      const onData = (d: Buffer) => {
        output += d.toString();
        if (/gateway\S* \S*ready/.test(output)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout?.on("data", onData);
      child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
      child.on("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the OpenClaw gateway exited (${code}) before it was ready:\n${output}`));
      });
    });
    const waiters = new Set<() => void>();
    child.stdout?.on("data", () => waiters.forEach((w) => w()));
    child.stderr?.on("data", () => waiters.forEach((w) => w()));
    return {
      output: () => output,
      waitFor: (re, timeoutMs = 60_000) =>
        new Promise<void>((resolve, reject) => {
          const check = () => {
            if (!re.test(output)) return;
            waiters.delete(check);
            clearTimeout(timer);
            resolve();
          };
          const timer = setTimeout(() => {
            waiters.delete(check);
            reject(new Error(`the OpenClaw gateway did not print ${re} in ${timeoutMs} ms:\n${output}`));
          }, timeoutMs);
          waiters.add(check);
          check();
        }),
      stop: () =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null) return resolve();
          child.once("exit", () => resolve());
          child.kill("SIGTERM");
          setTimeout(() => child.kill("SIGKILL"), 15_000).unref();
        }),
    };
  }

  cleanup(): void {
    if (!process.env.CONTEXTD_TEST_KEEP_TMP) rmSync(this.dir, { recursive: true, force: true });
  }
}
