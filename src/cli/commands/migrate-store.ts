import { existsSync } from "node:fs";
import { resolve } from "node:path";

import cliProgress from "cli-progress";
import type { Command } from "commander";

import type { ContextdStore } from "../../store/open-store.js";
import { NO_ROWS, type StoreRowCounts } from "../../store/store-copy.js";
import { errorText, examples, num, printJson } from "../format.js";
import { globals } from "./shared.js";
import { writeStderr, writeStdout } from "../terminal-text.js";

/** Rows read from the source per call (bounds memory whatever the size of a session). */
const PAGE = 1_000;

export interface CopyProgress {
  sessionsDone: number;
  sessionsTotal: number;
  entriesDone: number;
  entriesTotal: number;
}

/**
 * Copies everything `source` holds into the empty `target`, row for row (StoreCopy in
 * src/store/store-copy.ts): every session with its entries (ids, seqs, payloads, hidden flags),
 * revisions, idempotency keys, header and active-view pointers, then the registry's four tables
 * verbatim — the engine rows (owner, most recent instance), every instance row (instance id,
 * endpoint, locality, info, registration time), the engine-wide quarantine records (an operator's
 * isolation of an engine) and every instance's quarantine record (automatic, or an operator's
 * isolation of one instance) — so a multi-instance engine stays as many instances, each with its
 * quarantine (docs/registry.md, "Stored and shared"). All of it is written in one transaction on
 * the target: a failed copy leaves the target empty, so it can simply be run again. Each session is
 * checked against its own row as it is copied (entry count, last seq), which catches a source that
 * is written to meanwhile.
 */
export async function copyStore(source: ContextdStore, target: ContextdStore, onProgress: (p: CopyProgress) => void = () => {}): Promise<StoreRowCounts> {
  const expected = await source.countRows();
  const writer = await target.beginRawWrite();
  const copied: StoreRowCounts = { ...NO_ROWS };
  const progress = () =>
    onProgress({ sessionsDone: copied.sessions, sessionsTotal: expected.sessions, entriesDone: copied.entries, entriesTotal: expected.entries });
  try {
    progress();
    for (let after = ""; ;) {
      const ids = await source.listSessionIds(after, PAGE);
      if (ids.length === 0) break;
      for (const id of ids) {
        const session = await source.readRawSession(id);
        if (!session) throw changed(`session ${id} was deleted`);
        await writer.writeSession(session);
        let entries = 0;
        let lastSeq = 0;
        for (;;) {
          const page = await source.readRawEntries(id, lastSeq, PAGE);
          if (page.length === 0) break;
          await writer.writeEntries(id, page);
          entries += page.length;
          lastSeq = page[page.length - 1].seq;
          copied.entries += page.length;
          progress();
        }
        if (entries !== session.entryCount || lastSeq !== session.lastSeq) {
          throw changed(`session ${id} has ${entries} entries up to seq ${lastSeq}, its row says ${session.entryCount} up to seq ${session.lastSeq}`);
        }
        for (let from: { entryId: string; revision: number } | null = null; ;) {
          const page = await source.readRawRevisions(id, from, PAGE);
          if (page.length === 0) break;
          await writer.writeRevisions(id, page);
          copied.entryRevisions += page.length;
          from = page[page.length - 1];
        }
        for (let from = ""; ;) {
          const page = await source.readRawIdempotencyKeys(id, from, PAGE);
          if (page.length === 0) break;
          await writer.writeIdempotencyKeys(id, page);
          copied.idempotencyKeys += page.length;
          from = page[page.length - 1].key;
        }
        copied.sessions += 1;
        progress();
      }
      after = ids[ids.length - 1];
    }
    const registry = await source.readRawRegistry();
    await writer.writeRegistry(registry);
    copied.registrations = registry.registrations.length;
    copied.instances = registry.instances.length;
    copied.quarantines = registry.quarantines.length;
    copied.instanceQuarantines = registry.instanceQuarantines.length;
    await writer.commit();
  } catch (err) {
    await writer.rollback();
    throw err;
  }
  return copied;
}

function changed(what: string): Error {
  return new Error(`the source store changed during the copy (${what}); stop every contextd that uses it and run migrate-store again`);
}

/**
 * `contextctl migrate-store FROM TO [--json]`: copies a whole store (sessions and the whole registry:
 * engines, their instances, engine and instance quarantines) into another, typically a
 * SQLite file into PostgreSQL when moving to several replicas (`contextctl migrate-store
 * sqlite:./data/contextd.db postgres://contextd@db:5432/contextd`). Stop contextd first: the source
 * must not change during the copy. TO must be empty (its schema is created when it has none); FROM
 * is opened as it is (a SQLite file that does not exist is an error, not a new empty store).
 * Progress goes to stderr on a terminal. Exit code 0 when everything was copied, 1 otherwise — and
 * then nothing was written to TO.
 */
