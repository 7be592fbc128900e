/**
 * Group commit for SQLite appends: the appends that reach the store in the same turn of the event
 * loop (concurrent calls, usually of different sessions) are written in one IMMEDIATE transaction —
 * one WAL sync instead of one per call — each inside a savepoint of its own, so one call's error
 * (an entry limit, a bad id) rolls back only that call. Every caller is answered only after the
 * transaction that holds its messages has committed: durable, as before (synchronous=FULL).
 *
 * Why: with synchronous=FULL the sync is most of a small append's cost, so four writers appending
 * one message a call were bound by syncs (bench append_throughput `single_msgs_per_s`).
 *
 * A group is bounded in time, not in size: once its jobs have held the event loop for a call-path
 * slice (CALL_PATH_SLICE_MS) it commits, and the jobs left wait for the next turn. One tenant's
 * appends arriving together (a dozen batches of large messages) were otherwise one transaction of
 * 10–15 ms during which no other tenant's call was served (noisy_neighbor bench). A job itself is
 * never split: one append is one savepoint, whatever its size.
 *
 * The group's own COMMIT does not sync (the connection is switched to `synchronous = NORMAL` around
 * it); the WAL is synced on the thread pool afterwards (wal-sync.ts) and the callers are answered
 * when that sync is done, so the event loop serves other calls meanwhile. Compaction commits join
 * the group too; the connection's other writes (sessions, imports, rewrites, the registry) keep FULL. An in-memory database
 * has nothing to sync.
 */
import type Database from "better-sqlite3";
import { CALL_PATH_SLICE_MS, TimeSlices } from "../../contract/time-slices.js";
import type { WalSync } from "./wal-sync.js";

interface Job<T> {
  run: () => T;
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; err: unknown };

export class GroupCommit {
  private queue: Job<unknown>[] = [];
  private scheduled = false;
  private readonly group: Database.Transaction<(jobs: Job<unknown>[]) => Outcome[]>;
  private readonly syncOff: Database.Statement;
  private readonly syncOn: Database.Statement;

  constructor(
    db: Database.Database,
    private readonly walSync?: WalSync,
    private readonly sliceMs = CALL_PATH_SLICE_MS,
  ) {
    this.syncOff = db.prepare("PRAGMA synchronous = NORMAL");
    this.syncOn = db.prepare("PRAGMA synchronous = FULL");
    // A better-sqlite3 transaction function called inside another runs as a SAVEPOINT: a job that
    // throws is rolled back to it, and the others of the group still commit.
    const one = db.transaction((job: Job<unknown>) => job.run());
    // The outcomes of the first jobs, as many as fit in one slice (at least one).
    this.group = db.transaction((jobs: Job<unknown>[]) => {
      const slice = new TimeSlices(this.sliceMs);
      const outcomes: Outcome[] = [];
      for (const job of jobs) {
        if (outcomes.length > 0 && slice.due()) break;
        try {
          outcomes.push({ ok: true, value: one(job) });
        } catch (err) {
          outcomes.push({ ok: false, err });
        }
      }
      return outcomes;
    });
  }

  /** Runs `run` inside the next group's transaction; resolves once that transaction committed. */
  write<T>(run: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run, resolve, reject } as Job<unknown>);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // After the I/O callbacks of this turn: every call that arrived in it joins the group.
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    const queued = this.queue;
    this.queue = [];
    let outcomes: Outcome[];
    try {
      if (this.walSync) this.syncOff.run();
      outcomes = this.group.immediate(queued);
    } catch (err) {
      // BEGIN or COMMIT failed (disk full, database locked past busy_timeout): nothing was written.
      for (const job of queued) job.reject(err);
      return;
    } finally {
      if (this.walSync) this.syncOn.run();
    }
    const jobs = queued.slice(0, outcomes.length);
    if (jobs.length < queued.length) {
      // The slice ran out: the rest go first in the next group, a turn later.
      this.queue = queued.slice(jobs.length).concat(this.queue);
      this.schedule();
    }
    const answer = () => outcomes.forEach((o, i) => (o.ok ? jobs[i].resolve(o.value) : jobs[i].reject(o.err)));
    if (!this.walSync || !outcomes.some((o) => o.ok)) return answer();
    // Committed, not yet on disk: answer once the WAL is synced. A sync that fails leaves the
    // rows committed but maybe not durable; the callers get the error (an idempotency key makes
    // their retry safe).
    this.walSync.sync().then(answer, (err: unknown) => {
      for (const job of jobs) job.reject(err);
    });
  }
}
