import { status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { DeregisterEngineRequest, GetEngineRequest } from "../../contract/gen/contextd/v1/registry.js";
import { codeOf, detailsOf } from "./registration-error.js";
import type { RegistryConnection } from "./registry-connection.js";

/**
 * Removes this engine's instance as it stops — only it: the engine's other instances serve on
 * (docs/registry.md, "Instances"). From a contextd without instances (EngineStatus.instances
 * empty), the registration, unless it now points at another instance. Failures are logged, not
 * thrown: the engine is shutting down either way.
 */
export async function deregisterEngine(
  registry: RegistryConnection,
  engineId: string,
  endpoint: string,
  log: Logger,
  instanceId: string = endpoint,
): Promise<void> {
  // A newer instance of this engine may have replaced us (allow_same_owner_refresh): then the
  // registration is not ours to remove.
  try {
    const res = await registry.call(registry.client.getEngine, GetEngineRequest.fromPartial({ engineId }), 1_000, true);
    if (res.engine && res.engine.instances.length > 0) {
      if (!res.engine.instances.some((i) => i.instanceId === instanceId)) {
        log.info("not deregistering: the registry does not hold this instance");
        return;
      }
    } else if (res.engine && res.engine.endpoint !== endpoint) {
      log.info({ registeredEndpoint: res.engine.endpoint }, "not deregistering: the registration now points at another instance");
      return;
    }
  } catch (err) {
    if (codeOf(err) === status.NOT_FOUND) return;
    // Unknown: deregister anyway (that is what stop asked for).
  }
  try {
    // This instance only; a contextd without instances ignores the field and removes the
    // registration, which was checked to be this one.
    await registry.call(registry.client.deregisterEngine, DeregisterEngineRequest.fromPartial({ engineId, instanceId }), 2_000, true);
    log.info("deregistered from the registry");
  } catch (err) {
    const code = codeOf(err);
    log.warn({ code: code === undefined ? undefined : status[code], reason: detailsOf(err) }, "deregistration failed (ignored)");
  }
}
