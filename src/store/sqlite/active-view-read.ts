import { ALL_AGENTS, inAgentScope, type ActiveView, type AgentScope } from "../types.js";
import { extendView, holds, toActiveView, wholeView, type ViewCache } from "../view-cache.js";
import type { Statements } from "./statements.js";

/**
 * A session's active view, from the cache where it is still right (view-cache.ts says when) and
 * extended with what was appended since, else read and decoded whole. Runs inside the caller's read
 * transaction, so the row and the entries are one snapshot.
 */
export function readActiveView(stmts: Statements, cache: ViewCache, sessionId: string, agents: AgentScope = ALL_AGENTS): ActiveView | undefined {
  cache.checkDataVersion(stmts.dataVersion.get()!.data_version);
  // No row, no cached view: deletes of this connection clear the cache, others' move data_version.
  const row = stmts.session.get(sessionId);
  // Another agent's session is refused on its row, before anything whose cost depends on it.
  if (!row || !inAgentScope(agents, row.agent_id)) return undefined;
  const cached = cache.get(sessionId);
  let view = cached;
  if (!view || !holds(view, row)) {
    const compaction = row.latest_compaction_seq > 0 ? stmts.entryBySeq.get(sessionId, row.latest_compaction_seq)?.payload : undefined;
    view = wholeView(row, compaction, stmts.pinnedMessages.all(sessionId, row.active_from_seq), stmts.activeMessages.all(sessionId, row.active_from_seq));
  } else if (view.lastSeq < row.last_seq) {
    view = extendView(view, row, stmts.activeMessages.all(sessionId, view.lastSeq + 1));
  }
  if (view !== cached) cache.set(sessionId, view);
  return toActiveView(row, view);
}
