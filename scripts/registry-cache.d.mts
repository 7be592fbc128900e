// Types of registry-cache.mjs for the tests that import it (test/openclaw/helpers/openclaw-install.ts).
export function cacheDir(): string;
export function installOnce(opts: { dir: string; spec: string; valid: () => boolean; PATH?: string }): Promise<void>;
