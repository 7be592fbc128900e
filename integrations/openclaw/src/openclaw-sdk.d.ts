// OpenClaw resolves `openclaw/plugin-sdk/*` for the plugins it loads. These declare the functions
// the plugin uses (openclaw 2026.9.x); the plugin loads them lazily and copes without them.
declare module "openclaw/plugin-sdk/secret-input-runtime" {
  export function resolveConfiguredSecretInputString(params: {
    config: unknown;
    env: NodeJS.ProcessEnv;
    value: unknown;
    path: string;
  }): Promise<{ value?: string; unresolvedRefReason?: string }>;
}
declare module "openclaw/plugin-sdk/session-transcript-runtime" {
  /** The session's transcript as raw rows: its header, then every entry (the JSONL lines). */
  export function readSessionTranscriptEvents(scope: { agentId?: string; sessionKey?: string; sessionId: string; storePath?: string }): Promise<unknown[]>;
  /**
   * The message entries of the session's active branch, oldest first, as stored: the list index is
   * a message's `activeMessagePosition`. Fenced before the current turn's user entry while a turn
   * starts (bootstrap, the turn's first assemble).
   */
  export function readVisibleSessionTranscriptMessageEntries(scope: {
    agentId?: string;
    sessionKey?: string;
    sessionId: string;
    storePath?: string;
  }): Promise<{ entryId: string; parentId: string | null; seq: number; message: unknown; role: string }[]>;
}
