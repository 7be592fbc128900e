/**
 * Secrets never reach the logs: contextd at log level trace, every role exercised — runtime calls,
 * refused calls with a wrong token, an owner's engine registering (SDK) and checking in, a managed
 * sidecar with its per-run owner token, an operator quarantining, HostService with a live and an
 * ended host token — and then contextd's whole stdout and stderr (the sidecar's output folded in)
 * holds none of those tokens: not verbatim, not as the sha256 hex the config would hold, not base64.
 *
 * And the Authenticator compares a presented token with every configured credential, matching or
 * not (timingSafeEqual on digests, no early exit), so the time a check takes says nothing about
 * which credential, if any, the token is close to.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client, credentials, Metadata } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import * as H from "../../src/contract/gen/contextd/v1/host.js";
import * as R from "../../src/contract/gen/contextd/v1/registry.js";
import * as S from "../../src/contract/gen/contextd/v1/session.js";
import { Authenticator } from "../../src/server/auth.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { hostTokenEngineEntry, startHostTokenEngine, type HostTokenEngine } from "./helpers/host-token-engine.js";
import { rawCall, statusName, type MethodDef } from "./helpers/raw-call.js";

// Counts the comparisons the Authenticator makes; the real function still compares.
vi.mock("node:crypto", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:crypto")>();
  return { ...real, timingSafeEqual: vi.fn(real.timingSafeEqual) };
});

const secret = (): string => randomBytes(24).toString("base64url");
const TOKENS = { acme: secret(), operator: secret(), runtime: secret(), wrong: secret() };
const HOSTED = { sessionId: "leak-hosted", agentId: "host-agent" };
const m = (service: object, name: string): MethodDef => (service as Record<string, MethodDef>)[name]!;

/** The forms in which a token could leak: itself, the sha256 hex a config holds, base64 of either. */
function leakForms(token: string): string[] {
  const hex = createHash("sha256").update(token, "utf8").digest("hex");
  const b = Buffer.from(token, "utf8");
  return [token, hex, b.toString("base64"), b.toString("base64url"), Buffer.from(hex, "hex").toString("base64")];
}

