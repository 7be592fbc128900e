import type { Command } from "commander";
import { ClearQuarantineRequest, EngineStatus, QuarantineEngineRequest, type EngineInstance } from "../../contract/gen/contextd/v1/registry.js";
import { callUnary } from "../../sdk/grpc-call.js";
import { engineLine, examples, iso, keyValues, printJson, quarantineText } from "../format.js";
import { bad } from "../style.js";
import { action, clientOptionsFor, globals, withRegistry } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

const OPERATOR_TOKEN_HELP =
  "\nNeeds an operator token when contextd requires auth: --token TOKEN, else $CONTEXTD_ADMIN_TOKEN, else\n" +
  "$CONTEXTD_RUNTIME_TOKEN (a runtime token is refused with PERMISSION_DENIED). `legacy` cannot be\n" +
  "quarantined (FAILED_PRECONDITION); an unknown id is NOT_FOUND.";

const JSON_HELP = 'With --json: {"engine": EngineStatus} (proto JSON) after the change.';

const INSTANCE_HELP = "one instance of the engine (as `contextctl engines` lists them); without it, the whole engine";

/**
 * `contextctl isolate ID [--instance I] [--reason TEXT]` (QuarantineEngine: a manual quarantine,
 * held until released; calls go to the engine's other instances, or to `legacy`, meanwhile) and
 * `contextctl release ID [--instance I]` (ClearQuarantine).
 */
export function registerQuarantine(program: Command): void {
  program
    .command("isolate")
    .description("quarantine an engine by hand: its calls go to legacy until `contextctl release ID`")
    .argument("<id>", "engine id")
    .option("--reason <text>", "why (shown in `engines`, the logs and `engines watch`)")
    .option("--instance <id>", INSTANCE_HELP)
    .addHelpText(
      "after",
      `${OPERATOR_TOKEN_HELP}\n${JSON_HELP}\n${examples('contextctl isolate lossless --reason "bad summaries, investigating"', "contextctl isolate recall --instance recall-2")}`,
    )
    .action(
      action(async (id: string, opts: { reason?: string; instance?: string }, cmd: Command) => {
        const options = clientOptionsFor(cmd, "operator");
        const request = QuarantineEngineRequest.fromPartial({ engineId: id, reason: opts.reason ?? "", instanceId: opts.instance ?? "" });
        const res = await withRegistry(options, (client) => callUnary(client, client.quarantineEngine, request, options));
        const engine = res.engine ?? EngineStatus.fromPartial({ engineId: id });
        if (globals(cmd).json) return printJson({ engine: EngineStatus.toJSON(engine) });
        const instance = opts.instance ? engine.instances.find((i) => i.instanceId === opts.instance) : undefined;
        writeStdout(`${instance ? instanceQuarantineState(engine, instance) : quarantineState(engine)}\n`);
      }),
    );

  program
    .command("release")
    .description("clear an engine's quarantine (manual or automatic); it serves again at once")
    .argument("<id>", "engine id")
    .option("--instance <id>", INSTANCE_HELP)
    .addHelpText("after", `${OPERATOR_TOKEN_HELP}\n${JSON_HELP}\n${examples("contextctl release lossless", "contextctl release recall --instance recall-2")}`)
    .action(
      action(async (id: string, opts: { instance?: string }, cmd: Command) => {
        const options = clientOptionsFor(cmd, "operator");
        const request = ClearQuarantineRequest.fromPartial({ engineId: id, instanceId: opts.instance ?? "" });
        const res = await withRegistry(options, (client) => callUnary(client, client.clearQuarantine, request, options));
        const engine = res.engine ?? EngineStatus.fromPartial({ engineId: id });
        if (globals(cmd).json) return printJson({ engine: EngineStatus.toJSON(engine) });
        writeStdout(`${engineLine(engine)}\n`);
      }),
    );
}

/** One instance's quarantine as `key  value` lines. */
function instanceQuarantineState(e: EngineStatus, i: EngineInstance): string {
  return keyValues([
    ["engine", terminalText(e.engineId)],
    ["instance", terminalText(i.instanceId)],
    ["endpoint", terminalText(i.endpoint)],
    ["quarantine", i.quarantine ? bad(quarantineText(i)) : "-"],
    ["serving", `${e.instances.filter((x) => !x.quarantine).length} of ${e.instances.length} instances`],
  ]);
}

/** The engine's quarantine as `key  value` lines. */
function quarantineState(e: EngineStatus): string {
  const q = e.quarantine;
  if (!q) return `${engineLine(e)}\n(not quarantined)`;
  return keyValues([
    ["engine", terminalText(e.engineId)],
    ["owner", terminalText(e.owner || "-")],
    ["quarantine", bad(quarantineText(e))],
    ["since", iso(q.failedAtMs)],
    ["release", q.manual ? `held until \`contextctl release ${terminalText(e.engineId)}\`` : `after ${iso(q.releaseAtMs)} and a passing health check`],
    ["ejections", q.ejections],
  ]);
}
