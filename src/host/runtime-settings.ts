import { Mode, type PromptCache, type RuntimeSettings } from "../contract/gen/contextd/v1/types.js";
import type { Selection } from "../registry/router.js";

/**
 * The RuntimeSettings (schema_version 1) handed to engines with every call; `promptCache` is the
 * runtime's telemetry as the call carried it (Assemble, AfterTurn).
 */
export function runtimeSettings(selection: Selection, tokenBudget: number, model = "", promptCache?: PromptCache): RuntimeSettings {
  return {
    schemaVersion: 1,
    runtime: { host: "contextd", mode: selection.mode || Mode.MODE_NORMAL, harnessId: "", runtimeId: "" },
    engineSelection: { selectedId: selection.selectedId, source: selection.source },
    model: { requested: model, resolved: model, provider: "", family: "" },
    limits: { promptTokenBudget: tokenBudget, maxOutputTokens: 0 },
    diagnostics: { fallbackReason: selection.fallbackReason, degradedReason: "" },
    ...(promptCache ? { promptCache } : {}),
  };
}
