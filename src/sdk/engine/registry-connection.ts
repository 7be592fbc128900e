import type { ChannelCredentials } from "@grpc/grpc-js";
import { RegistryServiceClient } from "../../contract/gen/contextd/v1/registry.js";
import { CHANNEL_OPTIONS, callUnary, type ClientOptions } from "../grpc-call.js";

/** A call was refused because the Registrar is stopping: the caller just ends, it is no failure. */
export class Stopped extends Error {}

/**
 * The Registrar's channel to contextd's RegistryService. Calls carry the owner token, and stop()
 * cancels the ones in flight, so that stopping an engine does not wait out a registration deadline.
 */
export class RegistryConnection {
  readonly client: RegistryServiceClient;
  private readonly options: ClientOptions;
  private readonly inflight = new Set<AbortController>();
  private stopped = false;

  constructor(registry: string, credentials: ChannelCredentials, ownerToken: string | undefined) {
    this.client = new RegistryServiceClient(registry, credentials, CHANNEL_OPTIONS);
    this.options = { address: registry, token: ownerToken || undefined, credentials };
  }

  /** One unary call. After stop() it throws Stopped, unless it is part of stopping (`duringStop`). */
  async call<Req, Res>(method: Parameters<typeof callUnary<Req, Res>>[1], req: Req, timeoutMs: number, duringStop = false): Promise<Res> {
    if (this.stopped && !duringStop) throw new Stopped();
    const controller = new AbortController();
    this.inflight.add(controller);
    try {
      return await callUnary(this.client, method, req, this.options, { timeoutMs, signal: controller.signal });
    } finally {
      this.inflight.delete(controller);
    }
  }

  /** Refuses further calls (but those made `duringStop`) and cancels the calls in flight. */
  stop(): void {
    this.stopped = true;
    for (const c of this.inflight) c.abort();
  }

  close(): void {
    this.client.close();
  }
}
