import { fileURLToPath } from "node:url";
import path from "node:path";
import type { Server } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";
import { HealthImplementation, protoPath as healthProtoPath } from "grpc-health-check";

/** The repository's proto/ directory (also shipped in the package): the source of truth. */
export const PROTO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../proto");

const CONTRACT_FILES = ["contextd/v1/session.proto", "contextd/v1/registry.proto", "contextd/v1/host.proto", "contextd/v1/engine.proto"];

/**
 * grpc.health.v1 (so load balancers, grpcurl and `contextctl health` can probe) and server
 * reflection (so grpcurl and Postman can discover the services without the .proto files).
 */
export function addStandardServices(server: Server, serviceNames: string[]): HealthImplementation {
  const health = new HealthImplementation(Object.fromEntries(["", ...serviceNames].map((s) => [s, "NOT_SERVING"])));
  health.addToServer(server);
  const definitions = loadSync([...CONTRACT_FILES.map((f) => path.join(PROTO_DIR, f)), healthProtoPath], {
    includeDirs: [PROTO_DIR],
    keepCase: true,
  });
  new ReflectionService(definitions).addToServer(server);
  return health;
}

export function setServing(health: HealthImplementation, serviceNames: string[], serving: boolean): void {
  for (const name of ["", ...serviceNames]) health.setStatus(name, serving ? "SERVING" : "NOT_SERVING");
}
