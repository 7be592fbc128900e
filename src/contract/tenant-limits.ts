import { CancelledError, ThrottledError } from "./errors.js";
import { quote } from "./quote.js";

/**
 * Per-tenant limits (`limits.tenant`): one runtime token, or one agent, must not take the service
 * from the others. The server-wide `server.max_concurrent_calls` sheds load when contextd as a whole
 * is full; these keep any one tenant from filling it:
 * - calls in flight per runtime token and per agent: a tenant with many calls open holds the event
 *   loop, the store and the counting threads that every other tenant's calls need;
 * - append bytes per second per runtime token (AppendMessages, ImportTranscript): appends are what
 *   costs contextd CPU per byte (decoding, counting, durable writes);
 * - WatchEngines streams per caller: each stream holds events in memory for its watcher;
 * - calls per runtime token doing work at once (`turn`): the rest of its calls in flight wait.
 * A call over a limit is refused RESOURCE_EXHAUSTED naming the limit, before any work is done for
 * it: it was not processed, and may be retried with backoff.
 *
 * Tenants are the credentials auth proves (`runtime <name>`, `owner <name>`, ...): with
 * `auth.required: false` (local development, one trusted caller) there are none, and only the
 * per-agent limit applies.
 */
export interface TenantLimitSettings {
  /** Calls in flight per runtime token. */
  maxCallsInFlight: number;
  /** Calls in flight per agent id (across tokens). */
  maxCallsInFlightPerAgent: number;
  /** Bytes appended per second per runtime token, with a burst of one second's worth. */
  appendBytesPerSecond: number;
  /** WatchEngines streams open per caller. */
  maxWatchStreams: number;
  /** Calls per runtime token doing work at once; its other calls in flight wait their turn, in order. */
  maxCallsRunning: number;
}

/**
 * The defaults. A token's calls in flight beyond its running ones are a queue: 16 keeps one of
 * ~100 ms at the bench's call costs. Deeper, it adds only latency to that tenant's own calls, while
 * every call it holds — waiting for a turn, or its answer still being sent — is work contextd has
 * accepted from it; at 64, a tenant at its limit held another's Assemble p99 at 2.0–2.3× its p99
 * alone, at 32 at 1.4–2.0×, at 16 at 1.4–1.6× (docs/performance.md#noisy_neighbor).
 */
export const DEFAULT_TENANT_LIMITS: TenantLimitSettings = {
  maxCallsInFlight: 16,
  maxCallsInFlightPerAgent: 32,
  appendBytesPerSecond: 8 * 1024 * 1024,
  maxWatchStreams: 16,
  maxCallsRunning: 2,
};

/** The config keys named in refusals. */
const KEYS = {
  calls: "limits.tenant.max_calls_in_flight",
  agentCalls: "limits.tenant.max_calls_in_flight_per_agent",
  bytes: "limits.tenant.append_bytes_per_second",
  watches: "limits.tenant.max_watch_streams",
};

/** What a call does, once its request is decoded and its sessions resolved. */
export interface TenantWork {
  /** The runtime token's tenant name (`runtime <name>`); undefined without auth. */
  tenant?: string;
  /** The agents whose sessions it acts on ("" not counted). */
  agents: readonly string[];
  /** Bytes it appends (0 for calls that append nothing). */
  appendBytes: number;
}

/** A call's turn at doing work (TenantLimits.turn). */
export interface Turn {
  /** Ends the turn; the tenant's next waiting call starts. */
  leave(): void;
  /** Gives the turn up while `work` waits on something outside contextd, and takes it back after. */
  away<T>(work: () => Promise<T>): Promise<T>;
}

/** The turn of a call that is not limited: it has it at once, and giving it up changes nothing. */
export const NO_TURN: Turn = { leave: () => {}, away: (work) => work() };

/** One tenant's calls running, and those waiting for a turn. */
interface Turns {
  running: number;
  waiting: (() => void)[];
}

/** A token bucket in bytes, one second deep, that may go into debt for one large append. */
interface Bucket {
  level: number;
  atMs: number;
}

/**
 * The counters. The per-token limits are applied by a server middleware step when the call's
 * metadata arrives — before its handler runs, so a refusal costs little however much work the call
 * would have been (src/server/middleware/tenant-admission.ts); the per-agent and byte limits by
 * SessionService once it knows the call's sessions and size (src/host/session-service.ts).
 */
export class TenantLimits {
  private readonly calls = new Map<string, number>();
  private readonly agentCalls = new Map<string, number>();
  private readonly watches = new Map<string, number>();
  private readonly buckets = new Map<string, Bucket>();
  private readonly turns = new Map<string, Turns>();

