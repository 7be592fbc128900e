import { status, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import type { CallContext, ContextEngine } from "../contract/engine-api.js";
import type * as E from "../contract/gen/contextd/v1/engine.js";
import { CancelledError, DeadlineExceededError } from "../contract/errors.js";
import { callUnary, type UnaryMethod } from "../contract/client-call.js";
import type { DialTarget, EndpointChecker } from "./endpoint-allow-list.js";
import { EngineChannel, EngineUnreachableError } from "./engine-channel.js";

export type HealthAnswer = "SERVING" | "NOT_SERVING" | "UNREACHABLE";

const TRANSPORT_DEADLINE_SLACK_MS = 25;

type Unary<Req, Res> = UnaryMethod<Req, Res>;

/** Bounds the endpoint check made before the first dial of an engine read from the store. */
const FIRST_CHECK_MS = 5_000;

/** The endpoint is (no longer) allowed by engines.allow_endpoints: the engine is not dialled. */
export class EndpointRefusedError extends EngineUnreachableError {}

/**
 * How a RemoteEngine knows where it may connect: the allow list, and the target it already
 * checked (admission). Without `checked` (a registration read from the store, made by another
 * replica or before a restart, perhaps under another config) the check runs before the first dial.
 */
export interface EndpointGuard {
  checker: EndpointChecker;
  checked?: DialTarget;
}

/**
 * A sidecar engine reached over gRPC, behind the same ContextEngine interface as the in-process
 * legacy engine. The deadline and cancellation of the CallContext travel with every call.
 *
 * It dials only what the allow list checked (endpoint-allow-list.ts): the channel exists once a
 * check has passed, `recheckEndpoint` (the health monitor's, on every check) re-points it when a
 * name's addresses change, and closes it — every call failing EndpointRefusedError — when the
 * endpoint is no longer allowed, until a later check passes again.
 */
export class RemoteEngine implements ContextEngine {
  private channel: EngineChannel | undefined;
  private refused: string | undefined;
  private checking: Promise<EngineChannel> | undefined;
  private closed = false;

  constructor(
    readonly endpoint: string,
    private engineInfo: E.EngineInfo,
    private readonly credentials: ChannelCredentials,
    private readonly guard: EndpointGuard,
  ) {
    if (guard.checked) this.channel = new EngineChannel(endpoint, credentials, guard.checked);
  }

  /** The channel to a checked target, checking first when there is none yet. */
  private ready(deadlineMs: number): Promise<EngineChannel> {
    if (this.closed) return Promise.reject(new EngineUnreachableError(`${this.endpoint}: the channel is closed`));
    if (this.refused) return Promise.reject(new EndpointRefusedError(`${this.endpoint}: not dialled: ${this.refused}`));
    if (this.channel) return Promise.resolve(this.channel);
    this.checking ??= this.applyCheck(Math.min(deadlineMs, Date.now() + FIRST_CHECK_MS))
      .then((unresolved) =>
        unresolved && !this.channel && !this.refused ? Promise.reject(new EngineUnreachableError(`${this.endpoint}: ${unresolved}`)) : this.ready(deadlineMs),
      )
      .finally(() => (this.checking = undefined));
    return this.checking;
  }

  /**
   * Runs the allow-list check again (a name may resolve elsewhere now; a socket may have become a
   * symbolic link). Answers why the endpoint is refused, if it is: then nothing is dialled until a
   * check passes again. A name that does not resolve just now keeps the addresses checked before.
   */
  async recheckEndpoint(timeoutMs: number): Promise<string | undefined> {
    await this.applyCheck(Date.now() + timeoutMs);
    return this.refused;
  }

  /** Applies one check; answers the reason when it could not be decided now (unresolved). */
  private async applyCheck(deadlineMs: number): Promise<string | undefined> {
    const result = await this.guard.checker.check(this.endpoint, deadlineMs);
    if (this.closed) return undefined;
    if (!result.ok) {
      if (result.unresolved) return result.reason;
      this.refused = result.reason;
      this.channel?.close();
      this.channel = undefined;
      return;
    }
    this.refused = undefined;
    if (this.channel) this.channel.repoint(result.dial);
    else this.channel = new EngineChannel(this.endpoint, this.credentials, result.dial);
    return undefined;
  }

  info(): E.EngineInfo {
    return this.engineInfo;
  }

  setInfo(info: E.EngineInfo): void {
    this.engineInfo = info;
  }

  /** `pick` names the method on the client of the moment (the channel may have been replaced). */
  private async call<Req, Res>(
    pick: (c: E.ContextEngineServiceClient) => Unary<Req, Res>,
    req: Req,
    ctx: Pick<CallContext, "signal" | "deadlineMs" | "trace">,
  ): Promise<Res> {
    // The router's own timer enforces the deadline (and names it); the transport deadline is a
    // backstop a little later so the engine is still told when the time is up.
    const deadline = new Date(Number.isFinite(ctx.deadlineMs) ? ctx.deadlineMs + TRANSPORT_DEADLINE_SLACK_MS : Date.now() + 60_000);
    // Connect first, within the deadline: a call on a channel that is backing off would fail at
    // once although the engine may be back (engine-channel.ts).
    const channel = await this.ready(deadline.getTime());
    await channel.connect(deadline.getTime());
    if (ctx.signal.aborted) throw new CancelledError(`${this.endpoint}: cancelled by the caller`);
    const client = channel.engine;
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
    let channel: EngineChannel;
    try {
      channel = await this.ready(deadline.getTime());
    } catch {
      return "UNREACHABLE";
    }
    try {
      await channel.connect(deadline.getTime());
    } catch (err) {
      if (err instanceof DeadlineExceededError) channel.reset(); // a SYN lost in a partition: dial afresh next time
      return "UNREACHABLE";
    }
    try {
      const health = channel.health as unknown as { check: UnaryMethod<{ service: string }, { status: string | number }> };
      const res = await callUnary(channel.health, health.check, { service: "" }, { address: this.endpoint }, { deadlineMs: deadline.getTime() });
      return res.status === "SERVING" || res.status === 1 ? "SERVING" : "NOT_SERVING";
    } catch (err) {
      // No answer in time: the engine may be slow, or the connection dead in a network partition
      // (engine-channel.ts reset). The next check runs on a fresh connection, so the first one
      // after the link returns gets through and releases the engine (test/reliability/partition).
      if ((err as ServiceError).code === status.DEADLINE_EXCEEDED) channel.reset();
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
    this.closed = true;
    this.channel?.close();
  }
}

/** The engine's deadline passing is a timeout wherever it is noticed first (here or in the router). */
function engineError(err: ServiceError, endpoint: string): Error {
  if (err.code === status.DEADLINE_EXCEEDED) return new DeadlineExceededError(`${endpoint}: deadline exceeded (${err.details})`);
  return err;
}