describe("tokens are never logged", () => {
  let contextd: ContextdProcess;
  let engine: HostTokenEngine;
  let runToken: string;
  const hostTokens: string[] = [];
  let logs = "";

  beforeAll(async () => {
    const entry = await hostTokenEngineEntry();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-leak-"));
    const runTokenFile = path.join(dir, "run-token");
    contextd = await startContextd({
      config: {
        log_level: "trace",
        auth: {
          required: true,
          owners: { acme: { token_env: "LEAK_ACME", engines: ["leak-engine"] } },
          operators: [{ token_env: "LEAK_OPERATOR", name: "ops" }],
          runtimes: [{ token_env: "LEAK_RUNTIME", name: "runtime" }],
        },
        slots: { agents: { [HOSTED.agentId]: "leak-engine" } },
        engines: {
          timeouts: { assemble: "60s" },
          managed: [
            {
              id: "leak-sidecar",
              owner: "sidecars",
              command: [process.execPath, entry, "--engine-id", "leak-sidecar", "--managed", "--owner-token-file", runTokenFile],
              env: { CONTEXTD_LOG_LEVEL: "trace" },
            },
          ],
        },
      },
      env: { LEAK_ACME: TOKENS.acme, LEAK_OPERATOR: TOKENS.operator, LEAK_RUNTIME: TOKENS.runtime },
    });
    // The sidecar registers with its run token, which it wrote to the file before.
    await contextd.waitForLog((l) => l.msg === "engine registered" && l.engineId === "leak-sidecar", 30_000);
    runToken = fs.readFileSync(runTokenFile, "utf8");
    fs.rmSync(dir, { recursive: true, force: true });
    expect(runToken.length).toBeGreaterThan(20);

    engine = await startHostTokenEngine({ engineId: "leak-engine", registry: contextd.address, owner: "acme", ownerToken: TOKENS.acme, logLevel: "trace" });
    expect(await engine.registered).toMatchObject({ ok: true });

    const client = new Client(contextd.address, credentials.createInsecure());
    const runtime = new ContextdClient({ address: contextd.address, token: TOKENS.runtime, timeoutMs: 60_000 });
    const call = async (service: object, name: string, req: unknown, token: string | undefined, expected: string) =>
      expect((await rawCall(client, m(service, name), req, token)).code, `${name} with ${expected}`).toBe(expected);
    try {
      // Refused: a wrong token at every service, the runtime's at the registry's owner check.
      await call(S.SessionServiceService, "getSession", S.GetSessionRequest.fromPartial({ session: HOSTED }), TOKENS.wrong, "UNAUTHENTICATED");
      await call(
        R.RegistryServiceService,
        "registerEngine",
        R.RegisterEngineRequest.fromPartial({ engineId: "x", owner: "acme", endpoint: "127.0.0.1:1" }),
        TOKENS.wrong,
        "UNAUTHENTICATED",
      );
      await call(
        R.RegistryServiceService,
        "registerEngine",
        R.RegisterEngineRequest.fromPartial({ engineId: "x", owner: "acme", endpoint: "127.0.0.1:1" }),
        TOKENS.runtime,
        "PERMISSION_DENIED",
      );
      await call(
        R.RegistryServiceService,
        "quarantineEngine",
        R.QuarantineEngineRequest.fromPartial({ engineId: "leak-sidecar" }),
        TOKENS.wrong,
        "UNAUTHENTICATED",
      );
      await call(H.HostServiceService, "readTranscript", H.ReadTranscriptRequest.fromPartial({ session: HOSTED }), TOKENS.wrong, "UNAUTHENTICATED");
      // The run token, proving its own owner and (refused) another one.
      await call(R.RegistryServiceService, "getEngine", R.GetEngineRequest.fromPartial({ engineId: "leak-sidecar" }), runToken, "OK");
      await call(
        R.RegistryServiceService,
        "registerEngine",
        R.RegisterEngineRequest.fromPartial({ engineId: "x", owner: "acme", endpoint: "127.0.0.1:1" }),
        runToken,
        "PERMISSION_DENIED",
      );
      // The operator.
      await call(
        R.RegistryServiceService,
        "quarantineEngine",
        R.QuarantineEngineRequest.fromPartial({ engineId: "leak-sidecar", reason: "leak test" }),
        TOKENS.operator,
        "OK",
      );
      await call(R.RegistryServiceService, "clearQuarantine", R.ClearQuarantineRequest.fromPartial({ engineId: "leak-sidecar" }), TOKENS.operator, "OK");
      // The runtime, and the host token of the engine call it causes, live and then ended.
      await runtime.appendMessages({ session: HOSTED, messages: [user("hello")] });
      const assembled = runtime.assemble({ session: HOSTED, tokenBudget: 1000 });
      const host = await engine.nextHostContext();
      hostTokens.push(host.token);
      await call(H.HostServiceService, "readTranscript", H.ReadTranscriptRequest.fromPartial({ session: HOSTED }), host.token, "OK");
      await call(
        H.HostServiceService,
        "readTranscript",
        H.ReadTranscriptRequest.fromPartial({ session: { sessionId: "another" } }),
        host.token,
        "PERMISSION_DENIED",
      );
      await call(
        H.HostServiceService,
        "rewriteTranscriptEntries",
        H.RewriteTranscriptEntriesRequest.fromPartial({ session: HOSTED, rewrites: [{ entryId: "nope", message: user("x") }] }),
        host.token,
        "INVALID_ARGUMENT",
      );
      await call(H.HostServiceService, "complete", H.CompleteRequest.fromPartial({ session: HOSTED, system: "hi" }), host.token, "FAILED_PRECONDITION");
      await engine.release(host.token);
      await assembled;
      await call(H.HostServiceService, "readTranscript", H.ReadTranscriptRequest.fromPartial({ session: HOSTED }), host.token, "UNAUTHENTICATED");
      // A malformed authorization header with a token inside it (not "Bearer <token>").
      const malformed = await rawCall(
        client,
        m(S.SessionServiceService, "getSession"),
        S.GetSessionRequest.fromPartial({ session: HOSTED }),
        undefined,
        10_000,
        `Basic ${TOKENS.runtime}`,
      );
      expect(malformed.code).toBe("UNAUTHENTICATED");
    } finally {
      client.close();
      runtime.close();
    }
    await engine.stop();
    // A graceful stop: everything contextd buffered is written, and it stops the sidecar.
    expect(await contextd.stop()).toBe(0);
    logs = contextd.logs();
  }, 120_000);
  afterAll(async () => {
    await engine?.stop();
    await contextd?.cleanup();
  });

  it("no token appears in contextd's logs at level trace — configured, per-run, host or wrong", () => {
    // The scan had something to read: debug lines (contextd has none at trace), refusals, the sidecar's folded output.
    expect(logs).toContain('"level":20');
    expect(logs).toContain("request refused");
    expect(logs).toContain('"sidecar":"leak-sidecar"');
    const secrets: Record<string, string> = { ...TOKENS, runToken, ...Object.fromEntries(hostTokens.map((t, i) => [`host${i}`, t])) };
    // A host token's leading parts name the issuing process and endpoint (not secret); its random part is.
    hostTokens.forEach((t, i) => (secrets[`host${i}Random`] = t.slice(t.lastIndexOf(".") + 1)));
    const found = Object.entries(secrets).flatMap(([name, token]) =>
      leakForms(token)
        .filter((form) => logs.includes(form))
        .map(() => name),
    );
    expect(found).toEqual([]);
  });

  it("the SDK engine's own log (trace) holds no owner or host token either", () => {
    const stderr = engine.stderr();
    expect(stderr.length).toBeGreaterThan(0);
    const found = [TOKENS.acme, ...hostTokens].filter((t) => leakForms(t).some((form) => stderr.includes(form)));
    expect(found).toEqual([]);
  });
});

