/**
 * Running OpenClaw on contextd as an operator would, with the real OpenClaw (2026.9.6, Node 24):
 * the README's install steps leave `openclaw doctor` without warnings about the plugin; a turn says
 * in OpenClaw's log that contextd serves it and `contextctl sessions` shows OpenClaw's session key;
 * a frozen sidecar engine still gives the model contextd's `legacy` context within the plugin's
 * deadline (contextd keeps a reserve of it for legacy's answer); the Gateway reports contextd being
 * unreachable through `openclaw health`, and its return.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { contextctl, tableRows } from "../cli/run-contextctl.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { startModelServer, type ModelServer } from "./helpers/model-server.js";
import { OpenClawHome, PLUGIN_DIR } from "./helpers/openclaw-home.js";
import { ensureOpenClaw, type OpenClawInstall } from "./helpers/openclaw-install.js";

describe("operating OpenClaw on contextd", () => {
  let install: OpenClawInstall;
  let model: ModelServer;
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  const homes: OpenClawHome[] = [];

  beforeAll(async () => {
    install = await ensureOpenClaw();
    model = await startModelServer();
    // Health checks rarely (a frozen engine is then found by its hung call, not its health first).
    contextd = await startContextd({ config: { slots: { agents: { frozen: "frozen-engine" } }, engines: { health: { interval: "60s", timeout: "1s" } } } });
    cx = new ContextdClient({ address: contextd.address });
  }, 900_000);
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
    await model?.close();
    for (const h of homes) h.cleanup();
  });
  const newHome = (...args: ConstructorParameters<typeof OpenClawHome>) => {
    const h = new OpenClawHome(...args);
    homes.push(h);
    return h;
  };

  it("the README's install steps: OpenClaw runs on contextd and `openclaw doctor` has nothing to say about the plugin", async () => {
    // With a Gateway, as a deployment has (doctor also waits a minute for one that is configured and absent).
    const home = newHome(install, { modelBaseUrl: model.baseUrl, gatewayPort: await getFreePort() });
    const steps = [
      ["plugins", "install", "--link", "--force", "--accept-capabilities", PLUGIN_DIR],
      ["config", "set", "plugins.entries.contextd.config.address", contextd.address],
      ["config", "set", "plugins.entries.contextd.config.token", "--ref-provider", "default", "--ref-source", "env", "--ref-id", "CONTEXTD_RUNTIME_TOKEN"],
    ];
    for (const step of steps) {
      const r = await home.cli(step);
      expect(r.code, `openclaw ${step.join(" ")}\n${r.stdout}\n${r.stderr}`).toBe(0);
    }
    const config = JSON.parse(readFileSync(home.configPath, "utf8")) as { plugins: Record<string, unknown> };
    expect(config.plugins).toMatchObject({ slots: { contextEngine: "contextd" }, entries: { contextd: { enabled: true } } });
    expect(config.plugins.allow).toBeUndefined();

    // The token is a SecretRef to this variable (contextd here runs without auth, but it must resolve).
    const env = { CONTEXTD_RUNTIME_TOKEN: "unused-without-auth" };
    const turn = await home.turn("ops-1", "Hello SAY:hello-back", env);
    expect(turn.code, turn.stderr).toBe(0);
    expect(turn.text).toBe("hello-back");
    expect(turn.stderr).not.toMatch(/degraded to "legacy"|can't verify where this plugin came from/);
    // The positive signs: the new session is kept by contextd; from its next turn on, contextd (not
    // OpenClaw's own engine) decides the context.
    expect(turn.stderr).toMatch(new RegExp(`contextd: session \\S+ is kept by contextd at ${contextd.address}`));
    const next = await home.turn("ops-1", "Again SAY:again", env);
    expect(next.stderr).toMatch(new RegExp(`contextd: session \\S+ is served by contextd at ${contextd.address} \\(engine legacy\\)`));

    const gateway = await home.startGateway(env);
    let said: string;
    try {
      await gateway.waitFor(/contextd: connected to contextd at /);
      const doctor = await home.cli(["doctor", "--non-interactive"], env);
      said = `${doctor.stdout}\n${doctor.stderr}`;
    } finally {
      await gateway.stop();
    }
    for (const warning of [
      /plugins\.allow/,
      /can't verify where this plugin came from/,
      /excludes "github"/,
      /device-pair plugin is not enabled/,
      /Active Memory plugin is disabled/,
    ])
      expect(said, String(warning)).not.toMatch(warning);
    expect(said).not.toMatch(/contextd.*(failed|error)/i);

    // contextctl sessions shows the session under OpenClaw's key.
    const sessions = await contextctl(contextd.address, "sessions");
    expect(sessions.code, sessions.stderr).toBe(0);
    const row = tableRows(sessions.stdout).find((r) => r[1] === "agent:main:ops-1");
    expect(row, sessions.stdout).toBeDefined();
    expect(row![2]).toBe("main");
  }, 300_000);

  it("a frozen sidecar: contextd answers from legacy within the plugin's deadline, and the model gets contextd's context", async () => {
    let engine: EngineProcess | undefined;
    try {
      engine = await startTsEngine({ engineId: "frozen-engine", registry: contextd.address, owner: "team" });
      expect((await engine.registered).ok).toBe(true);
      const home = newHome(install, { modelBaseUrl: model.baseUrl, plugin: { address: contextd.address, agentId: "frozen" } });
      const first = await home.turn("frozen-1", "First SAY:first");
      expect(first.code, first.stderr).toBe(0);
      const sessionId = first.json?.meta?.agentMeta?.sessionId ?? "";
      expect(first.stderr).toMatch(/is kept by contextd at /);
      // Only contextd has this: if the model sees it, its context came from contextd.
      await cx.appendMessages({ session: { sessionId }, messages: [textMessage(Role.ROLE_USER, "Remember the codeword WALRUS-31.")] });

      process.kill(engine.pid, "SIGSTOP");
      const n = model.requests().length;
      const started = Date.now();
      const frozen = await home.turn("frozen-1", "Second SAY:second");
      const took = Date.now() - started;
      expect(frozen.code, frozen.stderr).toBe(0);
      expect(frozen.text).toBe("second");
      const sent = model
        .requests()
        .slice(n)
        .filter((r) => r.answer === "reply");
      expect(sent.length).toBeGreaterThan(0);
      expect(model.textOf(sent[0])).toContain("WALRUS-31");
      expect(frozen.stderr).toMatch(
        /session \S+ is served by contextd's legacy engine instead of the selected one: engine "frozen-engine" (failed on assemble|is quarantined)/,
      );
      expect(frozen.stderr).not.toMatch(/assemble failed, the model gets OpenClaw's own history/);
      // contextd's Assemble deadline for the engine (10 s) plus legacy's answer: under the plugin's 15 s.
      expect(took).toBeLessThan(60_000);
      const status = (await cx.getSession({ session: { sessionId } })).info!;
      expect(status.selectedEngineId).toBe("frozen-engine");
    } finally {
      if (engine) {
        process.kill(engine.pid, "SIGCONT");
        await engine.stop().catch(() => undefined);
      }
    }
  });

  it("the Gateway reports contextd unreachable in `openclaw health`, and says when it answers", async () => {
    const port = await getFreePort();
    const address = `127.0.0.1:${port}`;
    const home = newHome(install, { modelBaseUrl: model.baseUrl, plugin: { address, healthCheckIntervalMs: 500 }, gatewayPort: await getFreePort() });
    const gateway = await home.startGateway();
    let late: ContextdProcess | undefined;
    try {
      await gateway.waitFor(/contextd: contextd at 127\.0\.0\.1:\d+ does not answer/);
      // --verbose asks the Gateway for a fresh probe rather than its cached snapshot (up to 60 s old).
      const down = await home.cli(["health", "--json", "--verbose"]);
      expect(down.stdout).toMatch(/contextd-health[^"]*contextd at 127\.0\.0\.1:\d+ does not answer/);
      late = await startContextd({ config: { listen: address } });
      await gateway.waitFor(/contextd: connected to contextd at 127\.0\.0\.1:\d+/);
      const up = await home.cli(["health", "--json", "--verbose"]);
      expect(up.stdout).not.toMatch(/does not answer/);
    } finally {
      await gateway.stop();
      await late?.cleanup();
    }
  });
});
