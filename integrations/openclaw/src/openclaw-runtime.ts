/**
 * What the plugin borrows from the OpenClaw that loaded it: reading a session's transcript and
 * resolving SecretRefs. `openclaw/plugin-sdk/*` is resolved by OpenClaw's plugin loader, so it is
 * required lazily, when first needed, and a missing export degrades instead of failing the load.
 */
import type { AgentMessage, SessionTarget } from "./openclaw-api.js";

type TranscriptRuntime = typeof import("openclaw/plugin-sdk/session-transcript-runtime");
type SecretRuntime = typeof import("openclaw/plugin-sdk/secret-input-runtime");

function load<T>(specifier: string): T | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS module of OpenClaw, resolved at run time
    return require(specifier) as T;
  } catch {
    return undefined;
  }
}

/** OpenClaw's session key names its agent: `agent:<agentId>:<rest>`. */
export function agentOf(sessionKey: string | undefined): string | undefined {
  const m = /^agent:([^:]+):/.exec(sessionKey ?? "");
  return m ? m[1] : undefined;
}

/** The session's transcript file lines (header first), or undefined when OpenClaw offers no reader. */
export async function readTranscript(sessionId: string, sessionKey: string | undefined, target: SessionTarget | undefined): Promise<unknown[] | undefined> {
  const runtime = load<TranscriptRuntime>("openclaw/plugin-sdk/session-transcript-runtime");
  if (!runtime?.readSessionTranscriptEvents) return undefined;
  const agentId = target?.agentId ?? agentOf(sessionKey);
  // The store path OpenClaw gives bootstrap points at the session index; the reader finds the transcript from the ids.
  return runtime.readSessionTranscriptEvents({ agentId, sessionKey: target?.sessionKey ?? sessionKey, sessionId: target?.sessionId ?? sessionId });
}

/** A message of OpenClaw's transcript as it stores it (tool call ids, `details` and all), with its entry id. */
export interface StoredMessage {
  entryId: string;
  message: AgentMessage;
}

/**
 * The messages of the session's active branch, oldest first, as OpenClaw stores them — never the
 * copy it sends the model, which rewrites tool call ids and drops tool results' `details` — with
 * their entry ids; undefined when this OpenClaw offers no reader. During a turn's first assemble
 * (and bootstrap) OpenClaw fences the read before the turn's own user message.
 */
export async function readStoredMessages(sessionId: string, sessionKey: string | undefined, target?: SessionTarget): Promise<StoredMessage[] | undefined> {
  const runtime = load<TranscriptRuntime>("openclaw/plugin-sdk/session-transcript-runtime");
  if (!runtime?.readVisibleSessionTranscriptMessageEntries) return undefined;
  const entries = await runtime.readVisibleSessionTranscriptMessageEntries({
    agentId: target?.agentId ?? agentOf(sessionKey ?? target?.sessionKey),
    sessionKey: target?.sessionKey ?? sessionKey,
    sessionId: target?.sessionId ?? sessionId,
  });
  return entries.map((e) => ({ entryId: e.entryId, message: e.message as AgentMessage }));
}

/** A SecretInput (a plain string, "${VAR}" already substituted, or a SecretRef) as its value. */
export async function resolveSecret(value: unknown, config: unknown, path: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return value;
  const runtime = load<SecretRuntime>("openclaw/plugin-sdk/secret-input-runtime");
  if (runtime?.resolveConfiguredSecretInputString) {
    const resolved = await runtime.resolveConfiguredSecretInputString({ config, env, value, path });
    if (!resolved.value) throw new Error(`contextd plugin config: ${path} is not resolved (${resolved.unresolvedRefReason ?? "no value"})`);
    return resolved.value;
  }
  const ref = value as { source?: unknown; id?: unknown };
  if (ref.source === "env" && typeof ref.id === "string" && env[ref.id]) return env[ref.id];
  throw new Error(`contextd plugin config: ${path} is a SecretRef this OpenClaw cannot resolve`);
}
