import { credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import * as R from "../../src/contract/gen/contextd/v1/registry.js";
import * as H from "../../src/contract/gen/contextd/v1/host.js";

type Unary<Req, Res> = (req: Req, md: Metadata, opts: { deadline: Date }, cb: (err: ServiceError | null, res: Res) => void) => unknown;

function call<Req, Res>(client: object, method: Unary<Req, Res>, req: Req, token?: string, timeoutMs = 10_000): Promise<Res> {
  const md = new Metadata();
  if (token) md.set("authorization", `Bearer ${token}`);
  return new Promise((resolve, reject) => {
    method.call(client, req, md, { deadline: new Date(Date.now() + timeoutMs) }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

/** A small promise wrapper over RegistryService for tests, with an optional bearer token. */
export function registryClient(address: string) {
  const c = new R.RegistryServiceClient(address, credentials.createInsecure());
  return {
    raw: c,
    register: (req: R.DeepPartial<R.RegisterEngineRequest>, token?: string) => call(c, c.registerEngine, R.RegisterEngineRequest.fromPartial(req), token),
    deregister: (engineId: string, token?: string, instanceId = "") => call(c, c.deregisterEngine, { engineId, instanceId }, token),
    list: (token?: string) => call(c, c.listEngines, {}, token),
    get: (engineId: string, token?: string) => call(c, c.getEngine, { engineId }, token).then((r) => r.engine!),
    isolate: (engineId: string, reason: string, token?: string, instanceId = "") => call(c, c.quarantineEngine, { engineId, reason, instanceId }, token),
    clear: (engineId: string, token?: string, instanceId = "") => call(c, c.clearQuarantine, { engineId, instanceId }, token),
    close: () => c.close(),
  };
}

/** HostService as an engine would call it, with a HostContext token. */
export function hostClient(address: string) {
  const c = new H.HostServiceClient(address, credentials.createInsecure());
  return {
    readTranscript: (req: H.DeepPartial<H.ReadTranscriptRequest>, token: string) => call(c, c.readTranscript, H.ReadTranscriptRequest.fromPartial(req), token),
    close: () => c.close(),
  };
}

export async function refusal(p: Promise<unknown>): Promise<ServiceError> {
  try {
    await p;
  } catch (err) {
    return err as ServiceError;
  }
  throw new Error("expected the call to be refused");
}

/** Polls `check` until it returns truthy (or throws after `timeoutMs`). */
export async function eventually<T>(check: () => Promise<T | undefined | false>, timeoutMs = 15_000, everyMs = 100): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < until) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${String(last)}` : ""}`);
}
