import { status } from "@grpc/grpc-js";
import { ErrorReason } from "../contract/gen/contextd/v1/errors.js";
import { ModelError } from "./model-errors.js";

/** What one agent may spend on the summarizer model in any hour; 0 is no limit. */
export interface SpendLimit {
  callsPerHour: number;
  tokensPerHour: number;
}

export interface SpendLimits {
  /** Every agent's limit unless `agents` names it. */
  default: SpendLimit;
  agents: ReadonlyMap<string, SpendLimit>;
}

/** What a model request was for: a compaction's model summary, or an engine's HostService.Complete. */
export type ModelPurpose = "summary" | "complete";

/** Hears of every model request's spend and of every refusal (metrics). */
export interface SpendObserver {
  spent(purpose: ModelPurpose, requests: number, tokens: number): void;
  limited(purpose: ModelPurpose): void;
}

const WHAT: Record<ModelPurpose, string> = { summary: "model summary", complete: "Complete" };

const HOUR_MS = 3_600_000;
/** The hour is kept as 12 buckets of 5 minutes: a call leaves the window at most 5 minutes late. */
const BUCKETS = 12;
const BUCKET_MS = HOUR_MS / BUCKETS;

interface Usage {
  /** Per bucket: its start (ms, a multiple of BUCKET_MS), calls and tokens. */
  starts: Float64Array;
  calls: Float64Array;
  tokens: Float64Array;
}

/**
 * The agent has used its hour of the model: a model summary falls back to extractive, and
 * HostService.Complete answers RESOURCE_EXHAUSTED. No request was made (attempts 0).
 */
export class ModelSpendLimitedError extends ModelError {
  static override readonly reason = ErrorReason.MODEL_SPEND_LIMITED;
  readonly failure = "spend_limited";
  constructor(message: string, limit: { key: string; value: number; used: number }) {
    super(status.RESOURCE_EXHAUSTED, message, 0, undefined, { limit: limit.key, limit_value: limit.value, used: limit.used });
  }
}

/**
 * Per-agent spend on the summarizer model over the last hour (`compaction.summarizer.limits`), for
 * the `openai` summarizer and HostService.Complete alike: one model, one bill. A call is allowed
 * while the agent is under both limits — the call that crosses one is not cut short, the next is
 * refused. In memory and per process (replicas each allow the limit). At most `maxAgents` agents
 * are tracked; the least recently active is forgotten first (its spend starts again at 0), so the
 * map is bounded whatever agent ids runtimes send.
 */
export class ModelSpend {
  private readonly usage = new Map<string, Usage>();
  private observer: SpendObserver | undefined;

  constructor(
    private readonly limits: SpendLimits,
    private readonly now: () => number = Date.now,
    private readonly maxAgents = 10_000,
  ) {}

  /** Tells `observer` of every request's spend and every refusal from now on. */
  observe(observer: SpendObserver): void {
    this.observer = observer;
  }

  limitOf(agentId: string): SpendLimit {
    return this.limits.agents.get(agentId) ?? this.limits.default;
  }

  /** Calls and tokens `agentId` spent in the last hour. */
  used(agentId: string): { calls: number; tokens: number } {
    const u = this.usage.get(agentId);
    if (!u) return { calls: 0, tokens: 0 };
    const since = this.now() - HOUR_MS;
    let calls = 0;
    let tokens = 0;
    for (let i = 0; i < BUCKETS; i++) {
      if (u.starts[i] + BUCKET_MS <= since) continue;
      calls += u.calls[i];
      tokens += u.tokens[i];
    }
    return { calls, tokens };
  }

  /** Throws ModelSpendLimitedError when `agentId` may not call the model now (for `purpose`). */
  check(agentId: string, purpose: ModelPurpose): void {
    const limit = this.limitOf(agentId);
    if (!isLimited(limit)) return;
    const used = this.used(agentId);
    const over =
      limit.callsPerHour > 0 && used.calls >= limit.callsPerHour
        ? { key: "calls_per_hour", value: limit.callsPerHour, used: used.calls, unit: "model calls" }
        : limit.tokensPerHour > 0 && used.tokens >= limit.tokensPerHour
          ? { key: "tokens_per_hour", value: limit.tokensPerHour, used: used.tokens, unit: "model tokens" }
          : undefined;
    if (!over) return;
    this.observer?.limited(purpose);
    const key = `compaction.summarizer.limits.${over.key}`;
    throw new ModelSpendLimitedError(
      `${WHAT[purpose]}: agent ${JSON.stringify(agentId)} used ${over.used} ${over.unit} in the last hour, its ${key} is ${over.value}`,
      {
        key,
        value: over.value,
        used: over.used,
      },
    );
  }

  /** Counts a model call's requests and tokens (input + output) against `agentId`. */
  record(agentId: string, purpose: ModelPurpose, calls: number, tokens: number): void {
    this.observer?.spent(purpose, calls, tokens);
    if (!isLimited(this.limitOf(agentId))) return;
    const now = this.now();
    const start = now - (now % BUCKET_MS);
    let u = this.usage.get(agentId);
    if (u) this.usage.delete(agentId);
    else u = { starts: new Float64Array(BUCKETS).fill(-Infinity), calls: new Float64Array(BUCKETS), tokens: new Float64Array(BUCKETS) };
    // Re-inserted: Map order is the least recently active first.
    this.usage.set(agentId, u);
    const i = Math.floor(start / BUCKET_MS) % BUCKETS;
    if (u.starts[i] !== start) {
      u.starts[i] = start;
      u.calls[i] = 0;
      u.tokens[i] = 0;
    }
    u.calls[i] += calls;
    u.tokens[i] += tokens;
    for (const oldest of this.usage.keys()) {
      if (this.usage.size <= this.maxAgents) break;
      this.usage.delete(oldest);
    }
  }
}

function isLimited(l: SpendLimit): boolean {
  return l.callsPerHour > 0 || l.tokensPerHour > 0;
}
