import { ALL_AGENTS, inAgentScope, type ActiveView, type AgentScope } from "../types.js";
import { extendView, holds, toActiveView, wholeView, type CachedView, type ViewCache, type ViewRow } from "../view-cache.js";
import type { PayloadRow } from "../rows.js";
import type { Statements } from "./statements.js";

/**
 * What a session's active view needs, read inside the caller's read transaction (one snapshot): the
 * session row and either the cached view (view-cache.ts says when it is still right) with the rows
 * appended since, or every row of the view. Nothing is decoded here: {@link decodeActiveView} does
 * that after the transaction, in time slices.
 */
export type ActiveViewRead =
  | { kind: "cached"; row: ViewRow; cached: CachedView; added: PayloadRow[]; generation: number }
  | { kind: "whole"; row: ViewRow; compaction: Buffer | undefined; pinned: PayloadRow[]; kept: PayloadRow[]; generation: number };

export function readActiveViewRows(stmts: Statements, cache: ViewCache, sessionId: string, agents: AgentScope = ALL_AGENTS): ActiveViewRead | undefined {
  cache.checkDataVersion(stmts.dataVersion.get()!.data_version);
  const generation = cache.generation;
  // No row, no cached view: deletes of this connection clear the cache, others' move data_version.
  const row = stmts.session.get(sessionId);
  // Another agent's session is refused on its row, before anything whose cost depends on it.
  if (!row || !inAgentScope(agents, row.agent_id)) return undefined;
  const cached = cache.get(sessionId);
  if (cached && holds(cached, row)) {
    const added = cached.lastSeq < row.last_seq ? stmts.activeMessages.all(sessionId, cached.lastSeq + 1) : [];
    return { kind: "cached", row, cached, added, generation };
  }
  const compaction = row.latest_compaction_seq > 0 ? stmts.entryBySeq.get(sessionId, row.latest_compaction_seq)?.payload : undefined;
  const pinned = stmts.pinnedMessages.all(sessionId, row.active_from_seq);
  const kept = stmts.activeMessages.all(sessionId, row.active_from_seq);
  return { kind: "whole", row, compaction, pinned, kept, generation };
}

/** The view `read` holds, decoded (in time slices) and cached unless a write cleared the cache meanwhile. */
export async function decodeActiveView(cache: ViewCache, sessionId: string, read: ActiveViewRead): Promise<ActiveView> {
  const { row } = read;
  let view: CachedView;
  if (read.kind === "whole") view = await wholeView(row, read.compaction, read.pinned, read.kept);
  else view = read.added.length > 0 ? await extendView(read.cached, row, read.added) : read.cached;
  if (read.kind === "whole" || view !== read.cached) cache.set(sessionId, view, read.generation);
  return toActiveView(row, view);
}
