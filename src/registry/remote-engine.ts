import { status, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import type { CallContext, ContextEngine } from "../contract/engine-api.js";
import * as E from "../contract/gen/contextd/v1/engine.js";
import { CancelledError, DeadlineExceededError } from "../contract/errors.js";
import { callUnary, type UnaryMethod } from "../contract/client-call.js";
import { EngineChannel } from "./engine-channel.js";

export type HealthAnswer = "SERVING" | "NOT_SERVING" | "UNREACHABLE";

const TRANSPORT_DEADLINE_SLACK_MS = 25;

type Unary<Req, Res> = UnaryMethod<Req, Res>;

/**
 * A sidecar engine reached over gRPC, behind the same ContextEngine interface as the in-process
 * legacy engine. The deadline and cancellation of the CallContext travel with every call.
 */
export class RemoteEngine implements ContextEngine {
  private readonly channel: EngineChannel;

  constructor(
    readonly endpoint: string,
    private engineInfo: E.EngineInfo,
    credentials: ChannelCredentials,
  ) {
    this.channel = new EngineChannel(endpoint, credentials);
  }

  private get client(): E.ContextEngineServiceClient {
    return this.channel.engine;
  }

  info(): E.EngineInfo {
    return this.engineInfo;
  }

  setInfo(info: E.EngineInfo): void {
    this.engineInfo = info;
  }

  /** `pick` names the method on the client of the moment (the channel may have been replaced). */
  private async call<Req, Res>(pick: (c: E.ContextEngineServiceClient) => Unary<Req, Res>, req: Req, ctx: Pick<CallContext, "signal" | "deadlineMs" | "trace">): Promise<Res> {
    // The router's own timer enforces the deadline (and names it); the transport deadline is a
    // backstop a little later so the engine is still told when the time is up.
    const deadline = new Date(Number.isFinite(ctx.deadlineMs) ? ctx.deadlineMs + TRANSPORT_DEADLINE_SLACK_MS : Date.now() + 60_000);
    // Connect first, within the deadline: a call on a channel that is backing off would fail at
    // once although the engine may be back (engine-channel.ts).
    await this.channel.connect(deadline.getTime());
    if (ctx.signal.aborted) throw new CancelledError(`${this.endpoint}: cancelled by the caller`);
    const client = this.client;
    try {
      return await callUnary(client, pick(client), req, { address: this.endpoint }, { deadlineMs: deadline.getTime(), signal: ctx.signal, trace: ctx.trace });
    } catch (err) {
      throw engineError(err as ServiceError, this.endpoint);
    }
  }

  /** GetInfo with a short deadline (admission). */
  getInfo(timeoutMs: number): Promise<E.EngineInfo | undefined> {
    const signal = new AbortController().signal;
    return this.call((c) => c.getInfo, {}, { signal, deadlineMs: Date.now() + timeoutMs }).then((r) => r.info);
  }

  /** One grpc.health.v1 Check of the whole server (service ""), under its own deadline. */
  async checkHealth(timeoutMs: number): Promise<HealthAnswer> {
    const deadline = new Date(Date.now() + timeoutMs);
    try {
      await this.channel.connect(deadline.getTime());
    } catch (err) {
      if (err instanceof DeadlineExceededError) this.channel.reset(); // a SYN lost in a partition: dial afresh next time
      return "UNREACHABLE";
    }
    try {
      const health = this.channel.health as unknown as { check: UnaryMethod<{ service: string }, { status: string | number }> };
      const res = await callUnary(this.channel.health, health.check, { service: "" }, { address: this.endpoint }, { deadlineMs: deadline.getTime() });
      return res.status === "SERVING" || res.status === 1 ? "SERVING" : "NOT_SERVING";
    } catch (err) {
      // No answer in time: the engine may be slow, or the connection dead in a network partition
      // (engine-channel.ts reset). The next check runs on a fresh connection, so the first one
      // after the link returns gets through and releases the engine (test/reliability/partition).
      if ((err as ServiceError).code === status.DEADLINE_EXCEEDED) this.channel.reset();
      return "UNREACHABLE";
    }
  }

  ingest(req: E.IngestRequest, ctx: CallContext) {
    return this.call((c) => c.ingest, req, ctx);
  }
  ingestBatch(req: E.IngestBatchRequest, ctx: CallContext) {
    return this.call((c) => c.ingestBatch, req, ctx);
  }
  assemble(req: E.ContextEngineServiceAssembleRequest, ctx: CallContext) {
    return this.call((c) => c.assemble, req, ctx);
  }
  compact(req: E.ContextEngineServiceCompactRequest, ctx: CallContext) {
    return this.call((c) => c.compact, req, ctx);
  }
  bootstrap(req: E.BootstrapRequest, ctx: CallContext) {
    return this.call((c) => c.bootstrap, req, ctx);
  }
  afterTurn(req: E.ContextEngineServiceAfterTurnRequest, ctx: CallContext) {
    return this.call((c) => c.afterTurn, req, ctx);
  }
  maintain(req: E.ContextEngineServiceMaintainRequest, ctx: CallContext) {
    return this.call((c) => c.maintain, req, ctx);
  }
  prepareSubagentSpawn(req: E.ContextEngineServicePrepareSubagentSpawnRequest, ctx: CallContext) {
    return this.call((c) => c.prepareSubagentSpawn, req, ctx);
  }
  rollbackSubagentSpawn(req: E.ContextEngineServiceRollbackSubagentSpawnRequest, ctx: CallContext) {
    return this.call((c) => c.rollbackSubagentSpawn, req, ctx);
  }
  onSubagentEnded(req: E.OnSubagentEndedRequest, ctx: CallContext) {
    return this.call((c) => c.onSubagentEnded, req, ctx);
  }
  async dispose(ctx: CallContext): Promise<void> {
    await this.call((c) => c.dispose, {}, ctx);
  }

  close(): void {
    this.channel.close();
  }
}

/** The engine's deadline passing is a timeout wherever it is noticed first (here or in the router). */
function engineError(err: ServiceError, endpoint: string): Error {
  if (err.code === status.DEADLINE_EXCEEDED) return new DeadlineExceededError(`${endpoint}: deadline exceeded (${err.details})`);
  return err;
}
