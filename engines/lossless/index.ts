/**
 * The lossless engine as a library, for embedding it in your own sidecar (main.ts is the ready-made
 * one):
 *
 *   const store = LosslessStore.open("./data/lossless.db");
 *   await serveEngine(new LosslessEngine(store, { freshTailTokens: 12_000 }), { onShutdown: () => store.close() });
 */
export { LosslessEngine, LOSSLESS_ENGINE_ID, LOSSLESS_VERSION } from "./engine.js";
export { LosslessStore, type SessionStats } from "./store.js";
export { DEFAULT_LOSSLESS_OPTIONS, LOSSLESS_ENV, losslessOptionsFromEnv, promptBudget, resolveLosslessOptions, type LosslessOptions } from "./config.js";
export { planContext, type ContextPlan } from "./assembler.js";
export { summaryHeader, SUMMARY_ID_KEY, SUMMARY_DEPTH_KEY, SUMMARY_FIRST_KEY, SUMMARY_LAST_KEY } from "./render.js";
export type { MessageMeta, SummaryRecord } from "./types.js";
