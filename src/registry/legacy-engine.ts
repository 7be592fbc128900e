import { PROTOCOL_VERSION, type CallContext, type ContextEngine } from "../contract/engine-api.js";
import { LEGACY_ENGINE_ID } from "../contract/engine-id.js";
import {
  EngineInfo,
  TurnMaintenanceMode,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceAssembleResponse,
  type ContextEngineServiceCompactRequest,
  type ContextEngineServiceCompactResponse,
  type IngestResponse,
} from "../contract/gen/contextd/v1/engine.js";
import { PromptAuthority } from "../contract/gen/contextd/v1/types.js";
import { compactNative, type NativeCompactionDeps } from "../compaction/native-compaction.js";

// Re-exported for the layers above that already import them from here; the contract owns them.
export { CORE_OWNER, LEGACY_ENGINE_ID } from "../contract/engine-id.js";

/**
 * The built-in, core-owned default engine. It runs in process and is always reachable, which is
 * what makes it the fallback for every other engine.
 *
 * - ingest is a no-op: the host has already stored the message.
 * - assemble returns the host's active view as it is (the host compacts before calling it when
 *   the view is over budget; if it is still over, the answer says PREASSEMBLY_MAY_OVERFLOW).
 * - compact runs the host's native compaction and returns the result; the host commits it.
 */
export class LegacyEngine implements ContextEngine {
  private readonly engineInfo: EngineInfo = EngineInfo.fromPartial({
    id: LEGACY_ENGINE_ID,
    name: "Legacy (built-in)",
    version: "1.0.0",
    ownsCompaction: false,
    turnMaintenanceMode: TurnMaintenanceMode.TURN_MAINTENANCE_MODE_FOREGROUND,
    capabilities: {},
    hostRequirements: ["host-compaction"],
    protocolVersions: [PROTOCOL_VERSION],
  });

  constructor(private readonly compaction: NativeCompactionDeps) {}

  info(): EngineInfo {
    return this.engineInfo;
  }

  async ingest(): Promise<IngestResponse> {
    return { ingested: true };
  }

  async assemble(req: ContextEngineServiceAssembleRequest): Promise<ContextEngineServiceAssembleResponse> {
    const estimatedTokens = req.messages.reduce((sum, m) => sum + m.tokenCount, 0);
    const overBudget = req.tokenBudget !== undefined && estimatedTokens > req.tokenBudget;
    return {
      messages: req.messages,
      keptEntryIds: [],
      estimatedTokens,
      systemPromptAddition: "",
      promptAuthority: overBudget ? PromptAuthority.PROMPT_AUTHORITY_PREASSEMBLY_MAY_OVERFLOW : PromptAuthority.PROMPT_AUTHORITY_ASSEMBLED,
    };
  }

  async compact(req: ContextEngineServiceCompactRequest, ctx: CallContext): Promise<ContextEngineServiceCompactResponse> {
    const outcome = await compactNative(
      {
        messages: req.messages,
        tokenBudget: req.tokenBudget,
        target: req.compactionTarget,
        force: req.force,
        customInstructions: req.customInstructions,
        currentTokenCount: req.currentTokenCount,
        agentId: req.session?.agentId,
        signal: ctx.signal,
        away: ctx.away,
      },
      this.compaction,
    );
    return { ok: outcome.refused !== true, compacted: outcome.compacted, reason: outcome.reason, result: outcome.result };
  }
}
