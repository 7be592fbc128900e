/**
 * Promise clients for the benchmarks: SessionService (the package's own runtime client),
 * RegistryService, ContextEngineService (to call a sidecar directly), and the bare echo service.
 */
import { credentials, makeGenericClientConstructor, Metadata, type Client, type ServiceError } from "@grpc/grpc-js";
import * as E from "../../src/contract/gen/contextd/v1/engine.js";
import * as R from "../../src/contract/gen/contextd/v1/registry.js";
import type { Message } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";

export { ContextdClient };

const CHANNEL_OPTIONS = {
  "grpc.max_receive_message_length": 64 * 1024 * 1024,
  "grpc.max_send_message_length": 64 * 1024 * 1024,
};

type Unary<Req, Res> = (req: Req, md: Metadata, opts: { deadline: Date }, cb: (err: ServiceError | null, res: Res) => void) => unknown;

function call<Req, Res>(client: Client, method: Unary<Req, Res>, req: Req, timeoutMs = 30_000): Promise<Res> {
  return new Promise((resolve, reject) => {
    method.call(client, req, new Metadata(), { deadline: new Date(Date.now() + timeoutMs) }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

export function sessionClient(address: string): ContextdClient {
  return new ContextdClient({ address, timeoutMs: 60_000 });
}

export function registryClient(address: string) {
  const c = new R.RegistryServiceClient(address, credentials.createInsecure(), CHANNEL_OPTIONS);
  return {
    getEngine: (engineId: string) => call(c, c.getEngine, { engineId }, 5_000).then((r) => r.engine),
    listEngines: () => call(c, c.listEngines, {}, 5_000).then((r) => r.engines),
    clearQuarantine: (engineId: string) => call(c, c.clearQuarantine, { engineId, instanceId: "" }, 5_000),
    close: () => c.close(),
  };
}
export type RegistryClient = ReturnType<typeof registryClient>;

export function engineClient(address: string) {
  const c = new E.ContextEngineServiceClient(address, credentials.createInsecure(), CHANNEL_OPTIONS);
  return {
    /** `req` is sent as it is: build it once with `fromPartial` outside a timed loop. */
    assemble: (req: E.ContextEngineServiceAssembleRequest) => call(c, c.assemble, req),
    close: () => c.close(),
  };
}

/**
 * The bare echo: the payload is a list of messages encoded with the same ts-proto codec the
 * contract uses (as an Assemble response); the server (bench/engines/echo-server.ts) sends the
 * request bytes back without decoding them; the client decodes the answer.
 */
export const ECHO_SERVICE = {
  echo: {
    path: "/bench.Echo/Echo",
    requestStream: false,
    responseStream: false,
    requestSerialize: (m: E.ContextEngineServiceAssembleResponse) => Buffer.from(E.ContextEngineServiceAssembleResponse.encode(m).finish()),
    requestDeserialize: (b: Buffer) => E.ContextEngineServiceAssembleResponse.decode(b),
    responseSerialize: (m: E.ContextEngineServiceAssembleResponse) => Buffer.from(E.ContextEngineServiceAssembleResponse.encode(m).finish()),
    responseDeserialize: (b: Buffer) => E.ContextEngineServiceAssembleResponse.decode(b),
  },
} as const;

export function echoPayload(messages: Message[]): E.ContextEngineServiceAssembleResponse {
  return E.ContextEngineServiceAssembleResponse.fromPartial({ messages });
}

const EchoClient = makeGenericClientConstructor(ECHO_SERVICE, "Echo");

export function echoClient(address: string) {
  const c = new EchoClient(address, credentials.createInsecure(), CHANNEL_OPTIONS) as unknown as Client & {
    echo: Unary<E.ContextEngineServiceAssembleResponse, E.ContextEngineServiceAssembleResponse>;
  };
  return {
    /** `payload` is sent as it is: build it once with {@link echoPayload} outside a timed loop. */
    echo: (payload: E.ContextEngineServiceAssembleResponse) => call(c, c.echo, payload),
    close: () => c.close(),
  };
}

/** Polls `check` every `everyMs` until it returns a truthy value; throws after `timeoutMs`. */
export async function until<T>(check: () => Promise<T | undefined | false | null>, timeoutMs = 30_000, everyMs = 50): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < end) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${last instanceof Error ? last.message : String(last)}` : ""}`);
}
