/**
 * grpc.health.v1 and server reflection, called with an optional bearer token and without
 * generated stubs: both must answer anyone (load balancers and grpcurl carry no contextd token).
 */
import { Client, credentials, Metadata, type ChannelCredentials } from "@grpc/grpc-js";

/** `Check` of service "": the empty request; field 1 of the answer is the status (1 SERVING). */
export function healthStatus(address: string, token?: string, creds: ChannelCredentials = credentials.createInsecure()): Promise<string> {
  const client = new Client(address, creds);
  const md = new Metadata();
  if (token !== undefined) md.set("authorization", `Bearer ${token}`);
  const names = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"];
  return new Promise<string>((resolve, reject) =>
    client.makeUnaryRequest(
      "/grpc.health.v1.Health/Check",
      () => Buffer.alloc(0),
      (b: Buffer) => (b.length >= 2 && b[0] === 0x08 ? (names[b[1]!] ?? "UNKNOWN") : "UNKNOWN"),
      {},
      md,
      { deadline: Date.now() + 5_000 },
      (err, res) => {
        client.close();
        if (err) reject(err);
        else resolve(res!);
      },
    ),
  );
}

/**
 * The raw answer of ServerReflectionInfo to `list_services` (field 7, an empty string), as latin1
 * text: the service names appear in it verbatim.
 */
export function reflectionServices(address: string, version: "v1" | "v1alpha", token?: string): Promise<string> {
  const client = new Client(address, credentials.createInsecure());
  const md = new Metadata();
  if (token !== undefined) md.set("authorization", `Bearer ${token}`);
  return new Promise<string>((resolve, reject) => {
    const call = client.makeBidiStreamRequest(
      `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
      () => Buffer.from([0x3a, 0x00]),
      (b: Buffer) => b,
      md,
      { deadline: Date.now() + 5_000 },
    );
    call.once("data", (b: Buffer) => {
      resolve(b.toString("latin1"));
      call.cancel();
      client.close();
    });
    call.once("error", (err) => {
      client.close();
      reject(err);
    });
    call.write({});
  });
}
