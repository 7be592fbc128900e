import type { Command } from "commander";
import { DeregisterEngineRequest } from "../../contract/gen/contextd/v1/registry.js";
import { callUnary } from "../../sdk/grpc-call.js";
import { UsageError } from "../exit-codes.js";
import { examples, printJson } from "../format.js";
import { action, clientOptionsFor, globals, withRegistry } from "./shared.js";
import { terminalText, writeStdout } from "../terminal-text.js";

/**
 * `contextctl deregister ID`: RegistryService.DeregisterEngine. The engine's owner or an operator
 * may; the server answers NOT_FOUND for an unknown id, PERMISSION_DENIED for any other credential,
 * FAILED_PRECONDITION for `legacy` (built in). Its sessions go to `legacy` (or fail with `strict`)
 * until the id is registered again.
 */
export function registerDeregister(program: Command): void {
  program
    .command("deregister")
    .description("remove a registered engine (its owner or an operator); its sessions fall back to legacy until it registers again")
    .argument("<id>", "engine id")
    .option("--instance <id>", "remove one instance of the engine (as `contextctl engines` lists them); the engine goes with its last one")
    .addHelpText(
      "after",
      "\nNeeds the engine's owner token or an operator token when contextd requires auth: --token TOKEN, else\n" +
        "$CONTEXTD_ADMIN_TOKEN, else $CONTEXTD_OWNER_TOKEN. Another owner's or a runtime token is PERMISSION_DENIED;\n" +
        "an unknown id is NOT_FOUND; `legacy` is built in and cannot be deregistered (FAILED_PRECONDITION).\n" +
        "An engine that heartbeats its registration (the TypeScript SDK's default, the window engine) registers again\n" +
        "within seconds while it runs: stop it first. To stop calls to it at once instead, `contextctl isolate ID`.\n" +
        'With --json: {"engineId", "instanceId" (with --instance), "deregistered": true}.\n' +
        examples(
          "contextctl deregister lossless",
          'contextctl --token "$ACME_ENGINE_TOKEN" deregister acme-summarizer',
          "contextctl deregister recall --instance recall-2",
        ),
    )
    .action(
      action(async (id: string, opts: { instance?: string }, cmd: Command) => {
        const engineId = id.trim();
        if (!engineId) throw new UsageError("deregister: the engine id must not be empty");
        const instanceId = opts.instance ?? "";
        const options = clientOptionsFor(cmd, "owner-or-operator");
        const request = DeregisterEngineRequest.fromPartial({ engineId, instanceId });
        const res = await withRegistry(options, (client) => callUnary(client, client.deregisterEngine, request, options));
        if (globals(cmd).json) return printJson({ engineId, ...(instanceId ? { instanceId } : {}), deregistered: res.deregistered });
        writeStdout(`deregistered ${terminalText(engineId)}${instanceId ? ` instance ${terminalText(instanceId)}` : ""}\n`);
      }),
    );
}
