// Types of node24.mjs for the tests that import it (test/openclaw/helpers/openclaw-install.ts).
export const NODE24_VERSION: string;
export function ensureNode24(): Promise<{ dir: string; node: string }>;
