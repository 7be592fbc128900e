import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PeerCertificate } from "node:tls";
import { Metadata, status } from "@grpc/grpc-js";
import { afterAll, describe, expect, it } from "vitest";
import { ContextdError, InvalidArgumentError, PermissionDeniedError, UnauthenticatedError } from "../../../src/contract/errors.js";
import { Authenticator, agentAllowed, newToken, sha256Hex } from "../../../src/server/auth.js";
import { bearerToken } from "../../../src/contract/metadata.js";
import { ConfigError, defaultConfig, loadConfig, type AuthConfig } from "../../../src/server/config.js";

const RUNTIME = "runtime-token-1";
const LIMITED = "limited-runtime-token";
const ADMIN = "admin-token";
const ACME = "acme-engine-token";
const BETA = "beta-engine-token";

const env = { CONTEXTD_RUNTIME_TOKEN: RUNTIME, CONTEXTD_ADMIN_TOKEN: ADMIN, ACME_ENGINE_TOKEN: ACME };

/** RUNTIME, ADMIN and ACME come from env vars; LIMITED and BETA are configured as sha256 hashes. */
function authConfig(overrides: Partial<AuthConfig> = {}): AuthConfig {
  return {
    required: true,
    owners: { acme: { token_env: "ACME_ENGINE_TOKEN", engines: [] }, beta: { token_sha256: sha256Hex(BETA), engines: [] } },
    operators: [{ token_env: "CONTEXTD_ADMIN_TOKEN", name: "ops" }],
    runtimes: [
      { token_env: "CONTEXTD_RUNTIME_TOKEN", agents: ["*"] },
      { token_sha256: sha256Hex(LIMITED), agents: ["coder", "team-*"], name: "limited" },
    ],
    ...overrides,
  };
}

function md(authorization?: string): Metadata {
  const m = new Metadata();
  if (authorization !== undefined) m.set("authorization", authorization);
  return m;
}
const bearer = (token: string) => md(`Bearer ${token}`);

/** Runs `fn` and returns the ContextdError it throws. */
function error(fn: () => unknown): ContextdError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ContextdError);
    return e as ContextdError;
  }
  throw new Error("expected an error");
}

const auth = new Authenticator(authConfig(), env);
const dir = mkdtempSync(join(tmpdir(), "contextd-auth-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("runtime", () => {
  it("accepts a token from an env var and from a sha256 hash", () => {
    expect(auth.runtime(bearer(RUNTIME))).toEqual({ kind: "runtime", name: "runtimes[0]", agents: ["*"], anonymous: false });
    expect(auth.runtime(bearer(LIMITED))).toEqual({ kind: "runtime", name: "limited", agents: ["coder", "team-*"], anonymous: false });
  });

  it("accepts the scheme in any case and surrounding spaces", () => {
    expect(auth.runtime(md(`bearer ${RUNTIME}`)).name).toBe("runtimes[0]");
    expect(auth.runtime(md(`  BEARER   ${RUNTIME}  `)).name).toBe("runtimes[0]");
  });

  it.each([undefined, "", RUNTIME, `Basic ${RUNTIME}`, "Bearer", "Bearer ", `Bearer ${RUNTIME} extra`])(
    "missing or malformed header %j → UNAUTHENTICATED",
    (header) => {
      const e = error(() => auth.runtime(md(header)));
      expect(e).toBeInstanceOf(UnauthenticatedError);
      expect(e.code).toBe(status.UNAUTHENTICATED);
      expect(e.message).toBe("missing runtime token: send metadata 'authorization: Bearer <token>'");
    },
  );

  it("a forged token → UNAUTHENTICATED", () => {
    for (const forged of ["nope", `${RUNTIME}x`, RUNTIME.slice(0, -1), sha256Hex(LIMITED)]) {
      const e = error(() => auth.runtime(bearer(forged)));
      expect(e.code).toBe(status.UNAUTHENTICATED);
      expect(e.message).toBe("runtime token not recognised");
    }
  });

  it("a valid token of another role → PERMISSION_DENIED", () => {
    for (const other of [ADMIN, ACME, BETA]) {
      const e = error(() => auth.runtime(bearer(other)));
      expect(e).toBeInstanceOf(PermissionDeniedError);
      expect(e.message).toBe("runtime token required");
    }
  });

  it("checkAgent allows the token's agents and refuses others, naming the agent", () => {
    const all = auth.runtime(bearer(RUNTIME));
    expect(() => auth.checkAgent(all, "anything")).not.toThrow();
    const limited = auth.runtime(bearer(LIMITED));
    expect(() => auth.checkAgent(limited, "coder")).not.toThrow();
    expect(() => auth.checkAgent(limited, "team-red")).not.toThrow();
    const e = error(() => auth.checkAgent(limited, "coder2"));
    expect(e.code).toBe(status.PERMISSION_DENIED);
    expect(e.message).toBe('runtime token "limited" may not act for agent "coder2"');
    expect(error(() => auth.checkAgent(limited, "team")).code).toBe(status.PERMISSION_DENIED);
  });

  it("agentAllowed: exact ids, * and prefixes", () => {
    expect(agentAllowed(["*"], "x")).toBe(true);
    expect(agentAllowed(["a", "b-*"], "b-1")).toBe(true);
    expect(agentAllowed(["a", "b-*"], "ab")).toBe(false);
    expect(agentAllowed([], "a")).toBe(false);
  });
});

