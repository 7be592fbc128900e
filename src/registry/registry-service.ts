import { FailedPreconditionError, fieldError, NotFoundError, ResourceExhaustedError } from "../contract/errors.js";
import { quote } from "../contract/quote.js";
import type { RegistryServiceService } from "../contract/gen/contextd/v1/registry.js";
import type * as R from "../contract/gen/contextd/v1/registry.js";
import type { RequestContext, StreamSink } from "../contract/request-context.js";
import type { Audited, DeadlineClass, Row, ServiceTable } from "../contract/rpc-table.js";
import { Refusal } from "../contract/gen/contextd/v1/registry.js";
import { LEGACY_ENGINE_ID } from "./legacy-engine.js";
import type { Admission } from "./admission.js";
import { EngineEventType, type EngineEvents } from "./engine-events.js";
import { toEngineStatus, type EngineRegistry } from "./engine-registry.js";
import type { Quarantine } from "./quarantine.js";

/**
 * Who calls RegistryService, as the server's authorization step proved it from the row's rule
 * (src/server/authorization.ts): any valid credential may read; registering proves the claimed
 * owner before the handler runs; deregistering needs the engine's owner or an operator, which only
 * the handler can tell.
 */
export interface RegistryCaller {
  /** Throws unless the caller proves `owner` (its token or mTLS identity) or is an operator. */
  requireOwnerOrOperator(owner: string): void;
}

/** Unsent events a WatchEngines stream may hold before it is ended (its watcher is not reading). */
export const MAX_WATCH_BACKLOG = 1024;

/** The rules a RegistryService row may state (contract/rpc-table.ts, AuthRule). */
export type RegistryRule = "reader" | "owner" | "operator";

export type RegistryTable = ServiceTable<typeof RegistryServiceService, RegistryCaller, RegistryRule, "none">;

type Columns<Req = never, Res = never> = { auth: RegistryRule; session: "none"; deadline: DeadlineClass; audit?: Audited<Req, Res> };
type Ctx = RequestContext<RegistryCaller>;
const rpc = <Req, Res>(columns: Columns<Req, Res>, handler: (req: Req, ctx: Ctx) => Promise<Res>) =>
  ({ ...columns, handler }) as unknown as Row<Req, Res, RegistryCaller, RegistryRule, "none", false>;
const stream = <Req, Res>(columns: Columns, handler: (req: Req, ctx: Ctx, sessions: undefined, sink: StreamSink<Res>) => Promise<void>) =>
  ({ ...columns, handler }) as unknown as Row<Req, Res, RegistryCaller, RegistryRule, "none", true>;

/**
 * RegistryService's table: engines register; operators inspect and steer. Its requests name no
 * session. Deregistration is `reader` here: only the handler knows the engine's owner, and asks
 * the principal whether the caller owns it or operates.
 */
