import type { Command } from "commander";
import { EXIT, exitCodeFor, isUnreachable } from "../exit-codes.js";
import { errorText, examples, printJson } from "../format.js";
import { tone } from "../style.js";
import { checkHealth, clientOptions, globals } from "./shared.js";
import { writeStderr, writeStdout } from "../terminal-text.js";

/**
 * `contextctl health`: grpc.health.v1 Check on the server. The one command whose answer is its
 * exit code, so scripts can wait on it: 0 SERVING, 1 any other status or an error contextd
 * answered with, 3 unreachable (the same mapping as every other command, exit-codes.ts).
 */
export function registerHealth(program: Command): void {
  program
    .command("health")
    .description("check that contextd answers grpc.health.v1 with SERVING (exit 0; 1 otherwise, 3 when unreachable)")
    .addHelpText(
      "after",
      "\nPrints `contextd ADDRESS: STATUS` (SERVING, NOT_SERVING, …); when the call fails, the error on stderr.\n" +
        'With --json: {"address", "status", "serving", "error"?} where status is UNREACHABLE when contextd could\n' +
        "not be reached and ERROR when it answered with an error.\n" +
        examples("contextctl health", "until contextctl --timeout 1000 health >/dev/null 2>&1; do sleep 1; done   # wait for start"),
    )
    .action(async (_opts: unknown, cmd: Command) => {
      const g = globals(cmd);
      let status: string;
      let error: string | undefined;
      let code: number = EXIT.ok;
      try {
        status = await checkHealth(clientOptions(g, 5_000));
        if (status !== "SERVING") code = EXIT.failed;
      } catch (err) {
        status = isUnreachable(err) ? "UNREACHABLE" : "ERROR";
        error = errorText(err);
        code = exitCodeFor(err);
      }
      const serving = status === "SERVING";
      if (g.json) printJson({ address: g.address, status, serving, ...(error ? { error } : {}) });
      else if (error) writeStderr(`contextd ${g.address}: ${error}\n`);
      else writeStdout(`contextd ${g.address}: ${tone(status)}\n`);
      process.exitCode = code;
    });
}