describe("operator", () => {
  it("accepts an operator token", () => {
    expect(auth.operator(bearer(ADMIN))).toEqual({ kind: "operator", name: "ops", anonymous: false });
  });

  it("a runtime or owner token → PERMISSION_DENIED 'operator token required'", () => {
    for (const t of [RUNTIME, LIMITED, ACME, BETA]) {
      const e = error(() => auth.operator(bearer(t)));
      expect(e.code).toBe(status.PERMISSION_DENIED);
      expect(e.message).toBe("operator token required");
    }
  });

  it("no token or a forged one → UNAUTHENTICATED", () => {
    const missing = error(() => auth.operator(md()));
    expect(missing.code).toBe(status.UNAUTHENTICATED);
    expect(missing.message).toBe("missing operator token: send metadata 'authorization: Bearer <token>'");
    const forged = error(() => auth.operator(bearer("forged")));
    expect(forged.code).toBe(status.UNAUTHENTICATED);
    expect(forged.message).toBe("operator token not recognised");
  });

  it("one token may hold several roles when configured so", () => {
    const both = new Authenticator(authConfig({ operators: [{ token_env: "CONTEXTD_RUNTIME_TOKEN" }] }), env);
    expect(both.operator(bearer(RUNTIME)).name).toBe("operators[0]");
    expect(both.runtime(bearer(RUNTIME)).agents).toEqual(["*"]);
  });
});

