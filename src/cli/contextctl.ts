import { Command, Option } from "commander";
import { registerCompact } from "./commands/compact.js";
import { registerDoctor } from "./commands/doctor.js";
import { registerEngines } from "./commands/engines.js";
import { registerExport } from "./commands/export.js";
import { registerHealth } from "./commands/health.js";
import { registerImport } from "./commands/import.js";
import { registerMigrateStore } from "./commands/migrate-store.js";
import { registerQuarantine } from "./commands/quarantine.js";
import { registerReplay } from "./commands/replay.js";
import { registerSession } from "./commands/session.js";
import { registerSessions } from "./commands/sessions.js";
import { positiveInt } from "./commands/shared.js";

/**
 * contextctl — the operator and developer CLI for contextd (SPEC §5). Global options come before
 * or after the command: `contextctl --address host:port sessions --json`. Exit codes: 0 success,
 * 1 a failed check or call (one line on stderr, `contextctl: CODE: details`), 2 bad usage.
 *
 * Tokens: `--token` on the command line always wins. Otherwise SessionService commands use
 * $CONTEXTD_RUNTIME_TOKEN; the operator commands `isolate`/`release` use $CONTEXTD_ADMIN_TOKEN,
 * falling back to $CONTEXTD_RUNTIME_TOKEN; `engines` and `engines watch` (which any credential may
 * read) use $CONTEXTD_RUNTIME_TOKEN, falling back to $CONTEXTD_ADMIN_TOKEN.
 */
const program = new Command("contextctl")
  .description("operate and inspect a contextd server")
  .addOption(new Option("--address <host:port>", "contextd gRPC address").env("CONTEXTD_ADDRESS").default("127.0.0.1:50051"))
  .addOption(
    new Option(
      "--token <token>",
      "token sent as `authorization: Bearer`; when not given: $CONTEXTD_RUNTIME_TOKEN, except isolate/release prefer $CONTEXTD_ADMIN_TOKEN and engines falls back to it",
    ).env("CONTEXTD_RUNTIME_TOKEN"),
  )
  .option("--json", "machine-readable JSON output")
  .addOption(new Option("--timeout <ms>", "deadline per call in ms (default 30000; compact, replay and import 300000)").argParser(positiveInt))
  .showHelpAfterError()
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));

registerHealth(program);
registerSessions(program);
registerSession(program);
registerCompact(program);
registerReplay(program);
registerImport(program);
registerExport(program);
registerDoctor(program);
registerEngines(program);
registerQuarantine(program);
registerMigrateStore(program);

await program.parseAsync(process.argv);
// gRPC channels are closed by every command; exit explicitly so a lingering handle cannot keep the CLI alive.
process.exit(process.exitCode ?? 0);
