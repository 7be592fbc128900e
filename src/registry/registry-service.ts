import type { Metadata } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { UnimplementedError } from "../contract/errors.js";
import type { RegistryServiceServer } from "../contract/gen/contextd/v1/registry.js";
import { unary } from "../contract/unary.js";
import { toEngineStatus, type EngineRegistry } from "./engine-registry.js";

/** Who may read the registry: any authenticated principal (runtime, owner or operator). */
export interface RegistryReadAuthorizer {
  authorizeReader(metadata: Metadata): void;
}

const NEXT_ISSUE = "is not built yet: remote engine registration and quarantine answer UNIMPLEMENTED until then (see README, Status)";

/** RegistryService over gRPC. */
export function createRegistryService(registry: EngineRegistry, auth: RegistryReadAuthorizer, logger: Logger): RegistryServiceServer {
  const unimplemented = (method: string) =>
    unary(method, logger, async () => {
      throw new UnimplementedError(`${method} ${NEXT_ISSUE}`);
    });
  return {
    listEngines: unary("ListEngines", logger, async (_req, ctx) => {
      auth.authorizeReader(ctx.metadata);
      return { engines: registry.list().map(toEngineStatus) };
    }),
    getEngine: unary("GetEngine", logger, async (req, ctx) => {
      auth.authorizeReader(ctx.metadata);
      return { engine: registry.status(req.engineId) };
    }),
    registerEngine: unimplemented("RegisterEngine"),
    deregisterEngine: unimplemented("DeregisterEngine"),
    quarantineEngine: unimplemented("QuarantineEngine"),
    clearQuarantine: unimplemented("ClearQuarantine"),
    watchEngines: (call) => {
      call.emit("error", { code: 12, details: `WatchEngines ${NEXT_ISSUE}` });
    },
  };
}
