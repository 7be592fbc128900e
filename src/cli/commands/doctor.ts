import { accessSync, constants, existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Command } from "commander";
import type { ContextdConfig } from "../../server/config.js";
import { errorText, examples, printJson } from "../format.js";
import { bad, good } from "../style.js";
import { checkHealth, clientOptions, globals, listEngines, type GlobalOptions } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

/**
 * `contextctl doctor [--config FILE]`: checks that the config loads and validates, that its store
 * opens, that the server at --address is SERVING, and that ListEngines answers. Prints one ✓/✗ line
 * per check; exit 1 when any fails. The config and store modules are loaded only here, so other
 * commands do not load the SQLite driver.
 */
export function registerDoctor(program: Command): void {
  program
    .command("doctor")
    .description("check the config, the store, the server's health and the registry")
    .option("--config <file>", "config file (default $CONTEXTD_CONFIG, else config/contextd.yaml)")
    .addHelpText(
      "after",
      "\nOne ✓/✗ line per check; exit 1 when any fails (an unreachable server is a failed check here: use `health`\n" +
        'for exit code 3). With --json: {"ok", "checks": [{"name", "ok", "detail"}]}.\n' +
        examples("contextctl doctor", "contextctl doctor --config /etc/contextd/contextd.yaml"),
    )
    .action(async (opts: { config?: string }, cmd: Command) => {
      const g = globals(cmd);
      const checks: Check[] = [];
      const config = await checkConfig(opts.config, checks);
      if (config) checks.push(await checkStore(config.store));
      else checks.push({ name: "store", ok: false, detail: "skipped: no valid config" });
      checks.push(...(await checkServer(g)));
      const ok = checks.every((c) => c.ok);
      if (g.json) printJson({ ok, checks });
      else for (const c of checks) writeStdout(`${c.ok ? good("✓") : bad("✗")} ${c.name}: ${terminalText(c.detail)}\n`);
      if (!ok) process.exitCode = 1;
    });
}

async function checkConfig(file: string | undefined, checks: Check[]): Promise<ContextdConfig | undefined> {
  const { loadConfig, DEFAULT_CONFIG_FILE } = await import("../../server/config.js");
  const path = file ?? (process.env.CONTEXTD_CONFIG || DEFAULT_CONFIG_FILE);
  try {
    const config = loadConfig({ file, env: process.env });
    const where = file || process.env.CONTEXTD_CONFIG || existsSync(path) ? path : `${path} not found, built-in defaults`;
    checks.push({ name: "config", ok: true, detail: `loads and validates (${where})` });
    return config;
  } catch (err) {
    checks.push({ name: "config", ok: false, detail: errorText(err).replace(/^config: /, "") });
    return undefined;
  }
}

async function checkStore(url: string): Promise<Check> {
  try {
    const missing = missingSqliteFile(url);
    if (missing) {
      accessSync(writableAncestor(dirname(missing)), constants.W_OK);
      return { name: "store", ok: true, detail: `${url} does not exist yet; its directory is writable, contextd creates it on start` };
    }
    const { openStore } = await import("../../store/open-store.js");
    const store = await openStore(url);
    await store.close();
    return { name: "store", ok: true, detail: `opens (${redact(url)})` };
  } catch (err) {
    return { name: "store", ok: false, detail: `${redact(url)}: ${errorText(err)}` };
  }
}

async function checkServer(g: GlobalOptions): Promise<Check[]> {
  const options = clientOptions(g, 5_000);
  const server = `server ${g.address}`;
  const health = await checkHealth(options).then(
    (status) => ({ name: server, ok: status === "SERVING", detail: status }),
    (err: unknown) => ({ name: server, ok: false, detail: errorText(err) }),
  );
  const engines = await listEngines(options).then(
    (list) => ({ name: "ListEngines", ok: true, detail: list.map((e) => e.engineId).join(", ") || "(none)" }),
    (err: unknown) => ({ name: "ListEngines", ok: false, detail: errorText(err) }),
  );
  return [health, engines];
}

/** The SQLite file a `sqlite:` URL names when it does not exist (doctor does not create it). */
function missingSqliteFile(url: string): string | undefined {
  if (!/^sqlite:/i.test(url)) return undefined;
  let path = url.slice("sqlite:".length);
  if (path.startsWith("//")) path = path.slice(2);
  if (path === "" || path === ":memory:") return undefined;
  const file = resolve(path);
  return existsSync(file) ? undefined : file;
}

function writableAncestor(dir: string): string {
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

/** A store URL without its password. */
function redact(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@/]*@/, "//$1:***@");
}
