import { randomBytes } from "node:crypto";

import pg from "pg";

/**
 * Scratch databases on the local PostgreSQL server (127.0.0.1:5432, trust auth, user `postgres`;
 * $CONTEXTD_TEST_PG_ADMIN overrides the admin URL). Each test creates its own database with a random
 * name and drops it afterwards, so tests and test files run in parallel without seeing each other.
 * When the server is unreachable, creating one throws: the test fails, it is never skipped.
 */
export const ADMIN_URL = process.env.CONTEXTD_TEST_PG_ADMIN || "postgres://postgres@127.0.0.1:5432/postgres";

export interface ScratchDatabase {
  name: string;
  /** The store URL of the database, with contextd's pool parameters (`pool_max=4` unless given). */
  url(params?: Record<string, string | number>): string;
  /** A plain driver client on the database (to look at tables, or to kill connections). */
  client(): Promise<pg.Client>;
  drop(): Promise<void>;
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
  } catch (err) {
    throw new Error(`the test PostgreSQL server at ${ADMIN_URL} is unreachable (these tests need it): ${(err as Error).message}`);
  }
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function createScratchDatabase(): Promise<ScratchDatabase> {
  const name = `contextd_test_${randomBytes(6).toString("hex")}`;
  // template0: nobody is ever connected to it, so parallel CREATE DATABASEs do not collide on it.
  await admin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'UTF8'`));
  const base = new URL(ADMIN_URL);
  base.pathname = `/${name}`;
  return {
    name,
    url(params = {}) {
      const u = new URL(base);
      for (const [k, v] of Object.entries({ pool_max: 4, ...params })) u.searchParams.set(k, String(v));
      return u.toString();
    },
    async client() {
      const c = new pg.Client({ connectionString: base.toString() });
      await c.connect();
      return c;
    },
    async drop() {
      await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
