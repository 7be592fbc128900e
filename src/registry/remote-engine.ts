import { status, type ChannelCredentials, type Client, type ServiceError } from "@grpc/grpc-js";
import type { CallContext, ContextEngine } from "../contract/engine-api.js";
import type * as E from "../contract/gen/contextd/v1/engine.js";
import { CancelledError, ContractViolation, DeadlineExceededError } from "../contract/errors.js";
import { callUnary, type UnaryMethod } from "../contract/client-call.js";
import { boundedText } from "../contract/quote.js";
import { answerProblem, assembleBound, compactBound, smallBound, type AnswerBound, type AnswerLimits } from "./answer-limits.js";
import type { DialTarget, EndpointChecker } from "./endpoint-allow-list.js";
import { ENGINE_SERVICE, EngineChannel, EngineUnreachableError } from "./engine-channel.js";

export type HealthAnswer = "SERVING" | "NOT_SERVING" | "UNREACHABLE";

const TRANSPORT_DEADLINE_SLACK_MS = 25;

/** How contextd reaches sidecars: the channel credentials, and how large their answers may be. */
export interface EngineDialing {
  credentials: ChannelCredentials;
  answerLimits: AnswerLimits;
}

type EngineMethod = keyof typeof ENGINE_SERVICE & string;
type RequestOf<M extends EngineMethod> = Parameters<(typeof ENGINE_SERVICE)[M]["requestSerialize"]>[0];
type ResponseOf<M extends EngineMethod> = ReturnType<(typeof ENGINE_SERVICE)[M]["responseDeserialize"]>;

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
    private readonly dialing: EngineDialing,
    private readonly guard: EndpointGuard,
  ) {
    if (guard.checked) this.channel = this.open(guard.checked);
  }

  private open(target: DialTarget): EngineChannel {
    return new EngineChannel(this.endpoint, this.dialing.credentials, target, this.dialing.answerLimits.maxBytes);
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
    else this.channel = this.open(result.dial);
    return undefined;
  }

  info(): E.EngineInfo {
    return this.engineInfo;
  }

  setInfo(info: E.EngineInfo): void {
    this.engineInfo = info;
  }

  /**
   * One call of `method` on the client of the moment (the channel may have been replaced). Its
   * answer is checked against `bound` (given the size of the request as sent) on its wire bytes,
   * before it is decoded: an answer over it is the engine's ContractViolation.
   */
  private async call<M extends EngineMethod, Req extends RequestOf<M> = RequestOf<M>, Res = ResponseOf<M>>(
    method: M,
    req: Req,
    ctx: Pick<CallContext, "signal" | "deadlineMs" | "trace" | "away">,
    bound: (requestBytes: number) => AnswerBound = smallBound(this.dialing.answerLimits),
  ): Promise<Res> {
    // The router's own timer enforces the deadline (and names it); the transport deadline is a
    // backstop a little later so the engine is still told when the time is up.
    const deadline = new Date(Number.isFinite(ctx.deadlineMs) ? ctx.deadlineMs + TRANSPORT_DEADLINE_SLACK_MS : Date.now() + 60_000);
    // Connect first, within the deadline: a call on a channel that is backing off would fail at
    // once although the engine may be back (engine-channel.ts).
    const channel = await this.ready(deadline.getTime());
    await channel.connect(deadline.getTime());
    if (ctx.signal.aborted) throw new CancelledError(`${this.endpoint}: cancelled by the caller`);
    const client = channel.engine as unknown as Client;
    const def = ENGINE_SERVICE[method] as unknown as { path: string; requestSerialize(r: Req): Buffer; responseDeserialize(b: Buffer): Res };
    let requestBytes = 0;
    let problem: string | undefined;
    const unary: UnaryMethod<Req, Res> = (request, metadata, options, callback) =>
      client.makeUnaryRequest(
        def.path,
        (r: Req) => {
          const bytes = def.requestSerialize(r);
          requestBytes = bytes.length;
          return bytes;
        },
        (bytes: Buffer) => {
          problem = answerProblem(bytes, bound(requestBytes));
          if (problem) throw new Error(problem); // grpc-js ends the call; the catch below names it
          return def.responseDeserialize(bytes);
        },
        request,
        metadata,
        options,
        (err, res) => callback(err, res as Res),
      );
    try {
      const wait = () => callUnary(client, unary, req, { address: this.endpoint }, { deadlineMs: deadline.getTime(), signal: ctx.signal, trace: ctx.trace });
      // The wait on the sidecar gives the caller's turn up (CallContext.away).
      return await (ctx.away ? ctx.away(wait) : wait());
    } catch (err) {
      if (problem) throw new ContractViolation(`its ${def.path.slice(def.path.lastIndexOf("/") + 1)} answer ${problem}`);
      throw engineError(err as ServiceError, this.endpoint);
    }
  }

  /** GetInfo with a short deadline (admission). */
  getInfo(timeoutMs: number): Promise<E.EngineInfo | undefined> {
    const signal = new AbortController().signal;
    return this.call("getInfo", {}, { signal, deadlineMs: Date.now() + timeoutMs }).then((r) => r.info);
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
    return this.call("ingest", req, ctx);
  }
  ingestBatch(req: E.IngestBatchRequest, ctx: CallContext) {
    return this.call("ingestBatch", req, ctx);
  }
  assemble(req: E.ContextEngineServiceAssembleRequest, ctx: CallContext) {
    return this.call("assemble", req, ctx, assembleBound(this.dialing.answerLimits, req));
  }
  async compact(req: E.ContextEngineServiceCompactRequest, ctx: CallContext) {
    return withBoundedReason(await this.call("compact", req, ctx, compactBound(this.dialing.answerLimits, req)));
  }
  async bootstrap(req: E.BootstrapRequest, ctx: CallContext) {
    return withBoundedReason(await this.call("bootstrap", req, ctx));
  }
  afterTurn(req: E.ContextEngineServiceAfterTurnRequest, ctx: CallContext) {
    return this.call("afterTurn", req, ctx);
  }
  async maintain(req: E.ContextEngineServiceMaintainRequest, ctx: CallContext) {
    return withBoundedReason(await this.call("maintain", req, ctx));
  }
  prepareSubagentSpawn(req: E.ContextEngineServicePrepareSubagentSpawnRequest, ctx: CallContext) {
    return this.call("prepareSubagentSpawn", req, ctx);
  }
  rollbackSubagentSpawn(req: E.ContextEngineServiceRollbackSubagentSpawnRequest, ctx: CallContext) {
    return this.call("rollbackSubagentSpawn", req, ctx);
  }
  onSubagentEnded(req: E.OnSubagentEndedRequest, ctx: CallContext) {
    return this.call("onSubagentEnded", req, ctx);
  }
  forgetSession(req: E.ForgetSessionRequest, ctx: CallContext) {
    return this.call("forgetSession", req, ctx);
  }
  async dispose(ctx: CallContext): Promise<void> {
    await this.call("dispose", {}, ctx);
  }

  close(): void {
    this.closed = true;
    this.channel?.close();
  }
}

/**
 * The `reason` an engine gives reaches the runtime and the logs: bounded and escaped like any
 * untrusted text, here where the answer enters contextd.
 */
function withBoundedReason<T extends { reason: string }>(answer: T): T {
  return answer.reason ? { ...answer, reason: boundedText(answer.reason, REASON_MAX_CHARS) } : answer;
}

/** The longest reason an engine's answer carries on. */
const REASON_MAX_CHARS = 1024;

/** The engine's deadline passing is a timeout wherever it is noticed first (here or in the router). */
function engineError(err: ServiceError, endpoint: string): Error {
  if (err.code === status.DEADLINE_EXCEEDED) return new DeadlineExceededError(`${endpoint}: deadline exceeded (${err.details})`);
  return err;
}
