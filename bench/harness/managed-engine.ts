/**
 * A contextd that runs one sample engine as its managed sidecar (`engines.managed`, as `npm start`
 * runs them from config/contextd.yaml) and routes every session to it: what a user gets who selects
 * that engine. Resolves once the registry lists the engine, unquarantined.
 */
import path from "node:path";
import { startContextd, type ContextdHandle } from "./contextd.js";
import { waitForEngine } from "./engines.js";
import { makeTempDir, REPO_ROOT } from "./processes.js";

/** The Python sample engines, run by Debian's interpreter from the repository (their main.py finds the SDK). */
export const PYTHON_ENGINES = {
  window: { script: "engines/window/main.py", env: (_dir: string): Record<string, string> => ({}) },
  recall: { script: "engines/recall/main.py", env: (dir: string): Record<string, string> => ({ RECALL_DB: path.join(dir, "recall.db") }) },
} as const;

export type PythonEngine = keyof typeof PYTHON_ENGINES;

export async function startManagedPythonEngine(engineId: PythonEngine, config: Record<string, unknown> = {}): Promise<ContextdHandle> {
  const spec = PYTHON_ENGINES[engineId];
  const dir = makeTempDir(engineId);
  const cd = await startContextd({
    config: {
      slots: { context_engine: engineId },
      engines: { managed: [{ id: engineId, command: ["/usr/bin/python3", path.join(REPO_ROOT, spec.script)], env: spec.env(dir) }] },
      ...config,
    },
  });
  try {
    await waitForEngine(cd.address, engineId, 60_000);
  } catch (err) {
    await cd.stop();
    throw new Error(`${engineId} did not register with its contextd: ${err instanceof Error ? err.message : String(err)}`);
  }
  return cd;
}
