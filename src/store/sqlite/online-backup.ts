import { existsSync } from "node:fs";
import Database from "better-sqlite3";

/** What a backup wrote. */
export interface BackupOutcome {
  /** Pages of the database copied (SQLite's page size, 4096 bytes by default). */
  pages: number;
}

/**
 * Copies the SQLite store at `source` into a new file `destination` with SQLite's online backup
 * API (better-sqlite3's `db.backup()`), from a connection of its own opened read-only — so it runs
 * beside a contextd that serves from the file. The copy is one snapshot: every page in one backup
 * step, inside one read transaction, which in WAL mode does not block contextd's writes (a step
 * started over by a write of another connection copies again from a newer snapshot). The result is
 * a whole store as of one committed transaction: an append is in it entirely or not at all.
 *
 * The search index file beside the store (`<store>-search`) is not copied: contextd rebuilds it
 * from the entries when it opens a store whose index is missing or belongs to another store.
 * Throws when `destination` exists (a backup never overwrites a file) or `source` does not.
 */
export async function backupSqliteStore(source: string, destination: string): Promise<BackupOutcome> {
  if (!existsSync(source)) throw new Error(`${source} does not exist`);
  if (existsSync(destination)) throw new Error(`${destination} exists already: a backup is written to a new file`);
  const db = new Database(source, { readonly: true, fileMustExist: true });
  try {
    db.pragma("busy_timeout = 5000");
    // Every page in one step (the first, of 0 pages, only starts the backup).
    const done = await db.backup(destination, { progress: () => 0x7fffffff });
    return { pages: done.totalPages };
  } finally {
    db.close();
  }
}
