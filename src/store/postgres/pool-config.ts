import pg from "pg";

import { InvalidArgumentError } from "../../contract/errors.js";
import { redactUrlCredentials } from "../../contract/redact.js";

/**
 * What a `postgres://` store URL configures besides the connection itself. These query parameters
 * are contextd's own; they are taken out of the URL before it reaches the driver, and every other
 * parameter (sslmode, application_name, options, …) is passed through to it unchanged:
 *
 * - `pool_max` (default 10): connections the pool may hold open. Every replica has its own pool,
 *   so replicas × pool_max must stay below the server's `max_connections`.
 * - `connect_timeout_ms` (default 5000): how long a call waits for a new connection (or for a free
 *   one when all `pool_max` are busy) before it fails with UNAVAILABLE.
 * - `idle_timeout_ms` (default 30000): an idle connection is closed after this long.
 * - `query_timeout_ms` (default 60000): a statement that gets no answer for this long fails with
 *   UNAVAILABLE and its connection is discarded (a server that stopped answering without closing
 *   the socket must not hang callers forever).
 *
 * The password may be in the URL (then it is never printed: see redactUrl) or, as usual for
 * PostgreSQL clients, in $PGPASSWORD; missing host, port, user and database fall back to $PGHOST,
 * $PGPORT, $PGUSER and $PGDATABASE.
 */
export interface PoolSettings {
  poolMax: number;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  queryTimeoutMs: number;
}

export const DEFAULT_POOL_SETTINGS: PoolSettings = {
  poolMax: 10,
  connectTimeoutMs: 5_000,
  idleTimeoutMs: 30_000,
  queryTimeoutMs: 60_000,
};

const PARAMS: Record<string, keyof PoolSettings> = {
  pool_max: "poolMax",
  connect_timeout_ms: "connectTimeoutMs",
  idle_timeout_ms: "idleTimeoutMs",
  query_timeout_ms: "queryTimeoutMs",
};

export interface ParsedPostgresUrl {
  /** The URL the driver gets: contextd's own parameters removed. */
  connectionString: string;
  settings: PoolSettings;
  /** `host:port/database` for messages (never the user's password). */
  where: string;
}

export function parsePostgresUrl(url: string): ParsedPostgresUrl {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new InvalidArgumentError(`store URL ${redactUrl(url)} is not a valid postgres:// URL`);
  }
  const settings: PoolSettings = { ...DEFAULT_POOL_SETTINGS };
  for (const [param, key] of Object.entries(PARAMS)) {
    const raw = u.searchParams.get(param);
    if (raw === null) continue;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n <= 0) {
      throw new InvalidArgumentError(`store URL ${redactUrl(url)}: ${param} must be a positive integer, got "${raw}"`);
    }
    settings[key] = n;
    u.searchParams.delete(param);
  }
  const host = decodeURIComponent(u.hostname) || process.env.PGHOST || "localhost";
  const port = u.port || process.env.PGPORT || "5432";
  const database = decodeURIComponent(u.pathname.replace(/^\//, "")) || process.env.PGDATABASE || "(default database)";
  return { connectionString: u.toString(), settings, where: `${host}:${port}/${database}` };
}

/** The URL without its credentials, for error messages and logs (contract/redact.ts). */
export function redactUrl(url: string): string {
  return redactUrlCredentials(url);
}

const INT8_OID = 20;

/**
 * int8 columns (seqs, token counts, millisecond timestamps) come back as JavaScript numbers, as
 * they do from SQLite. The driver's default is a string, because an int8 may exceed 2^53; these
 * values never do, and one that did would be corrupt, so it throws rather than round.
 */
function parseInt8(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new Error(`PostgreSQL returned the int8 ${text}, beyond JavaScript's safe integers`);
  return n;
}

const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8_OID && format !== "binary" ? parseInt8 : pg.types.getTypeParser(oid, format as "text")) as pg.CustomTypesConfig["getTypeParser"],
};

/** A pool for `parsed` (it connects lazily; PostgresStore.open checks the connection). */
export function createPool(parsed: ParsedPostgresUrl): pg.Pool {
  return new pg.Pool({
    connectionString: parsed.connectionString,
    max: parsed.settings.poolMax,
    connectionTimeoutMillis: parsed.settings.connectTimeoutMs,
    idleTimeoutMillis: parsed.settings.idleTimeoutMs,
    query_timeout: parsed.settings.queryTimeoutMs,
    keepAlive: true,
    fallback_application_name: "contextd",
    types,
  });
}
