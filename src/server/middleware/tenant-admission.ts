import type { Metadata } from "@grpc/grpc-js";
import type { TenantLimits } from "../../contract/tenant-limits.js";
import { refusalOf, type CallStep, type ServedRpc, type Step } from "./step.js";

export interface TenantAdmissionDeps {
  limits: TenantLimits;
  /** The tenant of the call's token (Authenticator.tenantOf); undefined: not limited here. */
  tenantOf(metadata: Metadata): string | undefined;
  /** The served RPCs by method path (src/server/served-services.ts): their rows say which are counted, and how. */
  rpcs: ReadonlyMap<string, ServedRpc>;
}

/**
 * Per-token admission (src/contract/tenant-limits.ts): a call of a `runtime` row (SessionService)
 * over its token's `limits.tenant.max_calls_in_flight`, or a call of deadline class `stream`
 * (WatchEngines) over `max_watch_streams`, is refused RESOURCE_EXHAUSTED when its metadata arrives
 * — before its handler runs or its sessions are read, so a tenant hammering at its limit costs the
 * others little. After load shedding: a call the server as a whole refuses is never counted
 * against its tenant.
 */
export function tenantAdmission(deps: TenantAdmissionDeps): Step {
  const untouched: CallStep = {};
  return (m) => {
    const row = deps.rpcs.get(m.path);
    const watch = row?.deadline === "stream";
    if (!watch && row?.auth !== "runtime") return untouched;
    let release: (() => void) | undefined;
    return {
      metadata(md) {
        const tenant = deps.tenantOf(md);
        if (tenant === undefined) return;
        const entered = deps.limits.enter(tenant, watch);
        if ("refusal" in entered) return refusalOf(entered.refusal);
        release = entered.release;
      },
      end() {
        release?.();
      },
    };
  };
}
