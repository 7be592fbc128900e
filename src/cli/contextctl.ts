import { Command, Option } from "commander";
import { registerAudit } from "./commands/audit.js";
import { registerBackup } from "./commands/backup.js";
import { registerCompact } from "./commands/compact.js";
import { registerContext } from "./commands/context.js";
import { registerDeregister } from "./commands/deregister.js";
import { registerDoctor } from "./commands/doctor.js";
import { registerEngines } from "./commands/engines.js";
import { registerExport } from "./commands/export.js";
import { registerHealth } from "./commands/health.js";
import { registerImport } from "./commands/import.js";
import { registerImportOpenClaw } from "./commands/import-openclaw.js";
import { registerMcp } from "./commands/mcp.js";
import { registerMigrateStore } from "./commands/migrate-store.js";
import { registerQuarantine } from "./commands/quarantine.js";
import { registerReplay } from "./commands/replay.js";
import { registerSearch } from "./commands/search.js";
import { registerSession } from "./commands/session.js";
import { registerSessions } from "./commands/sessions.js";
import { registerTranscript } from "./commands/transcript.js";
import { positiveInt } from "./commands/shared.js";
import { EXIT, EXIT_CODES_HELP } from "./exit-codes.js";
import { examples, flushed } from "./format.js";
import { colourWanted, setColour } from "./style.js";
import { writeStderr, writeStdout } from "./terminal-text.js";

/**
 * contextctl — the operator and developer CLI for contextd (docs/cli.md). Global options come before
 * or after the command: `contextctl --address host:port sessions --json`. Exit codes (a contract
 * with scripts, exit-codes.ts): 0 done, 1 failed (one line on stderr, `contextctl: CODE: details`),
 * 2 bad usage, 3 contextd unreachable.
 *
 * Output: tables and key/value lines for people, the same layout on a terminal and in a pipe (only
 * colour differs: style.ts); `--json` for scripts; progress bars only on a terminal, on stderr.
 *
 * Tokens: `--token` on the command line always wins. Otherwise SessionService commands use
 * $CONTEXTD_RUNTIME_TOKEN; the operator commands `isolate`/`release` use $CONTEXTD_ADMIN_TOKEN,
 * falling back to $CONTEXTD_RUNTIME_TOKEN; `deregister` (the engine's owner or an operator) uses
 * $CONTEXTD_ADMIN_TOKEN, falling back to $CONTEXTD_OWNER_TOKEN; `engines` and `engines watch` (which
 * any credential may read) use $CONTEXTD_RUNTIME_TOKEN, falling back to $CONTEXTD_ADMIN_TOKEN.
 */
const program = new Command("contextctl")
  .description("operate and inspect a contextd server")
  .addOption(new Option("--address <host:port>", "contextd gRPC address").env("CONTEXTD_ADDRESS").default("127.0.0.1:50051"))
  .addOption(
    new Option(
      "--token <token>",
      "token sent as `authorization: Bearer`; when not given: $CONTEXTD_RUNTIME_TOKEN, except isolate/release prefer $CONTEXTD_ADMIN_TOKEN, engines falls back to it, and deregister uses $CONTEXTD_ADMIN_TOKEN, else $CONTEXTD_OWNER_TOKEN",
    ).env("CONTEXTD_RUNTIME_TOKEN"),
  )
  .option("--json", "machine-readable JSON output (each command's --help gives its shape)")
  .option("--no-color", "no colours (also NO_COLOR=1; FORCE_COLOR=1 colours a pipe)")
  .addOption(
    new Option("--timeout <ms>", "deadline per call in ms (default 30000; compact, replay, import, export and context --compact 300000)").argParser(
      positiveInt,
    ),
  )
  .configureHelp({ showGlobalOptions: true })
  // commander's own output (help, usage errors echoing an argument) goes through the same sink.
  .configureOutput({ writeOut: writeStdout, writeErr: writeStderr })
  .showHelpAfterError("(contextctl --help for usage)")
  // Every usage error commander finds (unknown command or option, missing argument, bad value) is
  // exit 2; --help and --version are 0.
  .exitOverride((err) => process.exit(err.exitCode === 0 ? EXIT.ok : EXIT.usage))
  .hook("preAction", (_program, command) => {
    setColour(colourWanted(process.stdout, process.env, command.optsWithGlobals<{ color?: boolean }>().color));
  })
  .addHelpText(
    "after",
    `\nOutput: tables on a terminal and in a pipe alike; colour only on a terminal (NO_COLOR / --no-color: never,\n` +
      `FORCE_COLOR: also in a pipe); progress bars only when stderr is a terminal. --json: one JSON document, or\n` +
      `JSON Lines for the streaming commands (transcript, engines watch). Errors: one line on stderr.\n\n` +
      `${EXIT_CODES_HELP}\n` +
      examples(
        "contextctl health",
        "contextctl --address contextd.internal:50051 sessions",
        "contextctl context chat-42 --budget 32000",
        "contextctl --json transcript chat-42 > chat-42.entries.jsonl",
      ),
  );

registerHealth(program);
registerSessions(program);
registerSession(program);
registerContext(program);
registerTranscript(program);
registerSearch(program);
registerMcp(program);
registerCompact(program);
registerReplay(program);
registerImport(program);
registerImportOpenClaw(program);
registerExport(program);
registerDoctor(program);
registerEngines(program);
registerQuarantine(program);
registerDeregister(program);
registerMigrateStore(program);
registerBackup(program);
registerAudit(program);

// `contextctl transcript ID | head`: the reader left, which is not a failure of ours.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(EXIT.ok);
  throw err;
});

await program.parseAsync(process.argv);
// gRPC channels are closed by every command; exit explicitly so a lingering handle cannot keep the
// CLI alive — but only once everything written is out: into a pipe, stdout is asynchronous, and
// process.exit() would cut what is still queued (a 1 MB --json answer piped to `cat` lost all but 64 KiB).
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
process.exit(process.exitCode ?? EXIT.ok);
