/**
 * The floor for one gRPC hop: a bare grpc-js server in its own process whose one method,
 * `/bench.Echo/Echo`, sends the request bytes back as they came (no decoding, no work). Prints
 * `{"event":"listening","address"}` on stdout. Listens on BENCH_ECHO_LISTEN (default 127.0.0.1:0).
 */
import { Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";

const identity = (b: Buffer) => b;
const service = {
  echo: {
    path: "/bench.Echo/Echo",
    requestStream: false,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
};

const server = new Server({ "grpc.max_receive_message_length": 64 * 1024 * 1024, "grpc.max_send_message_length": 64 * 1024 * 1024 });
server.addService(service, {
  echo: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => callback(null, call.request),
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
