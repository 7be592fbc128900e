import { status as Status, type ServiceError } from "@grpc/grpc-js";

/**
 * contextctl's exit codes — a contract with scripts, documented in `contextctl --help` and in
 * docs/cli.md ("Exit codes"). Every command maps its outcome through {@link exitCodeFor} (the `action` wrapper in
 * commands/shared.ts, and `health`), so the meaning is the same everywhere:
 *
 * - 0: done (for `health`: SERVING);
 * - 1: failed — the server answered with an error (NOT_FOUND, INVALID_ARGUMENT, …, also
 *   UNAVAILABLE sent by a reachable contextd, e.g. its store is down), a check failed, a
 *   compaction was refused, a file could not be read;
 * - 2: usage — an unknown command or option, a missing or malformed argument (commander), or a
 *   combination of options a command refuses ({@link UsageError});
 * - 3: unreachable — contextd could not be reached at all: connection refused, name resolution
 *   failed, or the deadline passed before a connection was made.
 */
export const EXIT = { ok: 0, failed: 1, usage: 2, unreachable: 3 } as const;

/** A mistake in how contextctl was called: exit code 2, like commander's own usage errors. */
export class UsageError extends Error {
  override name = "UsageError";
}

function isServiceError(err: unknown): err is ServiceError {
  return err instanceof Error && typeof (err as Partial<ServiceError>).code === "number";
}

/**
 * grpc-js's own words when it never got a connection. They are matched at the start of the
 * details so that a message a reachable server sends (which may quote, say, a database's
 * ECONNREFUSED) is never taken for ours.
 */
const NOT_CONNECTED_UNAVAILABLE = [
  /^(?:[\w-]+: )?No connection established/, // the picker: every address failed (refused, reset, unreachable host)
  /^Name resolution failed/, // DNS: no such host, or the resolver failed
];
// A deadline's details list where the call was when it expired (grpc-js resolving-call and
// load-balancing-call): still resolving the name, or still waiting for a connection to pick.
const NOT_CONNECTED_DEADLINE = /waiting for name resolution|Waiting for LB pick/;

/** True when the error says contextd was never reached (not that it answered with an error). */
export function isUnreachable(err: unknown): boolean {
  if (!isServiceError(err)) return false;
  const details = err.details ?? err.message;
  if (err.code === Status.UNAVAILABLE) return NOT_CONNECTED_UNAVAILABLE.some((re) => re.test(details));
  if (err.code === Status.DEADLINE_EXCEEDED) return NOT_CONNECTED_DEADLINE.test(details);
  return false;
}

/** The exit code for an error a command failed with. */
export function exitCodeFor(err: unknown): number {
  if (err instanceof UsageError) return EXIT.usage;
  if (isUnreachable(err)) return EXIT.unreachable;
  return EXIT.failed;
}

/** The exit-code table for `contextctl --help`. */
export const EXIT_CODES_HELP = [
  "Exit codes:",
  "  0  done (health: SERVING)",
  "  1  failed: contextd answered with an error (one line on stderr: `contextctl: CODE: details`),",
  "     a check failed (health NOT_SERVING, doctor), a compaction was not ok, a file was unreadable",
  "  2  usage: unknown command or option, missing or malformed argument",
  "  3  unreachable: contextd could not be reached (connection refused, DNS failure, deadline before connecting)",
].join("\n");
