import path from "node:path";
import { credentials, loadPackageDefinition, type ClientDuplexStream } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

const REFLECTION_PROTO = path.join(REPO_ROOT, "node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto");

interface ReflectionResponse {
  listServicesResponse?: { service: { name: string }[] };
  fileDescriptorResponse?: { fileDescriptorProto: Buffer[] };
}

/** Server reflection is what grpcurl and Postman use to discover the API without the .proto files. */
describe("server reflection", () => {
  let contextd: ContextdProcess;
  let stream: ClientDuplexStream<object, ReflectionResponse>;

  beforeAll(async () => {
    contextd = await startContextd();
    const pkg = loadPackageDefinition(loadSync(REFLECTION_PROTO, { keepCase: false })) as unknown as {
      grpc: {
        reflection: {
          v1: { ServerReflection: new (address: string, creds: ReturnType<typeof credentials.createInsecure>) => { serverReflectionInfo(): typeof stream } };
        };
      };
    };
    const client = new pkg.grpc.reflection.v1.ServerReflection(contextd.address, credentials.createInsecure());
    stream = client.serverReflectionInfo();
  });
  afterAll(async () => {
    stream?.end();
    await contextd?.cleanup();
  });

  const ask = (request: object) =>
    new Promise<ReflectionResponse>((resolve, reject) => {
      stream.once("data", resolve);
      stream.once("error", reject);
      stream.write(request);
    });

  it("lists the contextd services and grpc.health.v1", async () => {
    const res = await ask({ listServices: "" });
    const names = res.listServicesResponse!.service.map((s) => s.name);
    for (const name of [
      "contextd.v1.SessionService",
      "contextd.v1.RegistryService",
      "contextd.v1.HostService",
      "contextd.v1.ContextEngineService",
      "grpc.health.v1.Health",
    ]) {
      expect(names).toContain(name);
    }
  });

  it("serves the file descriptor of a service (what grpcurl describe needs)", async () => {
    const res = await ask({ fileContainingSymbol: "contextd.v1.SessionService" });
    expect(res.fileDescriptorResponse!.fileDescriptorProto.length).toBeGreaterThan(0);
    expect(Buffer.concat(res.fileDescriptorResponse!.fileDescriptorProto).toString("latin1")).toContain("AppendMessages");
  });
});
