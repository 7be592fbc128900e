import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type Database from "better-sqlite3";

import { openIndexFile, SearchIndexer } from "./search-index.js";

// The store's side of the search indexer (search-index.ts): where it runs, and waiting for it.
//
// A store on a file indexes on a thread of its own (search-index-worker.ts) with its own connection:
// the words are cut and FTS5 written beside the event loop, after the appends that logged them have
// committed and been answered. A search first waits until the indexer has applied every log row
// written before the search began (`caughtUp`), so an entry is found once its append has returned —
// the index's lag shows as the wait, never as a missed entry.
//
// Inline (the indexer's steps run on the event loop, when a search asks for them): an in-memory
// store, whose database no other connection can open, and a store running from the TypeScript
// sources (the unit tests), where there is no compiled worker file to start.

export type ToIndexer = { type: "kick" } | { type: "stop" };
export type FromIndexer = { type: "applied"; applied: number } | { type: "failed"; message: string } | { type: "stopped" };

/** Log rows one step applies (one index transaction). */
const STEP_OPS = 1000;

const WORKER_FILE = fileURLToPath(new URL("./search-index-worker.js", import.meta.url));

export interface SearchIndexing {
  /** The store wrote log rows (after their transaction committed). */
  kick(): void;
  /** Resolves once every log row through `op` is applied to the index. */
  caughtUp(op: number): Promise<void>;
  /** Called with each newly applied mark (the store trims its log to it). */
  onApplied: (applied: number) => void;
  close(): Promise<void>;
}

/** The indexer on its own thread, for the store file at `storePath`; undefined when there is no compiled worker to start. */
export function startIndexThread(storePath: string, indexPath: string): SearchIndexing | undefined {
  if (!fs.existsSync(WORKER_FILE)) return undefined;
  return new IndexThread(storePath, indexPath);
}

class IndexThread implements SearchIndexing {
  private worker: Worker | undefined;
  private applied = -1;
  private waiters: { op: number; resolve: () => void; reject: (err: Error) => void }[] = [];
  private stopped: Promise<void> | undefined;
  onApplied: (applied: number) => void = () => {};

  constructor(
    private readonly storePath: string,
    private readonly indexPath: string,
  ) {
    this.start();
  }

  private start(): Worker {
    const worker = new Worker(WORKER_FILE, { workerData: { storePath: this.storePath, indexPath: this.indexPath, stepOps: STEP_OPS } });
    worker.unref();
    worker.on("message", (m: FromIndexer) => {
      if (m.type === "applied") this.advance(m.applied);
      else if (m.type === "failed") this.fail(new Error(`the search index could not be updated: ${m.message}`));
    });
    worker.on("error", (err) => {
      this.worker = undefined;
      // A thread that cannot run here (it died before its first step): the store indexes on the
      // event loop instead, as a search asks (correct, only slower) — never a search that fails for good.
      if (this.applied < 0 && !this.stopped) this.runInline();
      else this.fail(new Error(`the search indexer stopped: ${err.message}`));
    });
    worker.on("exit", () => {
      if (this.worker === worker) this.worker = undefined;
    });
    this.worker = worker;
    // Whatever the log holds from before (a restart): applied from the start.
    worker.postMessage({ type: "kick" } satisfies ToIndexer);
    return worker;
  }

  private inline: InlineIndexing | undefined;

  private runInline(): void {
    this.inline = new InlineIndexing(openIndexFile(this.indexPath, this.storePath), "src", "main", true);
    this.inline.onApplied = (applied) => this.advance(applied);
    const waiting = this.waiters;
    this.waiters = [];
    for (const w of waiting) this.caughtUp(w.op).then(w.resolve, w.reject);
  }

  kick(): void {
    if (this.stopped || this.inline) return;
    (this.worker ?? this.start()).postMessage({ type: "kick" } satisfies ToIndexer);
  }

  caughtUp(op: number): Promise<void> {
    if (this.applied >= op) return Promise.resolve();
    if (this.inline) return this.inline.caughtUp(op);
    if (this.stopped) return Promise.reject(new Error("the store is closed"));
    return new Promise((resolve, reject) => {
      this.waiters.push({ op, resolve, reject });
      this.kick();
    });
  }

  private advance(applied: number): void {
    if (applied <= this.applied) return;
    this.applied = applied;
    this.waiters = this.waiters.filter((w) => {
      if (w.op > applied) return true;
      w.resolve();
      return false;
    });
    this.onApplied(applied);
  }

  private fail(err: Error): void {
    const waiting = this.waiters;
    this.waiters = [];
    for (const w of waiting) w.reject(err);
  }

  close(): Promise<void> {
    this.stopped ??= (async () => {
      const worker = this.worker;
      this.fail(new Error("the store is closed"));
      await this.inline?.close();
      if (!worker) return;
      const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
      // Held until it has finished its step and closed its connection.
      worker.ref();
      worker.postMessage({ type: "stop" } satisfies ToIndexer);
      await exited;
    })();
    return this.stopped;
  }
}

/** The indexer on the event loop, run by the searches themselves (see the file comment). */
export class InlineIndexing implements SearchIndexing {
  private readonly indexer: SearchIndexer;
  private applied = -1;
  onApplied: (applied: number) => void = () => {};

  /** `db` holds the store as schema `src` and the index as `ix`. */
  constructor(
    private readonly db: Database.Database,
    src: string,
    ix: string,
    private readonly closeDb: boolean,
  ) {
    this.indexer = new SearchIndexer(db, src, ix);
  }

  kick(): void {}

  async caughtUp(op: number): Promise<void> {
    while (this.applied < op) {
      const { applied, more } = this.indexer.step(STEP_OPS);
      this.applied = applied;
      if (!more && applied < op) break;
    }
    this.onApplied(this.applied);
  }

  async close(): Promise<void> {
    if (this.closeDb && this.db.open) this.db.close();
  }
}
