import { FailedPreconditionError } from "../../contract/errors.js";
import type { ContextEngineServiceCompactRequest, ContextEngineServiceCompactResponse } from "../../contract/gen/contextd/v1/engine.js";
import type { HostClient } from "./host-client.js";

/**
 * A ready-made `compact` for engines that do not own compaction: runs the host's native compaction
 * through HostService.DelegateCompaction with the Compact request's parameters (the host commits it
 * under this engine's id) and answers with its result.
 *
 * ```ts
 * serveEngine({ info, assemble, compact: delegateCompactionToHost });
 * ```
 */
export async function delegateCompactionToHost(
  req: ContextEngineServiceCompactRequest,
  // Only the host client of the call's context (an EngineCallContext): engine-definition.ts refers
  // to this function (it declares `host-compaction` for it), so this file must not refer back.
  ctx: { host?: HostClient },
): Promise<ContextEngineServiceCompactResponse> {
  if (!ctx.host) {
    throw new FailedPreconditionError("Compact carried no HostContext, so the engine cannot delegate compaction to the host");
  }
  const res = await ctx.host.delegateCompaction({
    session: req.session,
    tokenBudget: req.tokenBudget,
    force: req.force,
    currentTokenCount: req.currentTokenCount,
    compactionTarget: req.compactionTarget,
    customInstructions: req.customInstructions,
  });
  return { ok: res.ok, compacted: res.compacted, reason: res.reason, result: res.result };
}
