import { status, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import { ContextdError } from "../../contract/errors.js";
import { ErrorReason } from "../../contract/gen/contextd/v1/errors.js";
import {
  CompleteRequest,
  DelegateCompactionRequest,
  HostServiceClient,
  HostServiceSearchTranscriptRequest,
  ReadTranscriptRequest,
  RewriteTranscriptEntriesRequest,
  type CompleteResponse,
  type DeepPartial,
  type DelegateCompactionResponse,
  type HostServiceSearchTranscriptResponse,
  type ReadTranscriptResponse,
  type RewriteTranscriptEntriesResponse,
} from "../../contract/gen/contextd/v1/host.js";
import type { HostContext, SessionRef, TranscriptEntry } from "../../contract/gen/contextd/v1/types.js";
import { CHANNEL_OPTIONS, callUnary } from "../grpc-call.js";
import { anySignal } from "./call-context.js";

/** Per host call: a shorter deadline than the engine call's, and/or an extra signal. */
export interface HostCallOptions {
  /** Upper bound for this host call; the call never outlives the engine call or the HostContext. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface ReadWholeTranscriptOptions extends HostCallOptions {
  /** Only the active view (the latest compaction entry, then the entries it keeps). */
  activeOnly?: boolean;
  /** Entries per page (the host caps it). Default 1000. */
  pageSize?: number;
}

/**
 * HostService, bound to the HostContext of the engine call in progress. Every call sends
 * `authorization: Bearer <HostContext.token>` and a deadline no later than the HostContext's
 * `expires_at_ms` and the engine call's own deadline, and is cancelled when the engine call is.
 *
 * Requests are partial objects; `session` defaults to the session of the engine call (when it has
 * one), which is the only session the token is valid for anyway.
 *
 * Failures reject with a {@link HostCallError} (a ContextdError carrying the host's gRPC status), so
 * an engine method that lets one propagate answers its caller with the same status.
 */
export interface HostClient {
  /** The host's address, from HostContext.endpoint. */
  readonly endpoint: string;
  /** When the HostContext token expires (epoch ms; 0 when the host did not say). */
  readonly expiresAtMs: number;
  /** One page of the transcript. */
  readTranscript(req?: DeepPartial<ReadTranscriptRequest>, opts?: HostCallOptions): Promise<ReadTranscriptResponse>;
  /** Every entry of the transcript (oldest first), following page tokens to the end. */
  readWholeTranscript(session?: DeepPartial<SessionRef>, opts?: ReadWholeTranscriptOptions): Promise<TranscriptEntry[]>;
  /** One page of a search of the session's whole history, compacted entries included (proto/contextd/v1/search.proto). */
  searchTranscript(req: DeepPartial<HostServiceSearchTranscriptRequest>, opts?: HostCallOptions): Promise<HostServiceSearchTranscriptResponse>;
  /** Replaces the content of message entries; the host keeps the previous revision. */
  rewriteTranscriptEntries(req: DeepPartial<RewriteTranscriptEntriesRequest>, opts?: HostCallOptions): Promise<RewriteTranscriptEntriesResponse>;
  /** Runs the host's native compaction; the host commits it under this engine's id. */
  delegateCompaction(req?: DeepPartial<DelegateCompactionRequest>, opts?: HostCallOptions): Promise<DelegateCompactionResponse>;
  /** An LLM completion through the host's summarizer model (FAILED_PRECONDITION when none is configured). */
  complete(req: DeepPartial<CompleteRequest>, opts?: HostCallOptions): Promise<CompleteResponse>;
}

/** A HostService call failed; `code` is the gRPC status the host (or the transport) answered. */
export class HostCallError extends ContextdError {
  static override readonly reason = ErrorReason.HOST_CALL_FAILED;
  constructor(
    code: status,
    readonly rpc: string,
    readonly details: string,
  ) {
    super(code, `HostService.${rpc}: ${details}`, { metadata: { rpc } });
  }
}

/** Used when neither the engine call nor the HostContext has a deadline. */
const FALLBACK_TIMEOUT_MS = 60_000;

/**
 * HostService clients get a connection of their own ("local subchannel pool"), not the one
 * grpc-js would share with the registration heartbeat to the same contextd: in a network partition
 * the heartbeat keeps writing into the dead connection, and after the link is back TCP resumes it
 * only when its retransmission backoff next fires (up to 2 min) — every host call on it would hang
 * to its deadline meanwhile. Engine calls do not reach an engine during a partition, so this one
 * carries no stuck data; and a host call that runs out of time drops it for a fresh one (`reset`).
 */
const HOST_CHANNEL_OPTIONS = { ...CHANNEL_OPTIONS, "grpc.use_local_subchannel_pool": 1 };

/** One channel per host endpoint, shared by every engine call; closed when the engine stops. */
export class HostChannels {
  private readonly clients = new Map<string, HostServiceClient>();

  constructor(private readonly credentials: ChannelCredentials) {}

  get(endpoint: string): HostServiceClient {
    let client = this.clients.get(endpoint);
    if (!client) {
      client = new HostServiceClient(endpoint, this.credentials, HOST_CHANNEL_OPTIONS);
      this.clients.set(endpoint, client);
    }
    return client;
  }

  /** Replaces `client` (if it is still the endpoint's) with a fresh connection at the next get; calls under way finish on it. */
  reset(endpoint: string, client: HostServiceClient): void {
    if (this.clients.get(endpoint) !== client) return;
    this.clients.delete(endpoint);
    client.close();
  }

  close(): void {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }
}

type Unary<Req, Res> = Parameters<typeof callUnary<Req, Res>>[1];

/** The HostClient of one engine call. */
export class BoundHostClient implements HostClient {
  readonly endpoint: string;
  readonly expiresAtMs: number;
  private readonly token: string;

  constructor(
    private readonly channels: HostChannels,
    host: HostContext,
    /** The engine call in progress: its cancellation, deadline, session, and the trace context its callbacks continue. */
    private readonly call: { signal: AbortSignal; deadlineMs: number; session?: SessionRef; trace?: Record<string, string> },
  ) {
    this.endpoint = host.endpoint;
    this.token = host.token;
    this.expiresAtMs = host.expiresAtMs;
  }

  readTranscript(req: DeepPartial<ReadTranscriptRequest> = {}, opts?: HostCallOptions): Promise<ReadTranscriptResponse> {
    const client = this.channels.get(this.endpoint);
    return this.invoke("ReadTranscript", client.readTranscript, ReadTranscriptRequest.fromPartial(this.withSession(req)), opts);
  }

  async readWholeTranscript(session?: DeepPartial<SessionRef>, opts: ReadWholeTranscriptOptions = {}): Promise<TranscriptEntry[]> {
    const entries: TranscriptEntry[] = [];
    const seen = new Set<string>();
    let pageToken = "";
    do {
      const page = await this.readTranscript(
        { session: session ?? this.call.session, pageSize: opts.pageSize ?? 1000, pageToken, activeOnly: opts.activeOnly ?? false },
        opts,
      );
      entries.push(...page.entries);
      pageToken = page.nextPageToken;
      if (pageToken && seen.has(pageToken)) {
        throw new HostCallError(status.INTERNAL, "ReadTranscript", `the host returned page token "${pageToken}" twice`);
      }
      seen.add(pageToken);
    } while (pageToken);
    return entries;
  }

  searchTranscript(req: DeepPartial<HostServiceSearchTranscriptRequest>, opts?: HostCallOptions): Promise<HostServiceSearchTranscriptResponse> {
    const client = this.channels.get(this.endpoint);
    return this.invoke("SearchTranscript", client.searchTranscript, HostServiceSearchTranscriptRequest.fromPartial(this.withSession(req)), opts);
  }

  rewriteTranscriptEntries(req: DeepPartial<RewriteTranscriptEntriesRequest>, opts?: HostCallOptions): Promise<RewriteTranscriptEntriesResponse> {
    const client = this.channels.get(this.endpoint);
    return this.invoke("RewriteTranscriptEntries", client.rewriteTranscriptEntries, RewriteTranscriptEntriesRequest.fromPartial(this.withSession(req)), opts);
  }

  delegateCompaction(req: DeepPartial<DelegateCompactionRequest> = {}, opts?: HostCallOptions): Promise<DelegateCompactionResponse> {
    const client = this.channels.get(this.endpoint);
    return this.invoke("DelegateCompaction", client.delegateCompaction, DelegateCompactionRequest.fromPartial(this.withSession(req)), opts);
  }

  complete(req: DeepPartial<CompleteRequest>, opts?: HostCallOptions): Promise<CompleteResponse> {
    const client = this.channels.get(this.endpoint);
    return this.invoke("Complete", client.complete, CompleteRequest.fromPartial(this.withSession(req)), opts);
  }

  private withSession<T extends { session?: DeepPartial<SessionRef> }>(req: T): T {
    return req.session || !this.call.session ? req : { ...req, session: this.call.session };
  }

  /** The effective deadline: the earliest of the engine call's, the HostContext's and the caller's bound. */
  deadlineFor(opts: HostCallOptions = {}): number {
    let deadline = this.call.deadlineMs;
    if (this.expiresAtMs > 0) deadline = Math.min(deadline, this.expiresAtMs);
    if (opts.timeoutMs !== undefined) deadline = Math.min(deadline, Date.now() + opts.timeoutMs);
    return Number.isFinite(deadline) ? deadline : Date.now() + FALLBACK_TIMEOUT_MS;
  }

  private async invoke<Req, Res>(rpc: string, method: Unary<Req, Res>, request: Req, opts: HostCallOptions = {}): Promise<Res> {
    const signal = opts.signal ? anySignal([this.call.signal, opts.signal]) : this.call.signal;
    if (signal.aborted) {
      const timedOut = (signal.reason as Error | undefined)?.name === "TimeoutError";
      throw new HostCallError(timedOut ? status.DEADLINE_EXCEEDED : status.CANCELLED, rpc, "not sent: the engine call already ended");
    }
    const remaining = this.deadlineFor(opts) - Date.now();
    if (remaining <= 0) {
      const expired = this.expiresAtMs > 0 && this.expiresAtMs <= Date.now();
      throw new HostCallError(status.DEADLINE_EXCEEDED, rpc, expired ? "not sent: the HostContext has expired" : "not sent: no time left before the deadline");
    }
    const client = this.channels.get(this.endpoint);
    try {
      return await callUnary(
        client,
        method,
        request,
        { address: this.endpoint, token: this.token || undefined },
        { timeoutMs: remaining, signal, trace: this.call.trace },
      );
    } catch (err) {
      const e = err as Partial<ServiceError>;
      // No answer in time: the host may be busy, or the connection dead in a partition (HOST_CHANNEL_OPTIONS).
      if (e.code === status.DEADLINE_EXCEEDED) this.channels.reset(this.endpoint, client);
      if (typeof e.code === "number") throw new HostCallError(e.code, rpc, e.details || e.message || "failed");
      throw err;
    }
  }
}
