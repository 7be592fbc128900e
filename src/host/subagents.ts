import { FailedPreconditionError, InvalidArgumentError, NotFoundError } from "../contract/errors.js";
import type * as S from "../contract/gen/contextd/v1/session.js";
import { SubagentContextMode, SubagentEndReason } from "../contract/gen/contextd/v1/types.js";
import type { SeedEntry, TranscriptStore } from "../store/types.js";
import type { HostCall, SessionHost } from "./session-host.js";
import { requireSession } from "./validate.js";

/**
 * Subagent sessions. FORK seeds the child with the parent's active view (its summary as a
 * compaction entry and copies of the kept messages); ISOLATED starts it empty. The rollback handle
 * names the child, so a failed spawn removes it. EndSubagent with reason DELETED deletes the child's
 * transcript; other reasons keep it readable.
 */
export class Subagents {
  constructor(
    private readonly host: SessionHost,
    private readonly store: TranscriptStore,
  ) {}

  async prepare(req: S.PrepareSubagentSpawnRequest, call: HostCall): Promise<S.PrepareSubagentSpawnResponse> {
    const parent = requireSession(req.parent, "parent");
    const child = requireSession(req.child, "child");
    if (parent.sessionId === child.sessionId) throw new InvalidArgumentError("child.session_id must differ from parent.session_id");
    const mode = req.contextMode;
    if (mode !== SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK && mode !== SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED) {
      throw new InvalidArgumentError("context_mode is required (SUBAGENT_CONTEXT_MODE_ISOLATED or SUBAGENT_CONTEXT_MODE_FORK)");
    }
    const view = await this.host.readView(parent);
    const seed: SeedEntry[] = [];
    if (mode === SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK) {
      for (const m of view.messages) seed.push({ kind: "message", message: { ...m.message, id: "" }, tokenCount: m.tokenCount });
      const c = view.compaction;
      if (c && c.entry.entry?.$case === "compaction") {
        seed.push({
          kind: "compaction",
          compaction: { ...c.entry.entry.value, firstKeptEntryId: "" },
          firstKeptIndex: view.messages.length > 0 ? 0 : null,
          summaryTokens: c.summaryTokens,
        });
      }
    }
    await this.store.createSession(child.sessionId, { sessionKey: child.sessionKey, agentId: child.agentId, parentSessionId: parent.sessionId }, seed);

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
      await this.store.deleteSession(child.sessionId);
      throw err;
    }
  }

  async rollback(req: S.RollbackSubagentSpawnRequest, call: HostCall): Promise<S.RollbackSubagentSpawnResponse> {
    const { childId, engineHandle } = decodeHandle(req.rollbackHandle);
    const record = await this.store.getSession(childId);
    if (!record) throw new NotFoundError(`rollback_handle names session "${childId}", which does not exist (already rolled back?)`);
    // The handle is not a capability: it can only remove a subagent session the caller may act on.
    if (!record.parentSessionId) throw new FailedPreconditionError(`session "${childId}" is not a subagent session; rollback removes only those`);
    call.access.checkAgent(record.agentId);
    const child = { sessionId: childId, sessionKey: record.sessionKey, agentId: record.agentId };
    const selection = this.host.router.select(child);
    await this.host.router.call(selection, "subagent", call, async (engine, ctx) => {
      if (!engine.rollbackSubagentSpawn || !engine.info().capabilities?.subagents) return {};
      return engine.rollbackSubagentSpawn({ rollbackHandle: engineHandle, child }, ctx);
    });
    return { rolledBack: await this.store.deleteSession(childId) };
  }

  async end(req: S.EndSubagentRequest, call: HostCall): Promise<S.EndSubagentResponse> {
    const child = requireSession(req.child, "child");
    await this.host.requireExists(child);
    const selection = this.host.router.select(child);
    const routed = await this.host.router.call(selection, "subagent", call, async (engine, ctx) => {
      if (!engine.onSubagentEnded || !engine.info().capabilities?.subagents) return {};
      return engine.onSubagentEnded({ child, reason: req.reason }, ctx);
    });
    if (req.reason === SubagentEndReason.SUBAGENT_END_REASON_DELETED) await this.store.deleteSession(child.sessionId);
    return { engineId: routed.engineId, mode: routed.mode };
  }
}

function encodeHandle(childId: string, engineHandle: string): string {
  return Buffer.from(JSON.stringify({ c: childId, e: engineHandle }), "utf8").toString("base64url");
}

function decodeHandle(handle: string): { childId: string; engineHandle: string } {
  if (!handle) throw new InvalidArgumentError("rollback_handle is required");
  try {
    const parsed = JSON.parse(Buffer.from(handle, "base64url").toString("utf8")) as { c?: unknown; e?: unknown };
    if (typeof parsed.c === "string" && parsed.c && typeof parsed.e === "string") return { childId: parsed.c, engineHandle: parsed.e };
  } catch {
    // fall through
  }
  throw new InvalidArgumentError("rollback_handle is not a handle this server issued");
}