export function registerMigrateStore(program: Command): void {
  program
    .command("migrate-store")
    .description("copy every session, engine registration, engine instance and quarantine record from one store URL into an empty one")
    .argument("<from>", "source store URL (sqlite:PATH or postgres://…)")
    .argument("<to>", "target store URL; must hold nothing yet")
    .addHelpText(
      "after",
      "\nStop contextd first. Exit 0 when everything was copied; 1 otherwise, and then nothing was written to TO.\n" +
        'With --json: {"ok", "from", "to", "sessions", "entries", "entryRevisions", "idempotencyKeys", "registrations",\n' +
        '"instances", "quarantines", "instanceQuarantines", "seconds"} (on failure {"ok": false, "from", "to", "error"}):\n' +
        "registrations are engine ids, instances the instances serving them, quarantines the engine-wide records\n" +
        "(an operator's isolation of an engine), instanceQuarantines those of single instances.\n" +
        examples("contextctl migrate-store sqlite:./data/contextd.db postgres://contextd@db:5432/contextd"),
    )
    .action(async (from: string, to: string, _opts: unknown, cmd: Command) => {
      const g = globals(cmd);
      const started = performance.now();
      const bar = process.stderr.isTTY && !g.json ? progressBar() : undefined;
      try {
        const counts = await migrate(from, to, (p) => {
          bar?.setTotal(Math.max(1, p.entriesTotal));
          bar?.update(p.entriesDone, { sessions: `${num(p.sessionsDone)}/${num(p.sessionsTotal)}` });
        });
        bar?.stop();
        const seconds = (performance.now() - started) / 1000;
        if (g.json) return printJson({ ok: true, from: redact(from), to: redact(to), ...counts, seconds: Math.round(seconds * 1000) / 1000 });
        writeStdout(
          `copied ${num(counts.sessions)} sessions (${num(counts.entries)} entries, ${num(counts.entryRevisions)} revisions, ` +
            `${num(counts.idempotencyKeys)} idempotency keys), ${num(counts.registrations)} engine registrations ` +
            `(${num(counts.instances)} instances) and ${num(counts.quarantines + counts.instanceQuarantines)} quarantine records ` +
            `(${num(counts.quarantines)} engine-wide, ${num(counts.instanceQuarantines)} of instances) from ${redact(from)} to ${redact(to)} ` +
            `in ${seconds.toFixed(1)} s\n`,
        );
      } catch (err) {
        bar?.stop();
        const text = redactAll(errorText(err), [from, to]);
        if (g.json) printJson({ ok: false, from: redact(from), to: redact(to), error: text });
        writeStderr(`contextctl: migrate-store: ${text}\n`);
        process.exitCode = 1;
      }
    });
}

async function migrate(from: string, to: string, onProgress: (p: CopyProgress) => void): Promise<StoreRowCounts> {
  if (from.trim() === to.trim()) throw new Error("FROM and TO are the same store");
  const missing = missingSqliteFile(from);
  if (missing) throw new Error(`source ${from}: ${missing} does not exist`);
  // Loaded here, so that other commands do not load the store drivers.
  const { openStore } = await import("../../store/open-store.js");
  const source = await openStore(from);
  try {
    const target = await openStore(to);
    try {
      return await copyStore(source, target, onProgress);
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
  }
}

function progressBar(): cliProgress.SingleBar {
  const bar = new cliProgress.SingleBar(
    { stream: process.stderr, format: "migrate-store [{bar}] {value}/{total} entries | {sessions} sessions", hideCursor: true, clearOnComplete: true },
    cliProgress.Presets.shades_classic,
  );
  bar.start(1, 0, { sessions: "0/0" });
  return bar;
}

/** The file a `sqlite:` URL names when it does not exist (opening it would create an empty store). */
function missingSqliteFile(url: string): string | undefined {
  if (!/^sqlite:/i.test(url)) return undefined;
  let path = url.slice("sqlite:".length);
  if (path.startsWith("//")) path = path.slice(2);
  if (path === "" || path === ":memory:") return undefined;
  const file = resolve(path);
  return existsSync(file) ? undefined : file;
}

/** A store URL without its password. */
function redact(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@/]*@/, "//$1:***@");
}

/** `text` with any password of `urls` blanked out (a driver message may quote a URL). */
function redactAll(text: string, urls: string[]): string {
  let out = text;
  for (const u of urls) {
    const password = /\/\/[^:/@]*:([^@/]*)@/.exec(u)?.[1];
    if (password) out = out.split(password).join("***").split(decodeURIComponent(password)).join("***");
  }
  return out;
}