describe("owner", () => {
  it("a token configured for the owner proves it (env var and sha256)", () => {
    expect(auth.owner(bearer(ACME), "acme")).toEqual({ kind: "owner", owner: "acme", via: "token" });
    expect(auth.owner(bearer(BETA), " beta ")).toEqual({ kind: "owner", owner: "beta", via: "token" });
  });

  it("another owner's token → PERMISSION_DENIED naming the owner", () => {
    const e = error(() => auth.owner(bearer(BETA), "acme"));
    expect(e.code).toBe(status.PERMISSION_DENIED);
    expect(e.message).toBe('token does not prove owner "acme"');
  });

  it("a runtime or operator token → PERMISSION_DENIED", () => {
    expect(error(() => auth.owner(bearer(RUNTIME), "acme")).code).toBe(status.PERMISSION_DENIED);
    expect(error(() => auth.owner(bearer(ADMIN), "beta")).code).toBe(status.PERMISSION_DENIED);
  });

  it("no token, a forged token or an unknown owner → UNAUTHENTICATED", () => {
    const missing = error(() => auth.owner(md(), "acme"));
    expect(missing.code).toBe(status.UNAUTHENTICATED);
    expect(missing.message).toBe(`missing owner token: send metadata 'authorization: Bearer <token>' (owner "acme")`);
    const forged = error(() => auth.owner(bearer("forged"), "acme"));
    expect(forged.code).toBe(status.UNAUTHENTICATED);
    expect(forged.message).toBe('owner token for "acme" not recognised');
    const unknown = error(() => auth.owner(bearer(ACME), "globex"));
    expect(unknown.code).toBe(status.UNAUTHENTICATED);
    expect(unknown.message).toBe('owner "globex" is not configured (auth.owners)');
    expect(error(() => auth.owner(bearer(ACME), "core")).code).toBe(status.UNAUTHENTICATED);
  });

  it("an empty owner → INVALID_ARGUMENT", () => {
    expect(error(() => auth.owner(bearer(ACME), "  "))).toBeInstanceOf(InvalidArgumentError);
  });

  it("per-run owner tokens: for a configured or a new owner, revocable", () => {
    const a = new Authenticator(authConfig(), env);
    const runToken = newToken();
    expect(runToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const revoke = a.addOwnerToken("sidecar", runToken);
    const revokeAcme = a.addOwnerToken("acme", "acme-run-token");
    expect(a.owner(bearer(runToken), "sidecar")).toEqual({ kind: "owner", owner: "sidecar", via: "run-token" });
    expect(a.owner(bearer("acme-run-token"), "acme").via).toBe("run-token");
    expect(a.owner(bearer(ACME), "acme").via).toBe("token");
    expect(error(() => a.owner(bearer(runToken), "acme")).code).toBe(status.PERMISSION_DENIED);
    expect(error(() => a.owner(bearer(ACME), "sidecar")).code).toBe(status.PERMISSION_DENIED);
    expect(error(() => a.runtime(bearer(runToken))).code).toBe(status.PERMISSION_DENIED);
    revoke();
    revokeAcme();
    expect(error(() => a.owner(bearer(runToken), "sidecar")).code).toBe(status.UNAUTHENTICATED);
    expect(error(() => a.owner(bearer("acme-run-token"), "acme")).code).toBe(status.UNAUTHENTICATED);
  });

  it("a per-run runtime token (the explorer's own) acts for its agents only, proves no other role, and is revocable", () => {
    const a = new Authenticator(authConfig(), env);
    const token = newToken();
    const revoke = a.addRuntimeToken("explorer", token, ["*"]);
    expect(a.runtime(bearer(token))).toMatchObject({ kind: "runtime", name: "explorer", agents: ["*"], anonymous: false });
    expect(error(() => a.operator(bearer(token))).code).toBe(status.PERMISSION_DENIED);
    revoke();
    expect(error(() => a.runtime(bearer(token))).code).toBe(status.UNAUTHENTICATED);
  });

  it("a verified client certificate naming the owner (CN or subjectAltName) proves it", () => {
    const cert = (CN: string, subjectaltname?: string) => ({ subject: { CN }, subjectaltname }) as unknown as PeerCertificate;
    expect(auth.owner(md(), "acme", cert("acme"))).toEqual({ kind: "owner", owner: "acme", via: "certificate" });
    expect(auth.owner(md(), "globex", cert("x", "DNS:globex, URI:spiffe://example/engine")).via).toBe("certificate");
    expect(auth.owner(md(), "spiffe://example/engine", cert("x", "DNS:globex, URI:spiffe://example/engine")).via).toBe("certificate");
    expect(error(() => auth.owner(md(), "acme", cert("beta"))).code).toBe(status.UNAUTHENTICATED);
    expect(auth.owner(bearer(ACME), "acme", cert("beta")).via).toBe("token");
  });
});

describe("auth.required: false", () => {
  const open = new Authenticator(authConfig({ required: false }), {});

  it("does not need the referenced env vars", () => {
    expect(() => new Authenticator(authConfig({ required: false }), {})).not.toThrow();
  });

  it("trusts every caller with every role", () => {
    const rt = open.runtime(md());
    expect(rt).toEqual({ kind: "runtime", name: "anonymous", agents: ["*"], anonymous: true });
    expect(() => open.checkAgent(rt, "any-agent")).not.toThrow();
    expect(open.runtime(bearer("garbage")).anonymous).toBe(true);
    expect(open.operator(md())).toEqual({ kind: "operator", name: "anonymous", anonymous: true });
    expect(open.owner(md(), "whoever")).toEqual({ kind: "owner", owner: "whoever", via: "anonymous" });
    expect(open.owner(bearer(BETA), "acme").owner).toBe("acme");
  });
});

describe("construction", () => {
  it("refuses an unset or empty token_env when auth is required, naming the key", () => {
    const noRuntime = { ...env, CONTEXTD_RUNTIME_TOKEN: undefined };
    expect(() => new Authenticator(authConfig(), noRuntime)).toThrow(
      new ConfigError("config: auth.runtimes[0].token_env: environment variable CONTEXTD_RUNTIME_TOKEN is not set"),
    );
    expect(() => new Authenticator(authConfig(), { ...env, ACME_ENGINE_TOKEN: "" })).toThrow(
      new ConfigError("config: auth.owners.acme.token_env: environment variable ACME_ENGINE_TOKEN is not set"),
    );
    expect(() => new Authenticator(authConfig(), { ...env, CONTEXTD_ADMIN_TOKEN: undefined })).toThrow(
      "config: auth.operators[0].token_env: environment variable CONTEXTD_ADMIN_TOKEN is not set",
    );
  });

  it("refuses two owners with the same token", () => {
    const owners = { acme: { token_env: "ACME_ENGINE_TOKEN", engines: [] }, copy: { token_sha256: sha256Hex(ACME), engines: [] } };
    expect(() => new Authenticator(authConfig({ owners }), env)).toThrow(new ConfigError("config: auth.owners.copy: uses the same token as auth.owners.acme"));
  });

  it("with the defaults (auth required, nothing configured) every token is refused", () => {
    const closed = new Authenticator(defaultConfig().auth, {});
    expect(error(() => closed.runtime(bearer(RUNTIME))).code).toBe(status.UNAUTHENTICATED);
    expect(error(() => closed.operator(bearer(ADMIN))).code).toBe(status.UNAUTHENTICATED);
    expect(error(() => closed.owner(bearer(ACME), "acme")).code).toBe(status.UNAUTHENTICATED);
  });

  it("works from a loaded YAML file (sha256 in upper case, agents default)", () => {
    const path = join(dir, "contextd.yaml");
    writeFileSync(
      path,
      [
        "auth:",
        "  owners:",
        `    beta: { token_sha256: ${sha256Hex(BETA).toUpperCase()} }`,
        "  operators: [ { token_env: CONTEXTD_ADMIN_TOKEN } ]",
        `  runtimes: [ { token_sha256: ${sha256Hex(LIMITED)} } ]`,
        "",
      ].join("\n"),
    );
    const cfg = loadConfig({ file: path, env });
    const a = new Authenticator(cfg.auth, env);
    expect(a.owner(bearer(BETA), "beta").via).toBe("token");
    expect(a.operator(bearer(ADMIN)).name).toBe("operators[0]");
    const rt = a.runtime(bearer(LIMITED));
    expect(rt.agents).toEqual(["*"]);
    expect(error(() => a.runtime(bearer(RUNTIME))).message).toBe("runtime token not recognised");
  });
});

describe("helpers", () => {
  it("bearerToken reads the first authorization value", () => {
    expect(bearerToken(bearer("abc"))).toBe("abc");
    expect(bearerToken(md())).toBeUndefined();
    expect(bearerToken(md("Token abc"))).toBeUndefined();
  });

  it("sha256Hex is what token_sha256 expects", () => {
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});
