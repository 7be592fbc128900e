/**
 * TLS and mTLS with certificates made in the test (openssl): contextd serving TLS answers a client
 * that trusts its CA and no plaintext client; with mTLS it also turns away clients without a
 * certificate or with one from another CA, and a client certificate whose CN is an owner proves
 * that owner — registration without a bearer token. And the registry dials engines over TLS
 * (`engines.tls`), refusing an engine that serves plaintext.
 */
import { Client, credentials, type ChannelCredentials } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as R from "../../src/contract/gen/contextd/v1/registry.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startHostTokenEngine, type HostTokenEngine } from "./helpers/host-token-engine.js";
import { healthStatus } from "./helpers/public-services.js";
import { rawCall, type MethodDef } from "./helpers/raw-call.js";
import { createPki, type CertFiles, type Pki } from "./helpers/test-pki.js";

const REGISTER = R.RegistryServiceService.registerEngine as unknown as MethodDef;

let pki: Pki;
let ca: CertFiles;
let otherCa: CertFiles;
let server: CertFiles;

beforeAll(() => {
  pki = createPki();
  ca = pki.ca("contextd-test-ca");
  otherCa = pki.ca("someone-elses-ca");
  server = pki.leaf(ca, "contextd", "server");
});
afterAll(() => pki?.remove());

const trusting = (client?: CertFiles, root = ca): ChannelCredentials =>
  credentials.createSsl(pki.read(root.cert), client ? pki.read(client.key) : null, client ? pki.read(client.cert) : null);

/** Health over `creds`: "SERVING", or the gRPC status name the connection failed with. */
async function reach(address: string, creds: ChannelCredentials): Promise<string> {
  try {
    return await healthStatus(address, undefined, creds);
  } catch (err) {
    return `failed: ${String((err as { code?: number }).code)}`;
  }
}
const FAILED_UNAVAILABLE = "failed: 14";

describe("contextd serving TLS", () => {
  let contextd: ContextdProcess;
  beforeAll(async () => {
    contextd = await startContextd({ config: { tls: { cert_file: server.cert, key_file: server.key } } });
  });
  afterAll(async () => contextd?.cleanup());

  it("TLS: a client trusting contextd's CA gets through; plaintext and untrusting clients do not", async () => {
    expect(await reach(contextd.address, trusting())).toBe("SERVING");
    expect(await reach(contextd.address, credentials.createInsecure())).toBe(FAILED_UNAVAILABLE);
    expect(await reach(contextd.address, trusting(undefined, otherCa))).toBe(FAILED_UNAVAILABLE);
  });
});

describe("contextd requiring client certificates (mTLS)", () => {
  let contextd: ContextdProcess;
  let engine: HostTokenEngine;
  let acme: CertFiles;
  let stranger: CertFiles;

  beforeAll(async () => {
    acme = pki.leaf(ca, "acme", "client");
    stranger = pki.leaf(otherCa, "acme", "client");
    contextd = await startContextd({
      config: {
        tls: { cert_file: server.cert, key_file: server.key, client_ca_file: ca.cert, require_client_cert: true },
        auth: { required: true, owners: { acme: { token_env: "TLS_ACME" }, globex: { token_env: "TLS_GLOBEX" } } },
      },
      env: { TLS_ACME: "unused-acme-token-0123456789", TLS_GLOBEX: "unused-globex-token-0123456789" },
    });
    // Serves plaintext and does not register itself: the test registers it with its certificate.
    engine = await startHostTokenEngine({ engineId: "cert-owned" });
  });
  afterAll(async () => {
    await engine?.stop();
    await contextd?.cleanup();
  });

  it("mTLS: only a certificate from the configured client CA gets through", async () => {
    expect(await reach(contextd.address, trusting(acme))).toBe("SERVING");
    expect(await reach(contextd.address, trusting())).toBe(FAILED_UNAVAILABLE);
    expect(await reach(contextd.address, trusting(stranger))).toBe(FAILED_UNAVAILABLE);
    expect(await reach(contextd.address, credentials.createInsecure())).toBe(FAILED_UNAVAILABLE);
  });

  it("mTLS: a client certificate whose CN is an owner registers that owner's engine without a bearer token, and proves no other owner", async () => {
    const client = new Client(contextd.address, trusting(acme));
    try {
      const register = (owner: string) =>
        R.RegisterEngineRequest.fromPartial({ engineId: "cert-owned", owner, endpoint: engine.address, allowSameOwnerRefresh: true });
      expect(await rawCall(client, REGISTER, register("acme"))).toEqual({ code: "OK", details: "" });
      const other = await rawCall(client, REGISTER, register("globex"));
      expect(other.code).toBe("UNAUTHENTICATED");
      expect(other.details).toContain("globex");
    } finally {
      client.close();
    }
  });
});

describe("the registry dialling engines over TLS (engines.tls)", () => {
  let contextd: ContextdProcess;
  let tlsEngine: HostTokenEngine;
  let plainEngine: HostTokenEngine;

  beforeAll(async () => {
    const engineCert = pki.leaf(ca, "engine", "server");
    contextd = await startContextd({ config: { engines: { tls: { ca_file: ca.cert } } } });
    [tlsEngine, plainEngine] = await Promise.all([
      startHostTokenEngine({ engineId: "tls-engine", registry: contextd.address, owner: "team", tls: engineCert }),
      startHostTokenEngine({ engineId: "plain-engine" }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([tlsEngine?.stop(), plainEngine?.stop()]);
    await contextd?.cleanup();
  });

  it("engines.tls: an engine serving TLS with a certificate from the CA is admitted; one serving plaintext is not", async () => {
    expect(await tlsEngine.registered).toMatchObject({ ok: true });
    const client = new Client(contextd.address, credentials.createInsecure());
    try {
      const res = R.RegisterEngineResponse.decode(
        await new Promise<Buffer>((resolve, reject) =>
          client.makeUnaryRequest(
            REGISTER.path,
            (v: R.RegisterEngineRequest) => REGISTER.requestSerialize(v as never),
            (b: Buffer) => b,
            R.RegisterEngineRequest.fromPartial({ engineId: "plain-engine", owner: "team", endpoint: plainEngine.address }),
            (err, b) => (err ? reject(err) : resolve(b!)),
          ),
        ),
      );
      expect(R.refusalToJSON(res.refusal)).toBe("REFUSAL_UNREACHABLE");
      expect(res.ok).toBe(false);
    } finally {
      client.close();
    }
  });
});
