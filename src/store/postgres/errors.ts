import { ContextdError, StoreUnavailableError, type UnavailableError } from "../../contract/errors.js";

// Which driver errors mean "PostgreSQL cannot be reached right now" (UNAVAILABLE: the caller may
// retry, health goes NOT_SERVING) as opposed to a bug in a statement (INTERNAL). Only the first kind
// is translated; everything else propagates unchanged so that a broken query is never disguised as
// an outage.

/** Socket errors of a refused, reset or unroutable connection. */
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  // a Unix socket path that does not exist (the server is not running)
  "ENOENT",
]);

/**
 * SQLSTATEs of a server that is going away or not accepting connections: class 08 (connection
 * exception), admin_shutdown (pg_terminate_backend, a fast shutdown), crash_shutdown,
 * cannot_connect_now (starting up or shutting down), too_many_connections, idle_session_timeout.
 */
const UNAVAILABLE_SQLSTATES = new Set(["57P01", "57P02", "57P03", "53300", "57P05"]);

/** What the driver says when a connection died under it or could not be had in time. */
const DRIVER_MESSAGES =
  /connection terminated|terminating connection|timeout exceeded when trying to connect|query read timeout|not queryable|connection error|cannot use a pool after calling end|client was closed/i;

/** SQLSTATEs after which the same transaction may simply be run again. */
const RETRYABLE_SQLSTATES = new Set(["40001", "40P01"]);

export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error) || err instanceof ContextdError) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && SOCKET_CODES.has(code)) return true;
  const state = sqlState(err);
  if (state && (state.startsWith("08") || UNAVAILABLE_SQLSTATES.has(state))) return true;
  // Node's happy-eyeballs connect reports every address it tried in an AggregateError.
  if (err instanceof AggregateError && err.errors.some(isConnectionError)) return true;
  return state === undefined && DRIVER_MESSAGES.test(err.message);
}

/** A serialization failure or deadlock: PostgreSQL asks for the transaction to be run again. */
export function isRetryableConflict(err: unknown): boolean {
  const state = sqlState(err);
  return state !== undefined && RETRYABLE_SQLSTATES.has(state);
}

/** A unique violation of constraint `name`. */
export function isUniqueViolation(err: unknown, name: string): boolean {
  return sqlState(err) === "23505" && (err as { constraint?: unknown }).constraint === name;
}

function causeText(err: Error): string {
  const parts = err instanceof AggregateError && err.errors.length > 0 ? (err.errors as unknown[]) : [err];
  const texts = parts.map((e) => {
    const x = e as Error & { code?: unknown };
    const message = x?.message || String(e);
    const code = typeof x?.code === "string" ? x.code : "";
    return code && !message.includes(code) ? `${code}: ${message}` : message;
  });
  return [...new Set(texts)].join("; ");
}

/**
 * The UnavailableError for a connection error: names PostgreSQL, where it is (never a password)
 * and what the driver said. `outcome` is added when a write may or may not have committed.
 */
export function unavailable(err: unknown, where: string, outcome?: string): UnavailableError {
  const cause = err instanceof Error ? causeText(err) : String(err);
  return new StoreUnavailableError(`PostgreSQL store at ${where} is unavailable: ${cause}${outcome ? `; ${outcome}` : ""}`);
}
