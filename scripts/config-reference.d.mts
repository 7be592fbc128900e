// Types of config-reference.mjs for the test that imports it (test/unit/server/config-schema.reference.test.ts).
import type { z } from "zod";

export interface SchemaModules {
  configSchema: z.ZodType;
  OPENAI_DEFAULTS: {
    timeout: number;
    max_retries: number;
    retry_base_delay: number;
    context_window_tokens: number;
    max_output_tokens: number;
    max_tokens_param: string;
  };
  formatDuration: (ms: number) => string;
}
export const DESCRIPTIONS: Record<string, string>;
export const START: string;
export const END: string;
export function renderConfigReference(m: SchemaModules): string;
export function replaceReference(markdown: string, m: SchemaModules): string;