  constructor(
    readonly settings: TenantLimitSettings,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Counts a call of `tenant` in flight (a WatchEngines stream when `watch`), or answers why it is
   * refused. Each admission must be matched by one call of the function it returns.
   */
  enter(tenant: string, watch: boolean): { release: () => void } | { refusal: ThrottledError } {
    const map = watch ? this.watches : this.calls;
    const limit = watch ? this.settings.maxWatchStreams : this.settings.maxCallsInFlight;
    if ((map.get(tenant) ?? 0) >= limit) {
      return {
        refusal: watch
          ? new ThrottledError(`${tenant} has ${limit} WatchEngines streams open, its limit (${KEYS.watches})`, { key: KEYS.watches, value: limit })
          : new ThrottledError(`${tenant} has ${limit} calls in flight, its limit (${KEYS.calls}); the call was not processed, retry it with backoff`, {
              key: KEYS.calls,
              value: limit,
            }),
      };
    }
    increment(map, tenant);
    return { release: once(() => decrement(map, tenant)) };
  }

  /**
   * Waits until the tenant has fewer than `maxCallsRunning` calls doing work, and counts this one.
   * Every call's work shares one event loop: calls running at once take turns on it step by step, so
   * a tenant with 60 calls running would get 60 steps for every one of another tenant's. Running at
   * most a few per tenant, each tenant's call waits behind a few steps of each other tenant's, however
   * many calls they have in flight. A call gives its turn up while it waits on an engine
   * (`Turn.away`): that wait costs contextd nothing, and a slow engine must not hold its tenant to a
   * few calls at a time; it takes one back at once when the engine answers (see `resume`). Rejects with CancelledError if `signal` aborts first (the caller has gone:
   * its call is dropped without doing any work).
   */
  async turn(tenant: string | undefined, signal: AbortSignal): Promise<Turn> {
    if (tenant === undefined) return NO_TURN;
    await this.acquire(tenant, signal);
    let held = true;
    return {
      leave: () => {
        if (held) this.release(tenant);
        held = false;
      },
      away: async (work) => {
        if (!held) return work();
        this.release(tenant);
        held = false;
        try {
          return await work();
        } finally {
          this.resume(tenant);
          held = true;
        }
      },
    };
  }

  private async acquire(tenant: string, signal: AbortSignal): Promise<void> {
    let turns = this.turns.get(tenant);
    if (!turns) this.turns.set(tenant, (turns = { running: 0, waiting: [] }));
    if (turns.running < this.settings.maxCallsRunning) {
      turns.running++;
      return;
    }
    const mine = turns;
    await new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(new CancelledError("the call ended before its turn"));
      const go = () => {
        signal.removeEventListener("abort", gone);
        resolve();
      };
      const gone = () => {
        mine.waiting.splice(mine.waiting.indexOf(go), 1);
        reject(new CancelledError("the call ended before its turn"));
      };
      signal.addEventListener("abort", gone, { once: true });
      mine.waiting.push(go);
    });
  }

  /**
   * A call back from an engine takes a turn at once, over the limit if need be. Made to wait, it
   * could wait forever: the tenant's running calls may be waiting for it (a Bootstrap shared by
   * concurrent first calls, an engine's lock), and started calls are what hold such things.
   */
  private resume(tenant: string): void {
    let turns = this.turns.get(tenant);
    if (!turns) this.turns.set(tenant, (turns = { running: 0, waiting: [] }));
    turns.running++;
  }

  private release(tenant: string): void {
    const turns = this.turns.get(tenant);
    if (!turns) return;
    turns.running--;
    // Turns pass to the tenant's waiting calls in order, while it is under its limit.
    while (turns.running < this.settings.maxCallsRunning && turns.waiting.length > 0) {
      turns.running++;
      turns.waiting.shift()!();
    }
    if (turns.running === 0) this.turns.delete(tenant);
  }

  /**
   * Admits a call's work against its agents' calls in flight and its token's append rate, or
   * throws ThrottledError naming the limit (nothing is counted then). Each admission must
   * be matched by one call of the function it returns, when the call ends.
   */
  admit(work: TenantWork): () => void {
    const agents = [...new Set(work.agents.filter((a) => a !== ""))];
    const max = this.settings.maxCallsInFlightPerAgent;
    const busy = agents.find((a) => (this.agentCalls.get(a) ?? 0) >= max);
    if (busy !== undefined) {
      throw new ThrottledError(
        `agent ${quote(busy)} has ${max} calls in flight, its limit (${KEYS.agentCalls}); the call was not processed, retry it with backoff`,
        { key: KEYS.agentCalls, value: max },
      );
    }
    if (work.tenant !== undefined && work.appendBytes > 0) this.take(work.tenant, work.appendBytes);
    for (const a of agents) increment(this.agentCalls, a);
    return once(() => {
      for (const a of agents) decrement(this.agentCalls, a);
    });
  }

  /**
   * Takes `bytes` from the tenant's bucket. An append larger than the bucket (one second's worth)
   * is admitted when the bucket is full and leaves it in debt, so that any append within the
   * message and import limits can pass, at the configured rate on average.
   */
  private take(tenant: string, bytes: number): void {
    const rate = this.settings.appendBytesPerSecond;
    const now = this.now();
    const bucket = this.buckets.get(tenant) ?? { level: rate, atMs: now };
    const level = Math.min(rate, bucket.level + ((now - bucket.atMs) * rate) / 1000);
    if (bytes > level && level < rate) {
      const waitMs = Math.ceil(((Math.min(bytes, rate) - level) * 1000) / rate);
      throw new ThrottledError(
        `${tenant} is over its ${rate} bytes per second of appends (${KEYS.bytes}); the call was not processed, retry it in ${waitMs} ms or later`,
        { key: KEYS.bytes, value: rate },
        { retryDelayMs: waitMs },
      );
    }
    this.buckets.set(tenant, { level: level - bytes, atMs: now });
  }
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (!done) fn();
    done = true;
  };
}

function increment(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

function decrement(map: Map<string, number>, key: string): void {
  const n = (map.get(key) ?? 0) - 1;
  if (n > 0) map.set(key, n);
  else map.delete(key);
}
