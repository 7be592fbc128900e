import { Channel, connectivityState, makeGenericClientConstructor, status, type ChannelCredentials, type Client } from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import * as E from "../contract/gen/contextd/v1/engine.js";
import { CHANNEL_OPTIONS } from "../contract/client-call.js";
import { withSplicedMessages } from "../contract/encoded-messages.js";
import { ContextdError, DeadlineExceededError } from "../contract/errors.js";
import { ErrorReason } from "../contract/gen/contextd/v1/errors.js";
import type { DialTarget } from "./endpoint-allow-list.js";

const HealthClient = makeGenericClientConstructor(healthService, "Health");

/**
 * The generated client, but Assemble's request carries the view's messages as the bytes they were
 * stored as (contract/encoded-messages.ts): the one request whose size grows with the session.
 */
export const ENGINE_SERVICE = withSplicedMessages(E.ContextEngineServiceService, "assemble", "request", E.ContextEngineServiceAssembleRequest, 2);

const EngineClient = makeGenericClientConstructor(ENGINE_SERVICE, "contextd.v1.ContextEngineService") as unknown as typeof E.ContextEngineServiceClient;

const OPTIONS = {
  ...CHANNEL_OPTIONS,
  // This channel's own subchannel: see the class comment.
  "grpc.use_local_subchannel_pool": 1,
};

/** Deadline of a connection attempt for a caller without one. */
const DEFAULT_CONNECT_MS = 60_000;

/** No connection to the engine could be made: the engine's failure (quarantine, fallback). */
export class EngineUnreachableError extends ContextdError {
  static override readonly reason = ErrorReason.ENGINE_UNREACHABLE;
  constructor(message: string) {
    super(status.UNAVAILABLE, message);
  }
}

interface Generation {
  channel: Channel;
  engine: E.ContextEngineServiceClient;
  health: Client;
}

/**
 * The gRPC channel to one sidecar, shared by its ContextEngineService and grpc.health.v1 clients,
 * that connects on demand within the caller's deadline (`connect`).
 *
 * Why not plain clients: grpc-js shares subchannels process-wide between channels to the same
 * address, and after a failed connection attempt a subchannel stays in TRANSIENT_FAILURE for its
 * reconnect backoff (up to max_reconnect_backoff), failing every call at once with "No connection
 * established". An engine killed and restarted at the same address was then refused at admission
 * (its new registration dialled through the old, backing-off subchannel), failed its health
 * checks, and had its routed calls fail — and be quarantined — while it was up. So this channel has
 * its own subchannel, and a `connect` that finds it backing off replaces it with a fresh one that
 * tries at once: every caller gets a real connection attempt within its deadline, and a dead
 * engine still fails fast (a refused connection is seen in milliseconds).
 *
 * It dials `dial`, the target the allow list checked (IP addresses or a real socket path; see
 * endpoint-allow-list.ts), never `endpoint` itself; `repoint` moves it to a newly checked target.
 */
export class EngineChannel {
  private current: Generation;
  private closed = false;

  constructor(
    readonly endpoint: string,
    private readonly credentials: ChannelCredentials,
    private target: DialTarget,
    /** The largest answer read at all (AnswerLimits.maxBytes): larger ones fail on their length prefix. */
    private readonly maxAnswerBytes = OPTIONS["grpc.max_receive_message_length"],
  ) {
    this.current = this.dial();
  }

  /** Dials `target` from now on, when it differs from the current one (calls under way finish). */
  repoint(target: DialTarget): void {
    if (target.target === this.target.target && JSON.stringify(target.options) === JSON.stringify(this.target.options)) return;
    this.target = target;
    this.reset();
  }

  get engine(): E.ContextEngineServiceClient {
    return this.current.engine;
  }

  get health(): Client {
    return this.current.health;
  }

  /**
   * Resolves once the channel is READY; rejects with EngineUnreachableError when the connection
   * attempt fails, or DeadlineExceededError when `deadlineMs` passes while connecting.
   */
  connect(deadlineMs: number): Promise<void> {
    if (this.closed) return Promise.reject(new EngineUnreachableError(`${this.endpoint}: the channel is closed`));
    let state = this.current.channel.getConnectivityState(true);
    if (state === connectivityState.READY) return Promise.resolve();
    if (state === connectivityState.TRANSIENT_FAILURE) {
      // No rate limit is needed: callers that come while the fresh attempt is under way share it
      // (they see CONNECTING), and the router stops calling an engine after its first failure
      // (quarantine), so while an engine is down this happens about once per health check.
      this.redial();
      state = this.current.channel.getConnectivityState(true);
    }
    const deadline = Number.isFinite(deadlineMs) ? deadlineMs : Date.now() + DEFAULT_CONNECT_MS;
    return this.awaitOutcome(state, deadline);
  }

  /** Waits for the connection attempt under way (IDLE/CONNECTING) to succeed or fail. */
  private awaitOutcome(from: connectivityState, deadlineMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const watch = (gen: Generation, state: connectivityState): void => {
        try {
          gen.channel.watchConnectivityState(state, deadlineMs, (err) => {
            if (err) return reject(new DeadlineExceededError(`${this.endpoint}: deadline exceeded while connecting`));
            const next = gen.channel.getConnectivityState(true);
            if (next === connectivityState.READY) return resolve();
            if (next === connectivityState.TRANSIENT_FAILURE) {
              return reject(new EngineUnreachableError(`${this.endpoint}: cannot connect (connection attempt failed)`));
            }
            if (next === connectivityState.SHUTDOWN) return onShutdown(gen);
            watch(gen, next);
          });
        } catch {
          onShutdown(gen); // watchConnectivityState throws on a channel already shut down
        }
      };
      // Replaced by a redial meanwhile: wait on the new channel; closed for good: give up.
      const onShutdown = (gen: Generation): void => {
        if (this.closed || gen === this.current) reject(new EngineUnreachableError(`${this.endpoint}: the channel is closed`));
        else watch(this.current, this.current.channel.getConnectivityState(true));
      };
      watch(this.current, from);
    });
  }

  private dial(): Generation {
    const { target, options } = this.target;
    const channel = new Channel(target, this.credentials, { ...OPTIONS, ...options, "grpc.max_receive_message_length": this.maxAnswerBytes });
    return {
      channel,
      engine: new EngineClient(target, this.credentials, { channelOverride: channel }),
      health: new HealthClient(target, this.credentials, { channelOverride: channel }),
    };
  }

  /**
   * Drops the connection for a fresh one (unless closed). For a connection that may be dead
   * without either side having been told — a network partition drops packets silently: the
   * socket stays "established", every call on it runs into its deadline, and once the link is
   * back TCP resumes only when its retransmission backoff next fires (after a 30 s partition
   * about 25 s later; up to 2 min). Calls already under way finish on the old connection.
   */
  reset(): void {
    if (!this.closed) this.redial();
  }

  /** A channel in TRANSIENT_FAILURE has no connection and no call in flight: swap it for a fresh one. */
  private redial(): void {
    const old = this.current;
    this.current = this.dial();
    old.channel.close();
  }

  close(): void {
    this.closed = true;
    this.current.channel.close();
  }
}
