import type pg from "pg";

import { StoreUnavailableError } from "../../contract/errors.js";
import { isConnectionError, isRetryableConflict, unavailable } from "./errors.js";

/** A connection statements run on: a pooled client, inside or outside a transaction. */
export type Conn = pg.PoolClient;

/** A statement with a name: prepared once per connection, then only bound and executed. */
export interface Statement {
  name: string;
  text: string;
}

export async function run<R extends pg.QueryResultRow>(conn: Conn, stmt: Statement, values: unknown[] = []): Promise<R[]> {
  return (await conn.query<R>({ name: stmt.name, text: stmt.text, values })).rows;
}

/** rowCount of a statement (UPDATE/DELETE). */
export async function count(conn: Conn, stmt: Statement, values: unknown[] = []): Promise<number> {
  return (await conn.query({ name: stmt.name, text: stmt.text, values })).rowCount ?? 0;
}

/** Serialization failures and deadlocks: PostgreSQL asks for the transaction to be retried. */
const CONFLICT_ATTEMPTS = 5;

export interface TransactionOptions {
  /** Another error after which the whole transaction runs again (e.g. a lost race on a unique key). */
  retryOn?: (err: unknown) => boolean;
}

/**
 * The pool and the two ways the store uses it. Connection errors become UnavailableError naming
 * PostgreSQL and the cause (errors.ts); a connection that failed is discarded, never returned to
 * the pool. Nothing is cached here: every call reads what the database holds now.
 */
export class PgDatabase {
  private ended = false;
  /**
   * A connection the server closed while it sat in the pool (pg_terminate_backend, a restart) may
   * be handed out before the pool notices; the call then fails on it, the connection is discarded,
   * and a call that had not committed anything runs again. With every pooled connection dead, the
   * attempt after the last of them gets a fresh one (or a refused connect, which is not retried).
   */
  private readonly brokenConnectionAttempts: number;

  constructor(
    private readonly pool: pg.Pool,
    /** `host:port/database`, for messages. */
    readonly where: string,
    poolMax: number,
  ) {
    this.brokenConnectionAttempts = poolMax + 1;
    // An idle connection that the server closes (pg_terminate_backend, a restart) is reported on
    // the pool; without a listener that event would crash the process. The pool drops the client.
    pool.on("error", () => {});
    // The same for a checked-out connection that dies between two statements: the next statement
    // on it fails, and that failure is what the caller sees.
    pool.on("connect", (client) => client.on("error", () => {}));
  }

  /** Statements outside a transaction (each sees its own snapshot); `fn` must only read. */
  async read<T>(fn: (conn: Conn) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const conn = await this.connect();
      try {
        const out = await fn(conn);
        conn.release();
        return out;
      } catch (err) {
        if (!isConnectionError(err)) {
          conn.release();
          throw err;
        }
        conn.release(err as Error);
        if (attempt >= this.brokenConnectionAttempts || this.ended) throw unavailable(err, this.where);
      }
    }
  }

  /**
   * Runs `fn` in one READ COMMITTED transaction and commits it. Writers serialize on the rows they
   * lock (`SELECT … FOR UPDATE` on the session row), so each statement after the lock sees what
   * the previous holder committed. The transaction runs again when the connection broke before
   * COMMIT was sent (nothing was written), on a serialization failure or deadlock, and when
   * `retryOn` says so. A connection lost during COMMIT is UNAVAILABLE with an unknown outcome.
   */
  async transaction<T>(fn: (conn: Conn) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    let broken = 0;
    let conflicts = 0;
    for (;;) {
      const conn = await this.connect();
      let committing = false;
      try {
        await conn.query("BEGIN");
        const out = await fn(conn);
        committing = true;
        await conn.query("COMMIT");
        conn.release();
        return out;
      } catch (err) {
        if (isConnectionError(err)) {
          conn.release(err as Error);
          if (committing) {
            throw unavailable(
              err,
              this.where,
              "the write may or may not have been committed (an append retried with the same idempotency key is answered once)",
            );
          }
          if (++broken >= this.brokenConnectionAttempts || this.ended) throw unavailable(err, this.where);
          continue;
        }
        await this.rollback(conn);
        if ((isRetryableConflict(err) || options.retryOn?.(err)) && ++conflicts < CONFLICT_ATTEMPTS) continue;
        throw err;
      }
    }
  }

  /** A connection of its own, for a long transaction the caller drives (release it with `release(true)` on failure). */
  async dedicated(): Promise<Conn> {
    return this.connect();
  }

  /** A connection error as UnavailableError; anything else as it is. */
  translate(err: unknown): unknown {
    return isConnectionError(err) ? unavailable(err, this.where) : err;
  }

  async ping(): Promise<void> {
    await this.read((conn) => conn.query("SELECT 1"));
  }

  async end(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    await this.pool.end();
  }

  private async connect(): Promise<Conn> {
    if (this.ended) throw new StoreUnavailableError(`PostgreSQL store at ${this.where} is closed`);
    try {
      return await this.pool.connect();
    } catch (err) {
      // A refused or timed-out connect is not retried here: a fresh attempt just failed.
      if (isConnectionError(err)) throw unavailable(err, this.where);
      throw err;
    }
  }

  /** Rolls back after a failed statement; a connection that cannot even do that is discarded. */
  private async rollback(conn: Conn): Promise<void> {
    try {
      await conn.query("ROLLBACK");
      conn.release();
    } catch (err) {
      conn.release(err instanceof Error ? err : new Error(String(err)));
    }
  }
}
