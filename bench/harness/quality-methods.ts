/**
 * The served methods of the compaction_quality scenario: one contextd per engine, each the way a
 * user would run it — `legacy` built in; `lossless` (dist/engines/lossless) registered from outside;
 * `window` and `recall` as managed Python sidecars; `openai`, legacy with the openai summarizer,
 * only when BENCH_OPENAI_BASE_URL is set. A method that cannot start is reported with its reason,
 * never silently left out.
 */
import path from "node:path";
import { sessionClient, type ContextdClient } from "./clients.js";
import { startContextd, type ContextdHandle } from "./contextd.js";
import { losslessBuilt, startLossless, type EngineHandle } from "./engines.js";
import { startManagedPythonEngine } from "./managed-engine.js";
import { makeTempDir } from "./processes.js";

export type Served = "legacy" | "lossless" | "window" | "recall" | "openai";
export const SERVED: Served[] = ["legacy", "lossless", "window", "recall", "openai"];

export interface ServedMethod {
  method: Served;
  /** The engine id that must answer. */
  engine: string;
  client: ContextdClient;
  timeoutMs?: number;
  /** Its processes (contextd, an external engine), checked for exits after the replays. */
  processes: Array<ContextdHandle | EngineHandle>;
}

/** The `openai` row's contextd settings from the environment, or why the row is skipped. */
function openaiSetup(env: NodeJS.ProcessEnv): { config: Record<string, unknown> } | { skipped: string } {
  const baseUrl = env.BENCH_OPENAI_BASE_URL;
  if (!baseUrl) return { skipped: "skipped: set BENCH_OPENAI_BASE_URL (and BENCH_OPENAI_MODEL, BENCH_OPENAI_API_KEY_ENV) to run it" };
  const model = env.BENCH_OPENAI_MODEL;
  if (!model) return { skipped: "skipped: BENCH_OPENAI_BASE_URL is set but BENCH_OPENAI_MODEL is not" };
  const keyEnv = env.BENCH_OPENAI_API_KEY_ENV || "OPENAI_API_KEY";
  if (!env[keyEnv]) return { skipped: `skipped: the API key variable ${keyEnv} (BENCH_OPENAI_API_KEY_ENV) is not set` };
  return {
    config: {
      compaction: { summarizer: { kind: "openai", base_url: baseUrl, model, api_key_env: keyEnv } },
      // A model takes seconds per summary: give the auto-compacting Assembles room for it.
      engines: { timeouts: { assemble: "10m" } },
    },
  };
}

const firstLine = (err: unknown) => (err instanceof Error ? err.message.split("\n")[0] : String(err));

/**
 * Starts every method it can; `reasons` says why the others are missing. `compaction`, when given,
 * is every contextd's `compaction` config (the `openai` method's summarizer stays its own).
 */
export async function startMethods(
  progress: (what: string) => void,
  options: { compaction?: Record<string, unknown> } = {},
): Promise<{ methods: ServedMethod[]; reasons: Partial<Record<Served, string>> }> {
  const common = options.compaction ? { compaction: options.compaction } : {};
  const methods: ServedMethod[] = [];
  const reasons: Partial<Record<Served, string>> = {};
  const add = (method: Served, engine: string, processes: ServedMethod["processes"], timeoutMs?: number) =>
    methods.push({ method, engine, client: sessionClient((processes[0] as ContextdHandle).address), processes, timeoutMs });

  progress("starting contextd (legacy)");
  add("legacy", "legacy", [await startContextd({ config: common })]);

  if (!losslessBuilt()) reasons.lossless = "engine not built";
  else {
    progress("starting contextd (lossless) and the lossless engine");
    let cd: ContextdHandle | undefined;
    try {
      cd = await startContextd({ config: { ...common, slots: { context_engine: "lossless" } } });
      const engine = await startLossless(cd.address, path.join(makeTempDir("lossless"), "lossless.db"));
      add("lossless", "lossless", [cd, engine]);
    } catch (err) {
      await cd?.stop();
      reasons.lossless = `engine failed to start: ${firstLine(err)}`;
    }
  }

  for (const engine of ["window", "recall"] as const) {
    progress(`starting contextd with the ${engine} engine (managed)`);
    try {
      add(engine, engine, [await startManagedPythonEngine(engine, common)]);
    } catch (err) {
      reasons[engine] = `engine failed to start: ${firstLine(err)}`;
    }
  }

  const openai = openaiSetup(process.env);
  if ("skipped" in openai) reasons.openai = openai.skipped;
  else {
    progress("starting contextd (legacy with the openai summarizer)");
    try {
      add("openai", "legacy", [await startContextd({ config: openai.config })], 600_000);
    } catch (err) {
      reasons.openai = `contextd failed to start: ${firstLine(err)}`;
    }
  }
  return { methods, reasons };
}

/** Closes the clients and stops every process (engines before their contextd). */
export async function stopMethods(methods: ServedMethod[]): Promise<void> {
  for (const m of methods) m.client.close();
  for (const m of methods) for (const p of [...m.processes].reverse()) await ("stop" in p ? p.stop() : p.child.stop());
}
