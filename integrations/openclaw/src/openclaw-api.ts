/**
 * The parts of OpenClaw's plugin and context-engine API (openclaw 2026.9.x,
 * `src/context-engine/types.ts` and `src/plugins/plugin-api.types.ts`) this plugin uses, restated
 * structurally: the plugin is compiled without the openclaw package, and OpenClaw checks these
 * shapes at run time (non-empty `info.id`/`info.name`; `ingest`, `assemble`, `compact` functions).
 */
import type { AgentMessage } from "contextd/openclaw";

export type { AgentMessage };

export interface PluginLogger {
  debug?: (message: string) => void;
  info: (message: string) => void;
  warn: (message: string) => void;
  error: (message: string) => void;
}

export interface PluginApi {
  id: string;
  rootDir?: string;
  registrationMode: string;
  /** The whole OpenClaw config (for resolving SecretRefs). */
  config: unknown;
  pluginConfig?: Record<string, unknown>;
  logger: PluginLogger;
  registerContextEngine(
    id: string,
    factory: (ctx: { config?: unknown; agentDir?: string; workspaceDir?: string }) => ContextEngine | Promise<ContextEngine>,
  ): void;
  /** A background service (started by the Gateway only); absent in older OpenClaw builds. */
  registerService?(service: PluginService): void;
}

/** OpenClaw's `OpenClawPluginService`: what `openclaw health` reports a failure of. */
export interface PluginService {
  id: string;
  start(ctx: { logger?: PluginLogger; serviceHealth?: { reportFailure(error: unknown): void; clearFailure(): void } }): void | Promise<void>;
  stop?(ctx: unknown): void | Promise<void>;
}

/** Where a committed turn sits in OpenClaw's transcript (`TranscriptEntryAnchor`). */
export interface TranscriptAnchor {
  entryId?: string;
  /** The message's index among the active branch's visible messages. */
  activeMessagePosition?: number;
}

export interface SessionTarget {
  agentId?: string;
  sessionId?: string;
  sessionKey?: string;
  storePath?: string;
}

export interface RuntimeSettings {
  /** Before each model request of a tool loop: `promptTokenBudget` is the whole window, `maxOutputTokens` null. */
  limits?: { promptTokenBudget?: number | null; maxOutputTokens?: number | null };
  model?: { requested?: string | null; resolved?: string | null };
}

export interface CompactResult {
  ok: boolean;
  compacted: boolean;
  reason?: string;
  result?: { summary?: string; firstKeptEntryId?: string; tokensBefore: number; tokensAfter?: number; details?: unknown };
}

export interface CompactParams {
  sessionId: string;
  sessionKey: string;
  agentId?: string;
  sessionTarget?: SessionTarget;
  tokenBudget?: number;
  force?: boolean;
  currentTokenCount?: number;
  compactionTarget?: "budget" | "threshold";
  customInstructions?: string;
  runtimeSettings?: RuntimeSettings;
  runtimeContext?: Record<string, unknown>;
  abortSignal?: AbortSignal;
}

export interface SessionParams {
  sessionId: string;
  sessionKey?: string;
  sessionTarget?: SessionTarget;
  sessionFile?: string;
  runtimeSettings?: RuntimeSettings;
  runtimeContext?: Record<string, unknown>;
  abortSignal?: AbortSignal;
}

export interface MaintenanceResult {
  changed: boolean;
  bytesFreed: number;
  rewrittenEntries: number;
  reason?: string;
}

export interface ContextEngine {
  readonly info: {
    id: string;
    name: string;
    version?: string;
    ownsCompaction?: boolean;
    turnMaintenanceMode?: "foreground" | "background";
    transcriptSemantics?: { currentTurnFence?: "before-current-turn-entry-v1"; turnAdvancementIdempotency?: "atomic-idempotent-v1" };
  };
  bootstrap(params: SessionParams): Promise<{ bootstrapped: boolean; importedMessages?: number; reason?: string }>;
  maintain(params: SessionParams): Promise<MaintenanceResult>;
  ingest(params: { sessionId: string; sessionKey?: string; message: AgentMessage; isHeartbeat?: boolean }): Promise<{ ingested: boolean }>;
  ingestBatch(params: { sessionId: string; sessionKey?: string; messages: AgentMessage[]; isHeartbeat?: boolean }): Promise<{ ingestedCount: number }>;
  afterTurn(
    params: SessionParams & {
      messages: AgentMessage[];
      prePromptMessageCount: number;
      autoCompactionSummary?: string;
      isHeartbeat?: boolean;
      tokenBudget?: number;
    },
  ): Promise<void>;
  commitTurn(params: {
    advancementKey: string;
    /** The turn's first message (its user message) and last one, in OpenClaw's transcript. */
    admission?: TranscriptAnchor;
    terminal?: TranscriptAnchor;
    messages: AgentMessage[];
    sessionId: string;
    sessionKey?: string;
    sessionTarget?: SessionTarget;
    runtimeContext?: Record<string, unknown>;
    isHeartbeat?: boolean;
  }): Promise<{ status: "committed" | "duplicate" }>;
  assemble(params: {
    sessionId: string;
    sessionKey?: string;
    messages: AgentMessage[];
    tokenBudget?: number;
    availableTools?: Set<string>;
    model?: string;
    prompt?: string;
    runtimeSettings?: RuntimeSettings;
    runtimeContext?: Record<string, unknown>;
  }): Promise<{ messages: AgentMessage[]; estimatedTokens: number; systemPromptAddition?: string; promptAuthority?: "assembled" | "preassembly_may_overflow" }>;
  compact(params: CompactParams): Promise<CompactResult>;
  prepareSubagentSpawn(params: {
    parentSessionKey: string;
    childSessionKey: string;
    contextMode?: "isolated" | "fork";
    parentSessionId?: string;
    childSessionId?: string;
    ttlMs?: number;
  }): Promise<{ rollback: () => Promise<void> } | undefined>;
  onSubagentEnded(params: { childSessionKey: string; reason: "deleted" | "completed" | "swept" | "released" }): Promise<void>;
  dispose(): Promise<void>;
}
