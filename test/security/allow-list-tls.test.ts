/**
 * The allow-list fix (issue 12) dials a name's checked IP addresses instead of the name; TLS to an
 * engine (engines.tls) must still verify the engine's certificate against the name it registered.
 * A real TLS engine process (certificate for DNS:localhost, IP:127.0.0.1) reached through the
 * engine built from a stored registration, as contextd builds it.
 */
import { credentials } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineInfo } from "../../src/contract/gen/contextd/v1/engine.js";
import { restoredEngine } from "../../src/registry/admission.js";
import { DEFAULT_ANSWER_LIMITS } from "../../src/registry/answer-limits.js";
import { EndpointAllowList } from "../../src/registry/endpoint-allow-list.js";
import { startHostTokenEngine, type HostTokenEngine } from "./helpers/host-token-engine.js";
import { createPki, type Pki } from "./helpers/test-pki.js";

describe("finding: allow-list bypasses — dialling checked addresses keeps TLS verifying the name", () => {
  let pki: Pki;
  let engine: HostTokenEngine;
  let tls: ReturnType<typeof credentials.createSsl>;
  let port: number;

  beforeAll(async () => {
    pki = createPki();
    const ca = pki.ca("allow-list-tls-ca");
    engine = await startHostTokenEngine({ engineId: "tls-named", tls: pki.leaf(ca, "engine", "server") });
    port = Number(engine.address.split(":").pop());
    tls = credentials.createSsl(pki.read(ca.cert));
  });
  afterAll(async () => {
    await engine?.stop();
    pki?.remove();
  });

  const remoteAt = (endpoint: string, allowList: EndpointAllowList) =>
    restoredEngine(
      {
        engineId: "tls-named",
        instanceId: endpoint,
        locality: undefined,
        owner: "team",
        endpoint,
        info: EngineInfo.fromPartial({ id: "tls-named", name: "tls-named" }),
        protocolVersion: 1,
        registeredAtMs: 0,
      },
      { credentials: tls, answerLimits: DEFAULT_ANSWER_LIMITS },
      allowList,
    ).remote!;

  it("localhost (resolved by the system, dialled at 127.0.0.1) verifies against DNS:localhost", async () => {
    const remote = remoteAt(`localhost:${port}`, new EndpointAllowList(["localhost", "127.0.0.1", "::1"]));
    try {
      expect((await remote.getInfo(5_000))?.id).toBe("tls-named");
    } finally {
      remote.close();
    }
  });

  it("another name resolving to the same address is not verified by that certificate", async () => {
    const remote = remoteAt(`engine.test:${port}`, new EndpointAllowList(["engine.test", "127.0.0.1"], async () => [{ address: "127.0.0.1", family: 4 }]));
    try {
      expect(await remote.checkHealth(5_000)).toBe("UNREACHABLE");
      await expect(remote.getInfo(5_000)).rejects.toThrow();
    } finally {
      remote.close();
    }
  });
});
