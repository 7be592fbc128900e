import { status, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { PROTOCOL_VERSION } from "../../contract/engine-api.js";
import {
  DeregisterEngineRequest,
  GetEngineRequest,
  RegisterEngineRequest,
  Refusal,
  RegistryServiceClient,
  refusalToJSON,
  type EngineStatus,
  type RegisterEngineResponse,
} from "../../contract/gen/contextd/v1/registry.js";
import { callUnary, type ClientOptions } from "../grpc-call.js";

export interface RegistrationSettings {
  /** The registry's address (contextd): host:port or unix:/path. */
  registry: string;
  engineId: string;
  owner: string;
  ownerToken?: string;
  /** Where the registry reaches this engine. */
  endpoint: string;
  allowSameOwnerRefresh: boolean;
  heartbeatMs: number;
  credentials: ChannelCredentials;
  logger: Logger;
  /** Backoff between registration attempts while the registry is unreachable. */
  retry: { initialMs: number; maxMs: number };
  /** Deadline of one RegisterEngine call (the registry dials the engine before it answers). */
  registerTimeoutMs?: number;
}

export type RegistrationState = "registering" | "registered" | "failed" | "stopped";

/** Where registration stands, for logs, health endpoints and tests. */
export interface RegistrationStatus {
  state: RegistrationState;
  /** Successful RegisterEngine calls so far (more than one after the registry lost the engine). */
  registrations: number;
  /** The last successful answer. */
  lastResponse?: RegisterEngineResponse;
  /** Why the state is `failed`, or the last transient failure while `registering`. */
  lastError?: Error;
}

/** Why registration failed for good: a refusal answer or a non-retryable gRPC status. */
export class RegistrationError extends Error {
  constructor(
    message: string,
    /** The refusal when the registry answered `ok = false`. */
    readonly refusal?: Refusal,
    /** The gRPC status when the call failed. */
    readonly code?: status,
    readonly response?: RegisterEngineResponse,
  ) {
    super(message);
    this.name = "RegistrationError";
  }
}

/** Statuses that mean "the registry is not there (yet)": keep trying. */
const TRANSIENT = new Set<number>([status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.CANCELLED, status.RESOURCE_EXHAUSTED, status.ABORTED]);

const CHANNEL_OPTIONS = {
  // Reconnect quickly when the registry comes (back) up instead of backing off for up to two minutes.
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 2_000,
};

class Stopped extends Error {}

function codeOf(err: unknown): number | undefined {
  const code = (err as Partial<ServiceError> | undefined)?.code;
  return typeof code === "number" ? code : undefined;
}

function detailsOf(err: unknown): string {
  const e = err as Partial<ServiceError>;
  return e?.details || e?.message || String(err);
}

/**
 * Keeps an engine registered with contextd's RegistryService:
 *
 * - registers with the owner token; while the registry is unreachable (UNAVAILABLE,
 *   DEADLINE_EXCEEDED, ...) or refuses with UNREACHABLE (it could not dial us yet), retries with
 *   exponential backoff and jitter;
 * - a permanent refusal (DEFAULT_SLOT_RESERVED, OWNED_BY_OTHER, ALREADY_REGISTERED, CONTRACT_INVALID,
 *   VERSION_UNSUPPORTED, ENDPOINT_NOT_ALLOWED) or a non-transient status (UNAUTHENTICATED,
 *   PERMISSION_DENIED, UNIMPLEMENTED, INVALID_ARGUMENT, ...) stops trying and rejects `registered`;
 * - once registered, checks every `heartbeatMs` with GetEngine that the registry still has this
 *   engine at this endpoint, and registers again when it does not (the registry restarted and lost
 *   it, or another instance took the id) — so engines come back by themselves;
 * - on stop, deregisters (unless the registration now points at another instance).
 */
export class Registrar {
  /** The outcome of the first registration (later re-registrations do not change it). */
  readonly registered: Promise<RegisterEngineResponse>;
  private resolveFirst!: (res: RegisterEngineResponse) => void;
  private rejectFirst!: (err: Error) => void;
  private firstSettled = false;

  private readonly client: RegistryServiceClient;
  private readonly clientOptions: ClientOptions;
  private readonly log: Logger;
  private readonly inflight = new Set<AbortController>();
  private timer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private stopped = false;
  private mayBeRegistered = false;
  private registryDown = false;
  private lastQuarantine = "";
  private heartbeatProblem = "";
  private loop: Promise<void> = Promise.resolve();
  private readonly current: RegistrationStatus = { state: "registering", registrations: 0 };

  constructor(private readonly settings: RegistrationSettings) {
    this.registered = new Promise<RegisterEngineResponse>((resolve, reject) => {
      this.resolveFirst = resolve;
      this.rejectFirst = reject;
    });
    // Nobody has to await `registered`: a rejection must not become an unhandled rejection.
    this.registered.catch(() => undefined);
    this.client = new RegistryServiceClient(settings.registry, settings.credentials, CHANNEL_OPTIONS);
    this.clientOptions = { address: settings.registry, token: settings.ownerToken || undefined, credentials: settings.credentials };
    this.log = settings.logger.child({ registry: settings.registry, endpoint: settings.endpoint });
  }

  get status(): RegistrationStatus {
    return { ...this.current };
  }

  start(): void {
    this.loop = this.register("initial");
  }

  /** Stops heartbeats and retries; deregisters when asked and the registration may be ours. */
  async stop(deregister: boolean): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.wake?.();
    for (const c of this.inflight) c.abort();
    await this.loop.catch(() => undefined);
    this.current.state = "stopped";
    this.settleFirst(new RegistrationError("the engine stopped before it was registered"));
    try {
      if (deregister && this.mayBeRegistered) await this.deregister();
    } finally {
      this.client.close();
    }
  }

  private async deregister(): Promise<void> {
    const { engineId, endpoint } = this.settings;
    // A newer instance of this engine may have replaced us (allow_same_owner_refresh): then the
    // registration is not ours to remove.
    try {
      const res = await this.call(this.client.getEngine, GetEngineRequest.fromPartial({ engineId }), 1_000, true);
      if (res.engine && res.engine.endpoint !== endpoint) {
        this.log.info({ registeredEndpoint: res.engine.endpoint }, "not deregistering: the registration now points at another instance");
        return;
      }
    } catch (err) {
      if (codeOf(err) === status.NOT_FOUND) return;
      // Unknown: deregister anyway (that is what stop asked for).
    }
    try {
      await this.call(this.client.deregisterEngine, DeregisterEngineRequest.fromPartial({ engineId }), 2_000, true);
      this.log.info("deregistered from the registry");
    } catch (err) {
      const code = codeOf(err);
      this.log.warn({ code: code === undefined ? undefined : status[code], reason: detailsOf(err) }, "deregistration failed (ignored)");
    }
  }

  private request(): RegisterEngineRequest {
    const s = this.settings;
    return RegisterEngineRequest.fromPartial({
      engineId: s.engineId,
      owner: s.owner,
      endpoint: s.endpoint,
      allowSameOwnerRefresh: s.allowSameOwnerRefresh,
      protocolVersions: [PROTOCOL_VERSION],
    });
  }

  /** Registers, retrying transient failures; schedules heartbeats on success. */
  private async register(why: "initial" | "lost" | "moved"): Promise<void> {
    this.current.state = "registering";
    for (let attempt = 0; !this.stopped; attempt++) {
      let failure: { transient: boolean; error: RegistrationError };
      const before = this.mayBeRegistered;
      try {
        // From here on the registry may hold this instance (even if the answer gets lost).
        this.mayBeRegistered = true;
        const res = await this.call(this.client.registerEngine, this.request(), this.settings.registerTimeoutMs ?? 15_000);
        if (res.ok) {
          this.onRegistered(res, why, attempt);
          return;
        }
        const refusal = refusalToJSON(res.refusal).replace(/^REFUSAL_/, "");
        const owner = res.existingOwner ? ` (held by owner "${res.existingOwner}")` : "";
        const error = new RegistrationError(
          `registry refused engine "${this.settings.engineId}": ${refusal}${owner}${res.message ? `: ${res.message}` : ""}`,
          res.refusal,
          undefined,
          res,
        );
        failure = { transient: res.refusal === Refusal.REFUSAL_UNREACHABLE, error };
      } catch (err) {
        if (this.stopped || err instanceof Stopped) return;
        const code = codeOf(err);
        // UNAVAILABLE: the request never reached a registry.
        if (code === status.UNAVAILABLE) this.mayBeRegistered = before;
        const name = code === undefined ? "error" : status[code];
        const error = new RegistrationError(`registering engine "${this.settings.engineId}" failed: ${name}: ${detailsOf(err)}`, undefined, code);
        failure = { transient: code !== undefined && TRANSIENT.has(code), error };
      }
      if (this.stopped) return;
      this.current.lastError = failure.error;
      if (!failure.transient) {
        // Refused or rejected: whatever the registry holds under this id is not this instance.
        this.mayBeRegistered = false;
        this.current.state = "failed";
        const { refusal, code } = failure.error;
        this.log.error(
          { refusal: refusal === undefined ? undefined : refusalToJSON(refusal), code: code === undefined ? undefined : status[code] },
          `${failure.error.message}; not retrying (the engine keeps serving)`,
        );
        this.settleFirst(failure.error);
        return;
      }
      const delay = this.backoff(attempt);
      // The first failure and then every tenth is a warning; the rest are debug noise.
      const level = attempt % 10 === 0 ? "warn" : "debug";
      this.log[level]({ attempt: attempt + 1, retryInMs: delay }, `${failure.error.message}; retrying`);
      await this.sleep(delay);
    }
  }

  private onRegistered(res: RegisterEngineResponse, why: string, attempt: number): void {
    this.current.state = "registered";
    this.current.registrations++;
    this.current.lastResponse = res;
    this.current.lastError = undefined;
    this.registryDown = false;
    this.heartbeatProblem = "";
    this.log.info(
      { owner: this.settings.owner, protocolVersion: res.protocolVersion, attempts: attempt + 1 },
      why === "initial" ? "registered with the registry" : "registered again with the registry",
    );
    this.settleFirst(res);
    this.scheduleHeartbeat();
  }

  private settleFirst(outcome: RegisterEngineResponse | Error): void {
    if (this.firstSettled) return;
    this.firstSettled = true;
    if (outcome instanceof Error) this.rejectFirst(outcome);
    else this.resolveFirst(outcome);
  }

  private backoff(attempt: number): number {
    const { initialMs, maxMs } = this.settings.retry;
    const base = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
    // "Equal jitter": between half and all of the exponential step.
    return Math.round(base / 2 + Math.random() * (base / 2));
  }

  private scheduleHeartbeat(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.loop = this.heartbeat();
    }, this.settings.heartbeatMs);
    this.timer.unref?.();
  }

  /** Is the registry still holding this engine at this endpoint? Registers again when not. */
  private async heartbeat(): Promise<void> {
    if (this.stopped) return;
    const { engineId, endpoint } = this.settings;
    let engine: EngineStatus | undefined;
    try {
      const timeout = Math.min(5_000, Math.max(1_000, this.settings.heartbeatMs));
      engine = (await this.call(this.client.getEngine, GetEngineRequest.fromPartial({ engineId }), timeout)).engine;
    } catch (err) {
      if (this.stopped || err instanceof Stopped) return;
      const code = codeOf(err);
      if (code === status.NOT_FOUND) {
        this.log.warn(
          this.registryDown ? "the registry is back without this engine (it restarted); registering again" : "the registry no longer has this engine; registering again",
        );
        this.registryDown = false;
        return this.register("lost");
      }
      if (code !== undefined && TRANSIENT.has(code)) {
        if (!this.registryDown) this.log.warn({ code: status[code] }, "registry unreachable; will check the registration again when it is back");
        this.registryDown = true;
      } else if (code === status.UNIMPLEMENTED) {
        this.log.warn("the registry does not implement GetEngine; registration heartbeat disabled");
        return;
      } else {
        const problem = `${code === undefined ? "error" : status[code]}: ${detailsOf(err)}`;
        if (problem !== this.heartbeatProblem) this.log.warn({ reason: problem }, "registration heartbeat failed");
        this.heartbeatProblem = problem;
      }
      this.scheduleHeartbeat();
      return;
    }
    if (!engine || engine.endpoint !== endpoint) {
      this.log.warn({ registeredEndpoint: engine?.endpoint ?? "" }, "the registry has this engine id at another endpoint; registering again");
      this.registryDown = false;
      return this.register("moved");
    }
    if (this.registryDown) this.log.info("registry reachable again; registration intact");
    this.registryDown = false;
    this.heartbeatProblem = "";
    const quarantine = engine.quarantine ? `${engine.quarantine.operation}: ${engine.quarantine.reason}` : "";
    if (quarantine !== this.lastQuarantine) {
      if (quarantine) this.log.warn({ quarantine: engine.quarantine }, "the registry has quarantined this engine");
      else this.log.info("the registry released this engine from quarantine");
      this.lastQuarantine = quarantine;
    }
    this.scheduleHeartbeat();
  }

  private async call<Req, Res>(method: Parameters<typeof callUnary<Req, Res>>[1], req: Req, timeoutMs: number, duringStop = false): Promise<Res> {
    if (this.stopped && !duringStop) throw new Stopped();
    const controller = new AbortController();
    this.inflight.add(controller);
    try {
      return await callUnary(this.client, method, req, this.clientOptions, { timeoutMs, signal: controller.signal });
    } finally {
      this.inflight.delete(controller);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.wake = undefined;
        resolve();
      };
      const t = setTimeout(done, ms);
      this.wake = done;
    });
  }
}
