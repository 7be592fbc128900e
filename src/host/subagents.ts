import { FailedPreconditionError, fieldError, SessionNotFoundError } from "../contract/errors.js";
import type * as S from "../contract/gen/contextd/v1/session.js";
import { Mode, SubagentContextMode, SubagentEndReason } from "../contract/gen/contextd/v1/types.js";
import type { SeedEntry, TranscriptStore } from "../store/types.js";
import type { HostCall } from "./host-call.js";
import type { SessionHost } from "./session-host.js";
import type { SessionDeletions } from "./session-deletions.js";
import { quote } from "../contract/quote.js";
import { admitExisting, type AdmittedSession } from "./session-visibility.js";
import { requireEnum } from "./validate.js";

/** The longest ttl_ms taken: about 285 years, so that the expiry stays a safe integer. */
const MAX_TTL_MS = 9_000_000_000_000;

/**
 * Subagent sessions. FORK seeds the child with the parent's active view (its summary as a
 * compaction entry and copies of the kept messages); ISOLATED starts it empty. The rollback handle
 * names the child, so a failed spawn removes it. EndSubagent with reason DELETED deletes the child's
 * transcript; other reasons keep it readable.
 *
 * A child ends once. `ttl_ms` (> 0) makes it expire that long after PrepareSubagentSpawn; the
 * sweep (subagent-sweeper.ts) then ends it with reason SWEPT and tells its engine. EndSubagent
 * records the end in the store before it tells the engine, so of an EndSubagent and a sweep — or
 * two EndSubagents, through any replicas — exactly one reaches the engine; the other is answered
 * without an engine call (DELETED still deletes the transcript). An EndSubagent that did not reach
 * the engine — answered by legacy in its place (FALLBACK), or failed (`on_failure: strict`) — takes
 * its end back, so that a retry can tell the engine. The sweep does not: a SWEPT that could not be
 * delivered is logged, never repeated.
 */
export class Subagents {
  constructor(
    private readonly host: SessionHost,
    private readonly store: TranscriptStore,
    /** Deletions record the engines' ForgetSession (session-deletions.ts); a deleted child's own subagents go with it. */
    private readonly deletions: SessionDeletions,
  ) {}

  async prepare(
    req: S.PrepareSubagentSpawnRequest,
    call: HostCall,
    { parent, child }: { parent: AdmittedSession; child: AdmittedSession },
  ): Promise<S.PrepareSubagentSpawnResponse> {
    if (parent.sessionId === child.sessionId) throw fieldError("child.session_id", "must differ from parent.session_id");
    const mode = requireEnum(req.contextMode, SubagentContextMode, "context_mode", true);
    const ttlMs = req.ttlMs;
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 0 || ttlMs > MAX_TTL_MS)
      throw fieldError("ttl_ms", `${String(ttlMs)} is out of range (0 for none, at most ${MAX_TTL_MS})`);
    const view = await this.host.readView(parent);
    const seed: SeedEntry[] = [];
    if (mode === SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK) {
      for (const m of view.messages) seed.push({ kind: "message", message: { ...m.message, id: "" }, tokenCount: m.tokenCount });
      const c = view.compaction;
      if (c && c.entry.entry?.$case === "compaction") {
        seed.push({
          kind: "compaction",
          compaction: { ...c.entry.entry.value, firstKeptEntryId: "" },
          // The parent's pinned system messages come first in its view and stay before the cut in
          // the child's, so the child's view has the same pinned head (docs/pinned-messages.md).
          firstKeptIndex: view.messages.length > view.pinnedCount ? view.pinnedCount : null,
          summaryTokens: c.summaryTokens,
        });
      }
    }
    const expiresAtMs = ttlMs > 0 ? Date.now() + ttlMs : 0;
    await this.store.createSession(child.sessionId, { sessionKey: child.sessionKey, agentId: child.agentId, parentSessionId: parent.sessionId }, seed, {
      expiresAtMs,
    });

