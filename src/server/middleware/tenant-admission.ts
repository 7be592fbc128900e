import { status, type Metadata } from "@grpc/grpc-js";
import type { TenantLimits } from "../../contract/tenant-limits.js";
import type { CallStep, Step } from "./step.js";

const WATCH_ENGINES = "/contextd.v1.RegistryService/WatchEngines";

export interface TenantAdmissionDeps {
  limits: TenantLimits;
  /** The tenant of the call's token (Authenticator.tenantOf); undefined: not limited here. */
  tenantOf(metadata: Metadata): string | undefined;
}

/**
 * Per-token admission (src/contract/tenant-limits.ts): a SessionService call over its token's
 * `limits.tenant.max_calls_in_flight`, or a WatchEngines stream over `max_watch_streams`, is
 * refused RESOURCE_EXHAUSTED when its metadata arrives — before its handler runs or its sessions
 * are read, so a tenant hammering at its limit costs the others little. After load shedding: a call
 * the server as a whole refuses is never counted against its tenant.
 */
export function tenantAdmission(deps: TenantAdmissionDeps): Step {
  const untouched: CallStep = {};
  return (m) => {
    const watch = m.path === WATCH_ENGINES;
    if (!watch && m.service !== "contextd.v1.SessionService") return untouched;
    let release: (() => void) | undefined;
    return {
      metadata(md) {
        const tenant = deps.tenantOf(md);
        if (tenant === undefined) return;
        const entered = deps.limits.enter(tenant, watch);
        if ("refusal" in entered) return { code: status.RESOURCE_EXHAUSTED, details: entered.refusal };
        release = entered.release;
      },
      end() {
        release?.();
      },
    };
  };
}