describe("the Authenticator compares against every credential, without early exit", () => {
  const compare = vi.mocked(timingSafeEqual);
  const env = { O1: secret(), O2: secret(), OP: secret(), RT1: secret(), RT2: secret() };
  const auth = new Authenticator(
    {
      required: true,
      owners: { a: { token_env: "O1", engines: [] }, b: { token_env: "O2", engines: [] } },
      operators: [{ token_env: "OP" }],
      runtimes: [
        { token_env: "RT1", agents: ["*"] },
        { token_env: "RT2", agents: ["*"] },
      ],
    },
    env,
  );
  auth.addOwnerToken("side", secret());
  const CREDENTIALS = 6; // 2 owners, 1 operator, 2 runtimes, 1 run token
  const bearer = (token: string): Metadata => {
    const md = new Metadata();
    md.set("authorization", `Bearer ${token}`);
    return md;
  };

  const codeOf = (check: () => unknown): string => {
    try {
      check();
      return "OK";
    } catch (err) {
      return statusName((err as { code: number }).code);
    }
  };

  it.each([
    ["the first credential's token, as runtime", () => auth.runtime(bearer(env.O1)), "PERMISSION_DENIED"],
    ["the last runtime token", () => auth.runtime(bearer(env.RT2)), "OK"],
    ["a wrong token, as operator", () => auth.operator(bearer(secret())), "UNAUTHENTICATED"],
    ["the operator token, as owner", () => auth.owner(bearer(env.OP), "a"), "PERMISSION_DENIED"],
  ])("%s: one comparison per credential", (_what, check, expected) => {
    compare.mockClear();
    expect(codeOf(check)).toBe(expected);
    expect(compare).toHaveBeenCalledTimes(CREDENTIALS);
  });
});
