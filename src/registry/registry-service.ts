import type { Metadata, ServerWritableStream } from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import type { Logger } from "pino";
import { FailedPreconditionError, InvalidArgumentError } from "../contract/errors.js";
import type { RegistryServiceServer, WatchEnginesRequest, WatchEnginesResponse } from "../contract/gen/contextd/v1/registry.js";
import { toServiceError } from "../contract/grpc-status.js";
import { unary } from "../contract/unary.js";
import { LEGACY_ENGINE_ID } from "../legacy/legacy-engine.js";
import type { Admission } from "./admission.js";
import { EngineEventType, type EngineEvents } from "./engine-events.js";
import { toEngineStatus, type EngineRegistry } from "./engine-registry.js";
import type { Quarantine } from "./quarantine.js";

/** The credential checks RegistryService needs; implemented by the server's Authenticator. */
export interface RegistryAuthorizer {
  /** Any valid runtime, owner or operator credential. */
  authorizeReader(metadata: Metadata): void;
  /** The caller proves `owner` (token or mTLS identity). */
  authorizeOwner(metadata: Metadata, owner: string, peerCertificate?: PeerCertificate): void;
  authorizeOperator(metadata: Metadata): void;
}

/** RegistryService over gRPC: engines register; operators inspect and steer. */
export function createRegistryService(
  registry: EngineRegistry,
  admission: Admission,
  quarantine: Quarantine,
  events: EngineEvents,
  auth: RegistryAuthorizer,
  logger: Logger,
): RegistryServiceServer {
  const remoteEngine = (engineId: string) => {
    const id = engineId.trim();
    if (!id) throw new InvalidArgumentError("engine_id is required");
    if (id === LEGACY_ENGINE_ID) throw new FailedPreconditionError(`"${LEGACY_ENGINE_ID}" is the built-in fallback and cannot be quarantined`);
    registry.status(id); // NOT_FOUND when unknown
    return registry.get(id)!;
  };
  return {
    registerEngine: unary("RegisterEngine", logger, async (req, ctx) => {
      const owner = req.owner.trim();
      if (!owner) throw new InvalidArgumentError("owner is required");
      auth.authorizeOwner(ctx.metadata, owner, ctx.peerCertificate);
      return admission.register(req, owner);
    }),
    deregisterEngine: unary("DeregisterEngine", logger, async (req, ctx) => {
      // Credentials first: whether an id exists is not told to strangers.
      auth.authorizeReader(ctx.metadata);
      if (!req.engineId.trim()) throw new InvalidArgumentError("engine_id is required");
      const deregistered = await admission.deregister(req, (owner) => {
        try {
          auth.authorizeOwner(ctx.metadata, owner, ctx.peerCertificate);
        } catch (ownerErr) {
          try {
            auth.authorizeOperator(ctx.metadata);
          } catch {
            throw ownerErr;
          }
        }
      });
      return { deregistered };
    }),
    listEngines: unary("ListEngines", logger, async (_req, ctx) => {
      auth.authorizeReader(ctx.metadata);
      return { engines: registry.list().map(toEngineStatus) };
    }),
    getEngine: unary("GetEngine", logger, async (req, ctx) => {
      auth.authorizeReader(ctx.metadata);
      if (!req.engineId.trim()) throw new InvalidArgumentError("engine_id is required");
      return { engine: registry.status(req.engineId.trim()) };
    }),
    quarantineEngine: unary("QuarantineEngine", logger, async (req, ctx) => {
      auth.authorizeOperator(ctx.metadata);
      const engine = remoteEngine(req.engineId);
      await quarantine.isolate(engine, "manual", req.reason.trim() || "isolated by an operator", true);
      return { engine: toEngineStatus(engine) };
    }),
    clearQuarantine: unary("ClearQuarantine", logger, async (req, ctx) => {
      auth.authorizeOperator(ctx.metadata);
      const engine = remoteEngine(req.engineId);
      await quarantine.clear(engine, "cleared by an operator");
      return { engine: toEngineStatus(engine) };
    }),
    watchEngines: (call: ServerWritableStream<WatchEnginesRequest, WatchEnginesResponse>) => {
      try {
        auth.authorizeReader(call.metadata);
      } catch (err) {
        call.emit("error", toServiceError(err));
        return;
      }
      if (call.request.includeCurrent) {
        for (const engine of registry.list()) {
          call.write({ event: { type: EngineEventType.ENGINE_EVENT_TYPE_REGISTERED, engine: toEngineStatus(engine), atMs: Date.now(), message: "current" } });
        }
      }
      const unsubscribe = events.subscribe(
        (event) => call.write({ event }),
        () => call.end(),
      );
      const end = () => unsubscribe();
      call.on("cancelled", end);
      call.on("close", end);
      call.on("error", end);
    },
  };
}

