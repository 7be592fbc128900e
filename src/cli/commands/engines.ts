import type { Command } from "commander";
import { EngineStatus } from "../../contract/gen/contextd/v1/registry.js";
import { healthName, printJson, table } from "../format.js";
import { action, clientOptions, globals, listEngines } from "./shared.js";

/** `contextctl engines`: RegistryService.ListEngines as a table. */
export function registerEngines(program: Command): void {
  program
    .command("engines")
    .description("list registered engines (legacy included) with health, quarantine and call counters")
    .action(
      action(async (_opts: unknown, cmd: Command) => {
        const g = globals(cmd);
        const engines = await listEngines(clientOptions(g));
        if (g.json) return printJson({ engines: engines.map((e) => EngineStatus.toJSON(e)) });
        const rows = engines.map((e) => [
          e.engineId,
          e.owner,
          e.builtin ? "(in process)" : e.endpoint || "-",
          healthName(e.health),
          quarantine(e),
          e.calls,
          e.failures,
          e.fallbacks,
          e.timeouts,
        ]);
        const head = ["id", "owner", "endpoint", "health", "quarantine", "calls", "failures", "fallbacks", "timeouts"];
        process.stdout.write(`${table(head, rows)}\n`);
      }),
    );
}

function quarantine(e: EngineStatus): string {
  const q = e.quarantine;
  if (!q) return "-";
  const what = q.manual ? "manual" : q.operation || "quarantined";
  return q.reason ? `${what}: ${q.reason}` : what;
}
