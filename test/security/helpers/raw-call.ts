/**
 * Calls any method of a generated service definition by its path, with an optional bearer token,
 * and reports the outcome as a status name — so a test can drive every RPC of a service from one
 * table without a typed client per service.
 */
import { Metadata, status, type Client, type ServiceError } from "@grpc/grpc-js";

export interface MethodDef {
  path: string;
  responseStream: boolean;
  requestSerialize: (value: never) => Buffer;
  responseDeserialize: (bytes: Buffer) => unknown;
}

export interface Outcome {
  /** `OK` or the gRPC status name, e.g. `UNAUTHENTICATED`. */
  code: string;
  details: string;
}

export const statusName = (code: number): string => status[code] ?? String(code);

/**
 * A unary call's status; for a server stream, OK as soon as the first message arrives (the stream
 * is then cancelled), else the status it ended with. `authorization` replaces the
 * `Bearer <token>` header with a value of the caller's own (a malformed one).
 */
export function rawCall(client: Client, method: MethodDef, request: unknown, token?: string, timeoutMs = 10_000, authorization?: string): Promise<Outcome> {
  const md = new Metadata();
  if (authorization !== undefined) md.set("authorization", authorization);
  else if (token !== undefined) md.set("authorization", `Bearer ${token}`);
  const serialize = method.requestSerialize as (value: unknown) => Buffer;
  const deadline = Date.now() + timeoutMs;
  const failed = (err: ServiceError): Outcome => ({ code: statusName(err.code), details: err.details });
  if (!method.responseStream) {
    return new Promise((resolve) =>
      client.makeUnaryRequest(method.path, serialize, method.responseDeserialize, request, md, { deadline }, (err) =>
        resolve(err ? failed(err) : { code: "OK", details: "" }),
      ),
    );
  }
  return new Promise((resolve) => {
    const call = client.makeServerStreamRequest(method.path, serialize, method.responseDeserialize, request, md, { deadline });
    let settled = false;
    const settle = (o: Outcome): void => {
      if (settled) return;
      settled = true;
      resolve(o);
    };
    call.on("data", () => {
      settle({ code: "OK", details: "first message received" });
      call.cancel();
    });
    call.on("error", (err: ServiceError) => settle(failed(err)));
    call.on("status", (s: { code: number; details: string }) => settle({ code: statusName(s.code), details: s.details }));
  });
}
