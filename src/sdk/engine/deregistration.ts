import { status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { DeregisterEngineRequest, GetEngineRequest } from "../../contract/gen/contextd/v1/registry.js";
import { codeOf, detailsOf } from "./registration-error.js";
import type { RegistryConnection } from "./registry-connection.js";

/**
 * Removes this engine's registration as it stops, unless the registry now holds another instance
 * at the id. Failures are logged, not thrown: the engine is shutting down either way.
 */
export async function deregisterEngine(registry: RegistryConnection, engineId: string, endpoint: string, log: Logger): Promise<void> {
  // A newer instance of this engine may have replaced us (allow_same_owner_refresh): then the
  // registration is not ours to remove.
  try {
    const res = await registry.call(registry.client.getEngine, GetEngineRequest.fromPartial({ engineId }), 1_000, true);
    if (res.engine && res.engine.endpoint !== endpoint) {
      log.info({ registeredEndpoint: res.engine.endpoint }, "not deregistering: the registration now points at another instance");
      return;
    }
  } catch (err) {
    if (codeOf(err) === status.NOT_FOUND) return;
    // Unknown: deregister anyway (that is what stop asked for).
  }
  try {
    await registry.call(registry.client.deregisterEngine, DeregisterEngineRequest.fromPartial({ engineId }), 2_000, true);
    log.info("deregistered from the registry");
  } catch (err) {
    const code = codeOf(err);
    log.warn({ code: code === undefined ? undefined : status[code], reason: detailsOf(err) }, "deregistration failed (ignored)");
  }
}
