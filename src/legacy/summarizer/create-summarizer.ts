import { FailedPreconditionError } from "../../contract/errors.js";
import { createExtractiveSummarizer } from "./extractive.js";
import type { Summarizer } from "./summarizer.js";

export type SummarizerConfig = { kind: "extractive" } | { kind: "openai"; base_url: string; model: string; api_key_env: string };

/** The configured summarizer. `openai` arrives in a later release; until then contextd refuses to start with it. */
export function createSummarizer(config: SummarizerConfig): Summarizer {
  if (config.kind === "extractive") return createExtractiveSummarizer();
  throw new FailedPreconditionError("compaction.summarizer.kind: openai is not built yet; use extractive");
}
