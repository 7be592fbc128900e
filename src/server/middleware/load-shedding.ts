import type { Logger } from "pino";
import { ThrottledError } from "../../contract/errors.js";
import { refusalOf, type CallStep, type MethodInfo, type ServedRpc, type Step } from "./step.js";

/**
 * Server-level admission (load shedding): at most `limit` calls are worked on at a time, across
 * every connection. A call over the limit is answered RESOURCE_EXHAUSTED at once, before its
 * handler runs — it was never processed, so the runtime may retry it
 * with backoff (or another replica). Without the limit a burst is accepted whole: every call holds
 * its request, its view and its store work until it finishes, memory grows with the burst, and the
 * event loop serves all of them late instead of most of them on time.
 *
 * Counted: the RPCs whose row's deadline class is `call` (contract/rpc-table.ts). Not counted, so
 * that the server stays observable and finishes what it admitted:
 * - the standard services, grpc.health.v1 and reflection, which have no row: balancers and probes
 *   must keep hearing SERVING under load (an overloaded replica still serves; shed calls are cheap);
 * - `engine-call` (HostService): engine callbacks (ReadTranscript, DelegateCompaction, Complete)
 *   belong to a call already admitted; refusing them would turn admitted calls into fallbacks, and
 *   with every slot held by a call waiting for its callback the server would refuse all of them;
 * - `stream` (WatchEngines): a stream held open for as long as the watcher likes is not work in
 *   flight; it would keep a slot forever (per connection, `server.max_concurrent_streams` bounds streams).
 */
export function isExempt(m: Pick<MethodInfo, "path">, rpcs: ReadonlyMap<string, Pick<ServedRpc, "deadline">>): boolean {
  return rpcs.get(m.path)?.deadline !== "call";
}

/** The config key named in refusals and logs. */
export const LIMIT_KEY = "server.max_concurrent_calls";
/** Under a storm this fires thousands of times a second: one warning a second at most, with the count. */
const SHED_LOG_INTERVAL_MS = 1_000;

/** Calls in flight against the limit. */
export class InFlightLimit {
  private n = 0;

  constructor(readonly limit: number) {}

  get active(): number {
    return this.n;
  }

  /** True (and counted) when the call may proceed; each true must be matched by one release(). */
  tryAcquire(): boolean {
    if (this.n >= this.limit) return false;
    this.n++;
    return true;
  }

  release(): void {
    if (this.n > 0) this.n--;
  }
}

export interface LoadSheddingDeps {
  limit: InFlightLimit;
  /** The served RPCs by method path (src/server/served-services.ts): their deadline class says which are counted. */
  rpcs: ReadonlyMap<string, Pick<ServedRpc, "deadline">>;
  logger: Logger;
  /** Counts a refused call (contextd_rpc_shed_total). */
  shed?: (m: MethodInfo) => void;
  now?: () => number;
}

export function loadShedding(deps: LoadSheddingDeps): Step {
  const { limit, logger } = deps;
  const now = deps.now ?? Date.now;
  const exempt: CallStep = {};
  const refusal = refusalOf(
    new ThrottledError(`contextd is at its limit of ${limit.limit} concurrent calls (${LIMIT_KEY}); the call was not processed, retry it with backoff`, {
      key: LIMIT_KEY,
      value: limit.limit,
    }),
  );
  let shedSinceLog = 0;
  let loggedAt = 0;
  return (m) => {
    if (isExempt(m, deps.rpcs)) return exempt;
    let held = false;
    return {
      metadata() {
        if (limit.tryAcquire()) {
          held = true;
          return undefined;
        }
        deps.shed?.(m);
        shedSinceLog++;
        const t = now();
        if (t - loggedAt >= SHED_LOG_INTERVAL_MS) {
          logger.warn(
            { limit: limit.limit, key: LIMIT_KEY, shed: shedSinceLog, service: m.service, method: m.name },
            "server at its concurrency limit: calls shed",
          );
          shedSinceLog = 0;
          loggedAt = t;
        }
        return refusal;
      },
      end() {
        if (!held) return;
        held = false;
        limit.release();
      },
    };
  };
}
