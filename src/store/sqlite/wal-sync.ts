import fs from "node:fs";

/**
 * The WAL file's fsync, on libuv's thread pool instead of the event loop.
 *
 * With `synchronous = FULL` SQLite syncs the WAL inside every COMMIT, and better-sqlite3 runs the
 * COMMIT on the event loop: for the whole sync (~0.5 ms here, far more on a busy disk) no other call
 * is served, and under appends that sync was the largest part of the main thread's time. The group
 * commit (group-commit.ts) commits its transaction with `synchronous = NORMAL` (in WAL mode: the
 * frames are written, not yet synced) and answers its callers only after this sync of the WAL file,
 * which flushes those frames: on disk before anyone is answered, as with FULL.
 *
 * Every `sync()` is answered by an fdatasync that *started after the call*: one already running
 * may have started before the caller's commit, so callers that come while one runs wait for the next,
 * which then serves all of them (syncs are batched, never more than one at a time).
 *
 * What differs from FULL: between the commit and the sync, other connections and other calls can
 * read the new rows before they are on disk; a power loss in that window loses them, and their
 * appenders, never answered, see an error. SQLite stays consistent either way (WAL with NORMAL).
 */
export class WalSync {
  private fd: number | undefined;
  private running = false;
  private waiting: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];

  /**
   * `walPath`: the database file's `-wal` (it exists from the first write on, and stays while the
   * connection is open). `fdatasync` is Node's unless a test holds the syncs to see the ordering.
   */
  constructor(
    private readonly walPath: string,
    private readonly fdatasync: (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void = fs.fdatasync,
  ) {}

  /** Resolves once an fsync of the WAL that started after this call has completed. */
  sync(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      if (!this.running) this.start();
    });
  }

  /**
   * After the syncs asked for so far, closes the file (before the connection closes, which may
   * remove the WAL; a later sync opens it again).
   */
  async close(): Promise<void> {
    if (this.running) await this.sync().catch(() => undefined);
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
  }

  private start(): void {
    const batch = this.waiting;
    this.waiting = [];
    this.running = true;
    const done = (err: unknown) => {
      this.running = false;
      for (const w of batch) {
        if (err) w.reject(err);
        else w.resolve();
      }
      if (this.waiting.length > 0) this.start();
    };
    try {
      this.fd ??= fs.openSync(this.walPath, "r");
      this.fdatasync(this.fd, done);
    } catch (err) {
      done(err);
    }
  }
}
