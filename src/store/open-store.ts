import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";

import { InvalidArgumentError } from "../contract/errors.js";
import { redactUrlCredentials } from "../contract/redact.js";
import { SqliteStore } from "./sqlite/sqlite-store.js";
import type { RegistryStore } from "./registry-store.js";
import type { StoreCopy, TranscriptStore } from "./types.js";

/**
 * What contextd keeps durably: transcripts, engine registrations and quarantine records, in one
 * store; StoreCopy lets `contextctl migrate-store` copy one store into another.
 */
export type ContextdStore = TranscriptStore & RegistryStore & StoreCopy;

/**
 * Opens the store (transcripts and registry state) a URL names:
 * - `sqlite:./data/contextd.db` (relative to the working directory), `sqlite:/abs/path.db`, also
 *   `sqlite:///abs/path.db`; parent directories are created. `sqlite::memory:` is a private
 *   in-memory database (tests only: nothing is durable).
 * - `postgres://USER@HOST:PORT/DATABASE` (or `postgresql://`): PostgreSQL, shared by every replica
 *   that names the same database. Connects, then migrates the schema (once, however many replicas
 *   start at once). Pool settings in the query: `?pool_max=10&connect_timeout_ms=5000&…`
 *   (postgres/pool-config.ts); the password from the URL or $PGPASSWORD, never printed. An
 *   unreachable server is UnavailableError.
 *
 * The PostgreSQL driver is loaded only for a postgres URL.
 */
export async function openStore(url: string): Promise<ContextdStore> {
  if (typeof url !== "string" || url.trim() === "") {
    throw new InvalidArgumentError("store URL is empty: use sqlite:PATH or postgres://…");
  }
  if (/^postgres(ql)?:/i.test(url)) {
    const { PostgresStore } = await import("./postgres/postgres-store.js");
    return PostgresStore.open(url);
  }
  if (!/^sqlite:/i.test(url)) {
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1];
    throw new InvalidArgumentError(
      `unsupported store URL${scheme ? ` scheme "${scheme}:"` : ` "${redactUrl(url)}"`}: use sqlite:PATH or postgres://USER@HOST:PORT/DATABASE`,
    );
  }
  let path = url.slice("sqlite:".length);
  if (path.startsWith("//")) path = path.slice(2); // sqlite:///abs/path.db, sqlite://./rel.db
  if (path === "") throw new InvalidArgumentError(`store URL "${url}" names no file: use sqlite:PATH`);
  if (path === ":memory:") return SqliteStore.open(path);
  const file = resolve(path);
  mkdirSync(dirname(file), { recursive: true });
  return SqliteStore.open(file);
}

/** The URL without its credentials (the same rule as postgres/pool-config.ts; this one loads no driver). */
function redactUrl(url: string): string {
  return redactUrlCredentials(url);
}
