import { makeGenericClientConstructor, Metadata, status, type ChannelCredentials, type Client, type ServiceError } from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import type { CallContext, ContextEngine } from "../contract/engine-api.js";
import * as E from "../contract/gen/contextd/v1/engine.js";
import { DeadlineExceededError } from "../contract/errors.js";

export type HealthAnswer = "SERVING" | "NOT_SERVING" | "UNREACHABLE";

const HealthClient = makeGenericClientConstructor(healthService, "Health");
const CHANNEL_OPTIONS = {
  "grpc.max_receive_message_length": 64 * 1024 * 1024,
  "grpc.max_send_message_length": 64 * 1024 * 1024,
  // Reconnect quickly after a sidecar restarts instead of backing off for up to two minutes.
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 2_000,
};

const TRANSPORT_DEADLINE_SLACK_MS = 25;

type Unary<Req, Res> = (req: Req, md: Metadata, opts: { deadline: Date }, cb: (err: ServiceError | null, res: Res) => void) => { cancel(): void };

/**
 * A sidecar engine reached over gRPC, behind the same ContextEngine interface as the in-process
 * legacy engine. The deadline and cancellation of the CallContext travel with every call.
 */
export class RemoteEngine implements ContextEngine {
  private readonly client: E.ContextEngineServiceClient;
  private readonly health: Client;

  constructor(
    readonly endpoint: string,
    private engineInfo: E.EngineInfo,
    credentials: ChannelCredentials,
  ) {
    this.client = new E.ContextEngineServiceClient(endpoint, credentials, CHANNEL_OPTIONS);
    this.health = new HealthClient(endpoint, credentials, CHANNEL_OPTIONS);
  }

  info(): E.EngineInfo {
    return this.engineInfo;
  }

  setInfo(info: E.EngineInfo): void {
    this.engineInfo = info;
  }

  private call<Req, Res>(method: Unary<Req, Res>, req: Req, ctx: Pick<CallContext, "signal" | "deadlineMs">): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      // The router's own timer enforces the deadline (and names it); the transport deadline is a
      // backstop a little later so the engine is still told when the time is up.
      const deadline = new Date(Number.isFinite(ctx.deadlineMs) ? ctx.deadlineMs + TRANSPORT_DEADLINE_SLACK_MS : Date.now() + 60_000);
      const onAbort = () => call.cancel();
      const call = method.call(this.client, req, new Metadata(), { deadline }, (err, res) => {
        ctx.signal.removeEventListener("abort", onAbort);
        if (err) reject(engineError(err, this.endpoint));
        else resolve(res);
      });
      if (ctx.signal.aborted) call.cancel();
      else ctx.signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** GetInfo with a short deadline (admission). */
  getInfo(timeoutMs: number): Promise<E.EngineInfo | undefined> {
    const signal = new AbortController().signal;
    return this.call(this.client.getInfo, {}, { signal, deadlineMs: Date.now() + timeoutMs }).then((r) => r.info);
  }

  /** One grpc.health.v1 Check of the whole server (service ""), under its own deadline. */
  checkHealth(timeoutMs: number): Promise<HealthAnswer> {
    return new Promise((resolve) => {
      const deadline = new Date(Date.now() + timeoutMs);
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      (this.health as any).check({ service: "" }, new Metadata(), { deadline }, (err: ServiceError | null, res: { status: string | number }) => {
        if (err) return resolve("UNREACHABLE");
        resolve(res.status === "SERVING" || res.status === 1 ? "SERVING" : "NOT_SERVING");
      });
    });
  }

  ingest(req: E.IngestRequest, ctx: CallContext) {
    return this.call(this.client.ingest, req, ctx);
  }
  ingestBatch(req: E.IngestBatchRequest, ctx: CallContext) {
    return this.call(this.client.ingestBatch, req, ctx);
  }
  assemble(req: E.ContextEngineServiceAssembleRequest, ctx: CallContext) {
    return this.call(this.client.assemble, req, ctx);
  }
  compact(req: E.ContextEngineServiceCompactRequest, ctx: CallContext) {
    return this.call(this.client.compact, req, ctx);
  }
  bootstrap(req: E.BootstrapRequest, ctx: CallContext) {
    return this.call(this.client.bootstrap, req, ctx);
  }
  afterTurn(req: E.ContextEngineServiceAfterTurnRequest, ctx: CallContext) {
    return this.call(this.client.afterTurn, req, ctx);
  }
  maintain(req: E.ContextEngineServiceMaintainRequest, ctx: CallContext) {
    return this.call(this.client.maintain, req, ctx);
  }
  prepareSubagentSpawn(req: E.ContextEngineServicePrepareSubagentSpawnRequest, ctx: CallContext) {
    return this.call(this.client.prepareSubagentSpawn, req, ctx);
  }
  rollbackSubagentSpawn(req: E.ContextEngineServiceRollbackSubagentSpawnRequest, ctx: CallContext) {
    return this.call(this.client.rollbackSubagentSpawn, req, ctx);
  }
  onSubagentEnded(req: E.OnSubagentEndedRequest, ctx: CallContext) {
    return this.call(this.client.onSubagentEnded, req, ctx);
  }
  async dispose(ctx: CallContext): Promise<void> {
    await this.call(this.client.dispose, {}, ctx);
  }

  close(): void {
    this.client.close();
    this.health.close();
  }
}

/** The engine's deadline passing is a timeout wherever it is noticed first (here or in the router). */
function engineError(err: ServiceError, endpoint: string): Error {
  if (err.code === status.DEADLINE_EXCEEDED) return new DeadlineExceededError(`${endpoint}: deadline exceeded (${err.details})`);
  return err;
}
