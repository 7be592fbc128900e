import type { Command } from "commander";
import { errorText, printJson } from "../format.js";
import { checkHealth, clientOptions, globals } from "./shared.js";

/** `contextctl health`: grpc.health.v1 Check on the server; exit 0 only when SERVING. */
export function registerHealth(program: Command): void {
  program
    .command("health")
    .description("check that contextd answers grpc.health.v1 with SERVING (exit 1 otherwise)")
    .action(async (_opts: unknown, cmd: Command) => {
      const g = globals(cmd);
      let status: string;
      let error: string | undefined;
      try {
        status = await checkHealth(clientOptions(g, 5_000));
      } catch (err) {
        status = "UNREACHABLE";
        error = errorText(err);
      }
      const serving = status === "SERVING";
      if (g.json) printJson({ address: g.address, status, serving, ...(error ? { error } : {}) });
      else if (error) process.stderr.write(`contextd ${g.address}: ${error}\n`);
      else process.stdout.write(`contextd ${g.address}: ${status}\n`);
      if (!serving) process.exitCode = 1;
    });
}
