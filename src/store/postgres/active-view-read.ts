import { ALL_AGENTS, type ActiveView, type AgentScope } from "../types.js";
import { extendView, holds, toActiveView, wholeView, type ViewCache, type ViewRow } from "../view-cache.js";
import { run, type PgDatabase } from "./database.js";
import { sessionFromJson, type PayloadRow } from "./rows.js";
import { SQL } from "./statements.js";

type Row = PayloadRow & { part: number; session: string | null };

/**
 * A session's active view. With a cached view (view-cache.ts) one statement reads the session row
 * and, while the view still holds, only the messages appended since; otherwise — no cached view,
 * or a compaction, rewrite or re-creation on any replica since — the view is read whole. Either way
 * each answer is one statement's snapshot.
 *
 * Why a cache at all on a shared database: the whole view travels from the server as hex text and
 * is decoded on every Assemble, which made Assemble on PostgreSQL more than twice as slow as on
 * SQLite once SQLite cached (bench assemble_scaling `postgres_vs_sqlite_assemble_p50_ratio`).
 */
export async function readActiveView(db: PgDatabase, cache: ViewCache, sessionId: string, agents: AgentScope = ALL_AGENTS): Promise<ActiveView | undefined> {
  // The statements read the session row only when its agent is within `agents` (as listings filter),
  // so another agent's session costs what a missing id costs: none of its entries are read.
  const scope = [[...agents.exact], [...agents.prefixes]];
  const generation = cache.generation;
  const cached = cache.get(sessionId);
  if (cached) {
    const key = [sessionId, ...scope, cached.lastSeq, cached.createdAtMs, cached.latestCompactionSeq, cached.activeFromSeq, cached.revision];
    const rows = await db.read((conn) => run<Row>(conn, SQL.activeViewSince, key));
    if (rows.length === 0) {
      // Missing, or outside `agents`: a caller refused must not evict the owner's cached view.
      if (agents === ALL_AGENTS) cache.delete(sessionId);
      return undefined;
    }
    const row: ViewRow = sessionFromJson(rows[0].session!);
    if (holds(cached, row)) {
      const view = cached.lastSeq < row.last_seq ? await extendView(cached, row, rows.slice(1)) : cached;
      if (view !== cached) cache.set(sessionId, view, generation);
      return toActiveView(row, view);
    }
  }
  const rows = await db.read((conn) => run<Row>(conn, SQL.activeView, [sessionId, ...scope]));
  if (rows.length === 0) return undefined;
  const row: ViewRow = sessionFromJson(rows[0].session!);
  // Part 1 the latest compaction entry, 2 the pinned system messages before the cut, 3 the kept range.
  const compaction = rows.find((r) => r.part === 1)?.payload;
  const view = await wholeView(
    row,
    compaction,
    rows.filter((r) => r.part === 2),
    rows.filter((r) => r.part === 3),
  );
  cache.set(sessionId, view, generation);
  return toActiveView(row, view);
}
