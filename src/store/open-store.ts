import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";

import { FailedPreconditionError, InvalidArgumentError } from "../contract/errors.js";
import { SqliteStore } from "./sqlite/sqlite-store.js";
import type { RegistryStore } from "./registry-store.js";
import type { TranscriptStore } from "./types.js";

/** What contextd keeps durably: transcripts, engine registrations and quarantine records, in one store. */
export type ContextdStore = TranscriptStore & RegistryStore;

/**
 * Opens the store (transcripts and registry state) a URL names:
 * - `sqlite:./data/contextd.db` (relative to the working directory), `sqlite:/abs/path.db`, also
 *   `sqlite:///abs/path.db`; parent directories are created. `sqlite::memory:` is a private
 *   in-memory database (tests only: nothing is durable).
 * - `postgres://…` / `postgresql://…`: not built yet (FailedPreconditionError).
 */
export async function openStore(url: string): Promise<ContextdStore> {
  if (typeof url !== "string" || url.trim() === "") {
    throw new InvalidArgumentError("store URL is empty: use sqlite:PATH");
  }
  if (/^postgres(ql)?:/i.test(url)) {
    throw new FailedPreconditionError(
      `store ${redact(url)} is not built yet: PostgreSQL support is a later issue; use sqlite:PATH`,
    );
  }
  if (!/^sqlite:/i.test(url)) {
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1];
    throw new InvalidArgumentError(
      `unsupported store URL${scheme ? ` scheme "${scheme}:"` : ` "${url}"`}: use sqlite:PATH`,
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

/** The URL without its password, for error messages and logs. */
function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:/@]*):[^@/]*@/, "//$1:***@");
  }
}
