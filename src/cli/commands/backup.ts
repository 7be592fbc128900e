import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { basename, join, resolve } from "node:path";

import type { Command } from "commander";

import { errorText, examples, num, printJson } from "../format.js";
import { globals } from "./shared.js";
import { writeStderr, writeStdout } from "../terminal-text.js";
import { copyStore } from "./migrate-store.js";

const PG_RECIPE =
  'a PostgreSQL store is backed up with PostgreSQL\'s own tools: pg_dump --format=custom --file=contextd.dump DB, and restored into an empty database with pg_restore --dbname=NEWDB contextd.dump (docs/operations.md, "Backup and restore")';

/**
 * `contextctl backup FILE --store sqlite:PATH` and `contextctl restore FILE --store URL`
 * (docs/operations.md, "Backup and restore").
 *
 * The backup opens the store's SQLite file itself, read-only, and copies it with SQLite's online
 * backup API (src/store/sqlite/online-backup.ts) — rather than asking contextd for it over an
 * operator RPC — because: SQLite's backup API is made for exactly this (a second connection
 * copying a consistent snapshot while the first writes, without blocking it in WAL mode); the
 * bytes never cross gRPC (no message-size cap, no server memory or temporary file for a
 * multi-gigabyte store, no long call holding a slot of `server.max_concurrent_calls`); it works as
 * well when contextd is stopped; and an operator who restores needs the machine's filesystem
 * anyway. The cost: it runs where the file is (the host, or `docker exec` into the container).
 *
 * The restore copies a backup into an empty store — a SQLite file or a PostgreSQL database — with
 * the row-for-row copy of `migrate-store` (one transaction on the target: a failed restore leaves
 * it empty), refusing a store that holds anything, and then records it in the restored store's
 * audit trail (`store.restore`, by `contextctl`).
 */
export function registerBackup(program: Command): void {
  program
    .command("backup")
    .description("write a consistent copy of a SQLite store to a new file, while contextd serves from it")
    .argument("<file>", "the backup file to write (must not exist)")
    .requiredOption("--store <url>", "the store: sqlite:PATH (the `store` of contextd's config)")
    .addHelpText(
      "after",
      "\nRuns on the machine that holds the store's file (read-only; contextd may keep serving). The search index\n" +
        "(<store>-search) is not copied: contextd rebuilds it. For PostgreSQL use pg_dump (docs/operations.md).\n" +
        'With --json: {"ok", "file", "pages", "bytes", "seconds"}.\n' +
        examples("contextctl backup --store sqlite:./data/contextd.db backups/contextd-$(date +%F).db"),
    )
    .action(async (file: string, opts: { store: string }, cmd: Command) => {
      const g = globals(cmd);
      const started = performance.now();
      try {
        const source = sqlitePath(opts.store);
        const destination = resolve(file);
        const { backupSqliteStore } = await import("../../store/sqlite/online-backup.js");
        const { pages } = await backupSqliteStore(source, destination);
        const { statSync } = await import("node:fs");
        const bytes = statSync(destination).size;
        const seconds = Math.round(performance.now() - started) / 1000;
        if (g.json) return printJson({ ok: true, file: destination, pages, bytes, seconds });
        writeStdout(`backed up ${source} to ${destination}: ${num(bytes)} bytes (${num(pages)} pages) in ${seconds.toFixed(1)} s\n`);
      } catch (err) {
        fail(g.json, "backup", err);
      }
    });

  program
    .command("restore")
    .description("copy a backup file into an empty store (SQLite or PostgreSQL); a store that holds anything is refused")
    .argument("<file>", "a backup written by `contextctl backup` (or a copy of a stopped store's file)")
    .requiredOption("--store <url>", "the store to restore into: sqlite:PATH or postgres://…; must hold nothing yet")
    .addHelpText(
      "after",
      "\nStop contextd (or point it at the new store only once the restore is done). The backup file is not changed.\n" +
        "Exit 0 when everything was restored; 1 otherwise, and then nothing was written to the store.\n" +
        'With --json: {"ok", "file", "sessions", "entries", ..., "seconds"}.\n' +
        examples("contextctl restore backups/contextd-2026-12-06.db --store sqlite:./data/contextd.db"),
    )
    .action(async (file: string, opts: { store: string }, cmd: Command) => {
      const g = globals(cmd);
      const started = performance.now();
      try {
        const counts = await restore(resolve(file), opts.store);
        const seconds = Math.round(performance.now() - started) / 1000;
        if (g.json) return printJson({ ok: true, file: resolve(file), ...counts, seconds });
        writeStdout(
          `restored ${num(counts.sessions)} sessions (${num(counts.entries)} entries) and ${num(counts.registrations)} engine registrations from ${resolve(file)} in ${seconds.toFixed(1)} s\n`,
        );
      } catch (err) {
        fail(g.json, "restore", err);
      }
    });
}

/** The file of a `sqlite:` URL; anything else is refused, a PostgreSQL URL with the pg_dump recipe. */
function sqlitePath(url: string): string {
  if (/^postgres(ql)?:/i.test(url)) throw new Error(PG_RECIPE);
  if (!/^sqlite:/i.test(url)) throw new Error(`--store ${url}: use sqlite:PATH`);
  let path = url.slice("sqlite:".length);
  if (path.startsWith("//")) path = path.slice(2);
  if (path === "" || path === ":memory:") throw new Error(`--store ${url} names no file`);
  return resolve(path);
}

/**
 * Restores `file` into the store at `url`: the backup is opened from a temporary copy (opening a
 * store migrates its schema and starts its search index: the backup file itself stays as it was).
 */
async function restore(file: string, url: string) {
  if (!existsSync(file)) throw new Error(`${file} does not exist`);
  const dir = mkdtempSync(join(tmpdir(), "contextd-restore-"));
  try {
    const copy = join(dir, basename(file));
    copyFileSync(file, copy);
    const { openStore } = await import("../../store/open-store.js");
    const source = await openStore(`sqlite:${copy}`);
    try {
      const target = await openStore(url);
      try {
        const counts = await copyStore(source, target);
        await target.appendAudit({
          atMs: Date.now(),
          actor: `contextctl ${safeUser()}`.trim(),
          action: "store.restore",
          target: `backup ${file}`,
          peer: "",
          outcome: "OK",
          method: "",
          requestId: "",
        });
        return counts;
      } finally {
        await target.close();
      }
    } finally {
      await source.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function safeUser(): string {
  try {
    return `(user ${userInfo().username})`;
  } catch {
    return "";
  }
}

function fail(json: boolean | undefined, command: string, err: unknown): void {
  const text = errorText(err);
  if (json) printJson({ ok: false, error: text });
  writeStderr(`contextctl: ${command}: ${text}\n`);
  process.exitCode = 1;
}
