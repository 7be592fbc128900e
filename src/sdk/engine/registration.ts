import { status, type ChannelCredentials } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { PROTOCOL_VERSION } from "../../contract/engine-api.js";
import {
  GetEngineRequest,
  RegisterEngineRequest,
  refusalToJSON,
  type EngineStatus,
  type RegisterEngineResponse,
} from "../../contract/gen/contextd/v1/registry.js";
import { backoffDelay } from "./backoff.js";
import { deregisterEngine } from "./deregistration.js";
import { HeartbeatWatch, type HeartbeatVerdict } from "./heartbeat.js";
import { RETRIED_REFUSALS, RegistrationError, TRANSIENT, codeOf, detailsOf } from "./registration-error.js";
import { RegistryConnection, Stopped } from "./registry-connection.js";

// engine-sdk.ts exports RegistrationError from this module.
export { RegistrationError } from "./registration-error.js";

export interface RegistrationSettings {
  /** The registry's address (contextd): host:port or unix:/path. */
  registry: string;
  engineId: string;
  owner: string;
  ownerToken?: string;
  /** Where the registry reaches this engine. */
  endpoint: string;
  /** Which instance of the engine this is; absent or "": its endpoint. */
  instanceId?: string;
  /** Where it runs (RegisterEngineRequest.locality). */
  locality?: { node: string; zone: string; replica: string };
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

/**
 * Keeps an engine registered with contextd's RegistryService:
 *
 * - registers with the owner token; while the registry is unreachable (UNAVAILABLE,
 *   DEADLINE_EXCEEDED, ...) or refuses with UNREACHABLE (it could not dial us yet) or TOO_MANY_INSTANCES
 *   (its id is at engines.max_instances until a dead instance is removed), retries with
 *   exponential backoff and jitter;
 * - a permanent refusal (DEFAULT_SLOT_RESERVED, OWNED_BY_OTHER, ALREADY_REGISTERED, CONTRACT_INVALID,
 *   VERSION_UNSUPPORTED, ENDPOINT_NOT_ALLOWED) or a non-transient status (UNAUTHENTICATED,
 *   PERMISSION_DENIED, UNIMPLEMENTED, INVALID_ARGUMENT, ...) stops trying and rejects `registered`;
 * - once registered, checks every `heartbeatMs` with GetEngine that the registry still has this
 *   engine, and registers again when it answers NOT_FOUND (the registry restarted and lost it, or
 *   the engine was deregistered) — so engines come back by themselves;
 * - when GetEngine names another endpoint, another instance of this engine (a replica, or the next
 *   version in a rolling deploy) has taken the id over: this one logs a warning once, does not
 *   register again (two instances would otherwise keep taking the id from each other, each
 *   registration resetting the other's registry state), and keeps heartbeating, so it registers
 *   again once the other instance deregisters and the id is NOT_FOUND;
 * - on stop, deregisters (unless the registration now points at another instance).
 */
export class Registrar {
  /** The outcome of the first registration (later re-registrations do not change it). */
  readonly registered: Promise<RegisterEngineResponse>;
  private resolveFirst!: (res: RegisterEngineResponse) => void;
  private rejectFirst!: (err: Error) => void;
  private firstSettled = false;

  private readonly registry: RegistryConnection;
  private readonly log: Logger;
  private readonly watch: HeartbeatWatch;
  private timer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private stopped = false;
  private mayBeRegistered = false;
  private loop: Promise<void> = Promise.resolve();
  private readonly current: RegistrationStatus = { state: "registering", registrations: 0 };

  constructor(private readonly settings: RegistrationSettings) {
    this.registered = new Promise<RegisterEngineResponse>((resolve, reject) => {
      this.resolveFirst = resolve;
      this.rejectFirst = reject;
    });
    // Nobody has to await `registered`: a rejection must not become an unhandled rejection.
    this.registered.catch(() => undefined);
    this.registry = new RegistryConnection(settings.registry, settings.credentials, settings.ownerToken);
    this.log = settings.logger.child({ registry: settings.registry, endpoint: settings.endpoint });
    this.watch = new HeartbeatWatch(this.log, settings.engineId, settings.endpoint, this.instanceId);
  }

  /** The instance this is, as the registry names it. */
  private get instanceId(): string {
    return this.settings.instanceId || this.settings.endpoint;
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
    this.registry.stop();
    await this.loop.catch(() => undefined);
    this.current.state = "stopped";
    this.settleFirst(new RegistrationError("the engine stopped before it was registered"));
    try {
      if (deregister && this.mayBeRegistered) await deregisterEngine(this.registry, this.settings.engineId, this.settings.endpoint, this.log, this.instanceId);
    } finally {
      this.registry.close();
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
      instanceId: s.instanceId ?? "",
      locality: s.locality && (s.locality.node || s.locality.zone || s.locality.replica) ? s.locality : undefined,
    });
  }

  /** Registers, retrying transient failures; schedules heartbeats on success. */
  private async register(why: "initial" | "lost"): Promise<void> {
    this.current.state = "registering";
    for (let attempt = 0; !this.stopped; attempt++) {
      let failure: { transient: boolean; error: RegistrationError };
      const before = this.mayBeRegistered;
      try {
        // From here on the registry may hold this instance (even if the answer gets lost).
        this.mayBeRegistered = true;
        const res = await this.registry.call(this.registry.client.registerEngine, this.request(), this.settings.registerTimeoutMs ?? 15_000);
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
        failure = { transient: RETRIED_REFUSALS.has(res.refusal), error };
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
      const delay = backoffDelay(attempt, this.settings.retry);
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
    this.watch.registered();
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

  private scheduleHeartbeat(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.loop = this.heartbeat();
    }, this.settings.heartbeatMs);
    this.timer.unref?.();
  }

  /** Does the registry still hold this engine? Registers again when it lost it (NOT_FOUND). */
  private async heartbeat(): Promise<void> {
    if (this.stopped) return;
    let engine: EngineStatus | undefined;
    try {
      const timeout = Math.min(5_000, Math.max(1_000, this.settings.heartbeatMs));
      const req = GetEngineRequest.fromPartial({ engineId: this.settings.engineId });
      engine = (await this.registry.call(this.registry.client.getEngine, req, timeout)).engine;
    } catch (err) {
      if (this.stopped || err instanceof Stopped) return;
      return this.follow(this.watch.failed(err));
    }
    return this.follow(this.watch.answered(engine));
  }

  /**
   * Acts on what the heartbeat saw: register again (only when the registry lost the engine; not
   * when another instance holds the id), check again later, or stop checking.
   */
  private follow(verdict: HeartbeatVerdict): Promise<void> | undefined {
    if (verdict === "lost") return this.register(verdict);
    if (verdict !== "disabled") this.scheduleHeartbeat();
    return undefined;
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