    const selection = this.host.router.select(child);
    try {
      const routed = await this.host.router.call(selection, "subagent", call, async (engine, ctx) => {
        if (!engine.prepareSubagentSpawn || !engine.info().capabilities?.subagents) return { rollbackHandle: "" };
        return engine.prepareSubagentSpawn({ parent, child, contextMode: mode, ttlMs: req.ttlMs, host: ctx.host }, ctx);
      });
      return {
        rollbackHandle: encodeHandle(child.sessionId, routed.value.rollbackHandle),
        childEntryCount: seed.length,
        engineId: routed.engineId,
        mode: routed.mode,
      };
    } catch (err) {
      await this.deletions.delete(child.sessionId, "subagent");
      throw err;
    }
  }

  async rollback(req: S.RollbackSubagentSpawnRequest, call: HostCall): Promise<S.RollbackSubagentSpawnResponse> {
    const { childId, engineHandle } = decodeHandle(req.rollbackHandle);
    const record = await this.store.getSession(childId);
    // The handle is not a capability (it can be forged): it can only remove a subagent session the
    // caller may act on, and another agent's session answers as a missing one — checked before
    // anything else about it is told, as any session a request names (session-visibility.ts).
    const child = admitExisting(
      call.access,
      { sessionId: childId, sessionKey: "", agentId: "" },
      record,
      (id) => new SessionNotFoundError(id, `rollback_handle names session ${quote(id)}, which does not exist (already rolled back?)`),
    );
    if (!record?.parentSessionId) throw new FailedPreconditionError(`session ${quote(childId)} is not a subagent session; rollback removes only those`);
    const selection = this.host.router.select(child);
    await this.host.router.call(selection, "subagent", call, async (engine, ctx) => {
      if (!engine.rollbackSubagentSpawn || !engine.info().capabilities?.subagents) return {};
      return engine.rollbackSubagentSpawn({ rollbackHandle: engineHandle, child }, ctx);
    });
    return { rolledBack: (await this.deletions.delete(childId, "subagent")) !== undefined };
  }

  async end(req: S.EndSubagentRequest, call: HostCall, child: AdmittedSession): Promise<S.EndSubagentResponse> {
    requireEnum(req.reason, SubagentEndReason, "reason");
    const record = await this.host.requireExists(child);
    // Ending a top-level session would delete it (DELETED) or mark it ended: refused, nothing changes.
    if (!record.parentSessionId) {
      throw new FailedPreconditionError(
        `child ${quote(child.sessionId)} is not a subagent session (it has no parent); EndSubagent ends only sessions PrepareSubagentSpawn created`,
      );
    }
    const atMs = Date.now();
    const end = await this.store.endSubagentSession(child.sessionId, req.reason, atMs);
    const selection = this.host.router.select(child);
    if (!end.ended) {
      // Swept (its TTL passed) or ended before: the engine heard of it then.
      call.log.info(
        { sessionId: child.sessionId, endedAtMs: end.endedAtMs, endedWith: SubagentEndReason[end.reason] ?? end.reason },
        "subagent had already ended: the engine is not told again",
      );
      if (req.reason === SubagentEndReason.SUBAGENT_END_REASON_DELETED) await this.deletions.delete(child.sessionId, "subagent");
      return { engineId: selection.target.id, mode: selection.mode };
    }
    let routed;
    try {
      routed = await this.host.router.call(selection, "subagent", call, async (engine, ctx) => {
        if (!engine.onSubagentEnded || !engine.info().capabilities?.subagents) return {};
        return engine.onSubagentEnded({ child, reason: req.reason }, ctx);
      });
    } catch (err) {
      await this.store.reopenSubagentSession(child.sessionId, atMs).catch(() => false);
      throw err;
    }
    // Answered by legacy in place of the child's engine (it failed, is quarantined, or is not
    // registered): the engine did not hear of it, so the end is taken back and a retry may tell it.
    if (routed.mode === Mode.MODE_FALLBACK) await this.store.reopenSubagentSession(child.sessionId, atMs).catch(() => false);
    if (req.reason === SubagentEndReason.SUBAGENT_END_REASON_DELETED) await this.deletions.delete(child.sessionId, "subagent");
    return { engineId: routed.engineId, mode: routed.mode };
  }
}

function encodeHandle(childId: string, engineHandle: string): string {
  return Buffer.from(JSON.stringify({ c: childId, e: engineHandle }), "utf8").toString("base64url");
}

function decodeHandle(handle: string): { childId: string; engineHandle: string } {
  if (!handle) throw fieldError("rollback_handle", "is required");
  try {
    const parsed = JSON.parse(Buffer.from(handle, "base64url").toString("utf8")) as { c?: unknown; e?: unknown };
    if (typeof parsed.c === "string" && parsed.c && typeof parsed.e === "string") return { childId: parsed.c, engineHandle: parsed.e };
  } catch {
    // fall through
  }
  throw fieldError("rollback_handle", "is not a handle this server issued");
}
