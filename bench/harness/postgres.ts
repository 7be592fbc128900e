/**
 * A scratch PostgreSQL database for a benchmark: created on the local server (default
 * `postgres://postgres@127.0.0.1:5432/postgres`, or $BENCH_PG_ADMIN) before the scenario starts its
 * contextd on it, dropped when the scenario ends. When the server cannot be reached, scenarios
 * report their PostgreSQL keys as null with the reason instead of failing their SQLite figures.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";

export const PG_ADMIN_URL = process.env.BENCH_PG_ADMIN || "postgres://postgres@127.0.0.1:5432/postgres";

export interface BenchDatabase {
  /** The store URL for contextd. */
  url: string;
  drop(): Promise<void>;
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 5_000 });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export async function createBenchDatabase(): Promise<BenchDatabase> {
  const name = `contextd_bench_${randomBytes(5).toString("hex")}`;
  await admin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'UTF8'`));
  const u = new URL(PG_ADMIN_URL);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

/** The database, or the reason there is none (a message for the report). */
export async function tryBenchDatabase(): Promise<BenchDatabase | string> {
  try {
    return await createBenchDatabase();
  } catch (err) {
    return `PostgreSQL at ${PG_ADMIN_URL.replace(/\/\/([^:/@]*):[^@/]*@/, "//$1:***@")} is unreachable: ${err instanceof Error ? err.message : String(err)}`;
  }
}
