/**
 * The floor for one gRPC hop: a bare grpc-js server in its own process. Two methods, neither of
 * which decodes its request or does any work:
 * - `/bench.Echo/Echo` sends the request bytes back as they came (gateway_overhead's echo);
 * - `/contextd.v1.SessionService/AppendMessages` answers every request with the same small encoded
 *   AppendMessagesResponse (one entry id and one token count): what a runtime's append costs the
 *   runtime and one hop when the server does nothing at all — the floor for append_throughput's
 *   one-message calls, measured with the very client the runtime uses.
 * Prints `{"event":"listening","address"}` on stdout. Listens on BENCH_ECHO_LISTEN (default 127.0.0.1:0).
 */
import { Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";
import { AppendMessagesResponse } from "../../src/contract/gen/contextd/v1/session.js";

const identity = (b: Buffer) => b;
const raw = (path: string) => ({
  path,
  requestStream: false,
  responseStream: false,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
});
const service = { echo: raw("/bench.Echo/Echo"), appendMessages: raw("/contextd.v1.SessionService/AppendMessages") };
/** An id as long as contextd's (16 hex digits) and a typical count. */
const APPENDED = Buffer.from(AppendMessagesResponse.encode({ entryIds: ["0123456789abcdef"], tokenCounts: [430], replayed: false, heldIndexes: [] }).finish());

const server = new Server({ "grpc.max_receive_message_length": 64 * 1024 * 1024, "grpc.max_send_message_length": 64 * 1024 * 1024 });
server.addService(service, {
  echo: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => callback(null, call.request),
  appendMessages: (_call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => callback(null, APPENDED),
});
const listen = process.env.BENCH_ECHO_LISTEN || "127.0.0.1:0";
server.bindAsync(listen, ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    process.stderr.write(`echo-server: cannot listen on ${listen}: ${err.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`${JSON.stringify({ event: "listening", address: `${listen.slice(0, listen.lastIndexOf(":"))}:${port}`, pid: process.pid })}\n`);
});
const parent = process.ppid;
setInterval(() => {
  try {
    process.kill(parent, 0);
  } catch {
    process.exit(0);
  }
}, 1000).unref();
process.on("SIGTERM", () => server.tryShutdown(() => process.exit(0)));