export function registryService(registry: EngineRegistry, admission: Admission, quarantine: Quarantine, events: EngineEvents): RegistryTable {
  const remoteEngine = (engineId: string) => {
    const id = engineId.trim();
    if (!id) throw fieldError("engine_id", "is required");
    if (id === LEGACY_ENGINE_ID) throw new FailedPreconditionError(`"${LEGACY_ENGINE_ID}" is the built-in fallback and cannot be quarantined`);
    registry.status(id); // NOT_FOUND when unknown
    return id;
  };
  /** The named instance of a registered engine, or undefined for the engine as a whole. */
  const instanceOf = (id: string, instanceId: string) => {
    if (!instanceId.trim()) return undefined;
    const instance = registry.instance(id, instanceId.trim());
    if (!instance) throw new NotFoundError(`engine "${id}" has no instance ${quote(instanceId.trim())}`);
    return instance;
  };
  return {
    // The `owner` rule proved req.owner already.
    registerEngine: rpc(
      {
        auth: "owner",
        session: "none",
        deadline: "call",
        audit: {
          action: "engine.register",
          target: (r?: R.RegisterEngineRequest) => engineTarget(r?.engineId, r?.instanceId, r?.owner),
          outcome: (res: R.RegisterEngineResponse) => (res.ok ? undefined : `REFUSED ${Refusal[res.refusal] ?? res.refusal}`),
        },
      },
      async (req: R.RegisterEngineRequest) => admission.register(req, req.owner.trim()),
    ),
    deregisterEngine: rpc(
      {
        auth: "reader",
        session: "none",
        deadline: "call",
        audit: { action: "engine.deregister", target: (r?: R.DeregisterEngineRequest) => engineTarget(r?.engineId, r?.instanceId) },
      },
      async (req: R.DeregisterEngineRequest, ctx): Promise<R.DeregisterEngineResponse> => {
        if (!req.engineId.trim()) throw fieldError("engine_id", "is required");
        const deregistered = await admission.deregister(req, (owner) => ctx.principal.requireOwnerOrOperator(owner));
        return { deregistered };
      },
    ),
    listEngines: rpc({ auth: "reader", session: "none", deadline: "call" }, async (): Promise<R.ListEnginesResponse> => ({
      engines: registry.list().map((e) => toEngineStatus(e, registry.view)),
    })),
    getEngine: rpc({ auth: "reader", session: "none", deadline: "call" }, async (req: R.GetEngineRequest): Promise<R.GetEngineResponse> => {
      if (!req.engineId.trim()) throw fieldError("engine_id", "is required");
      return { engine: registry.status(req.engineId.trim()) };
    }),
    quarantineEngine: rpc(
      {
        auth: "operator",
        session: "none",
        deadline: "call",
        audit: { action: "engine.isolate", target: (r?: R.QuarantineEngineRequest) => engineTarget(r?.engineId, r?.instanceId) },
      },
      async (req: R.QuarantineEngineRequest): Promise<R.QuarantineEngineResponse> => {
        const id = remoteEngine(req.engineId);
        const instance = instanceOf(id, req.instanceId);
        const why = req.reason.trim() || "isolated by an operator";
        if (instance) await quarantine.isolate(instance, "manual", why, true);
        else await quarantine.isolateEngine(id, why);
        return { engine: registry.status(id) };
      },
    ),
    clearQuarantine: rpc(
      {
        auth: "operator",
        session: "none",
        deadline: "call",
        audit: { action: "engine.release", target: (r?: R.ClearQuarantineRequest) => engineTarget(r?.engineId, r?.instanceId) },
      },
      async (req: R.ClearQuarantineRequest): Promise<R.ClearQuarantineResponse> => {
        const id = remoteEngine(req.engineId);
        const instance = instanceOf(id, req.instanceId);
        if (instance) await quarantine.clear(instance, "cleared by an operator");
        else await quarantine.clearEngine(id, "cleared by an operator");
        return { engine: registry.status(id) };
      },
    ),
    // Events until the caller goes away or the server drains (EngineEvents.closeAll).
    watchEngines: stream(
      { auth: "reader", session: "none", deadline: "stream" },
      (req: R.WatchEnginesRequest, _ctx, _sessions, sink: StreamSink<R.WatchEnginesResponse>) =>
        new Promise<void>((resolve, reject) => {
          if (req.includeCurrent) {
            for (const engine of registry.list()) {
              sink.write({
                event: {
                  type: EngineEventType.ENGINE_EVENT_TYPE_REGISTERED,
                  engine: toEngineStatus(engine, registry.view),
                  atMs: Date.now(),
                  message: "current",
                  instanceId: "",
                },
              });
            }
          }
          // A watcher that does not read would have every later event held for it in memory: past
          // MAX_WATCH_BACKLOG unsent events its stream ends, and it can watch again with include_current.
          const unsubscribe = events.subscribe((event) => {
            if (sink.backlog >= MAX_WATCH_BACKLOG) {
              unsubscribe();
              reject(
                new ResourceExhaustedError(
                  `WatchEngines: the watcher fell ${MAX_WATCH_BACKLOG} events behind and its stream was ended; watch again with include_current`,
                ),
              );
              return;
            }
            sink.write({ event });
          }, resolve);
          sink.closed.addEventListener(
            "abort",
            () => {
              unsubscribe();
              resolve();
            },
            { once: true },
          );
        }),
    ),
  };
}

/** An audit record's target for an engine (ids only; a quarantine's free-text reason is left out). */
function engineTarget(engineId: string | undefined, instanceId?: string, owner?: string): string {
  const ids = [`engine ${engineId ?? ""}`];
  if (instanceId) ids.push(`instance ${instanceId}`);
  if (owner) ids.push(`owner ${owner}`);
  return ids.join(" ");
}
