// OpenClaw resolves `openclaw/plugin-sdk/*` for the plugins it loads; this declares the one
// function the plugin uses (openclaw 2026.9.x, exported by `openclaw/plugin-sdk/core`).
declare module "openclaw/plugin-sdk/core" {
  export function delegateCompactionToRuntime(params: import("./openclaw-api.js").CompactParams): Promise<import("./openclaw-api.js").CompactResult>;
}
