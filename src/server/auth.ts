import { hash, randomBytes, timingSafeEqual } from "node:crypto";
import { certificateNames } from "../contract/certificate-names.js";
import type { PeerCertificate } from "node:tls";
import type { Metadata } from "@grpc/grpc-js";
import { bearerToken } from "../contract/metadata.js";
import { InvalidArgumentError, PermissionDeniedError, UnauthenticatedError } from "../contract/errors.js";
import { ConfigError, pathText, type AuthConfig, type SecretRef } from "./config.js";

/**
 * Who is calling (docs/security.md, "Principals"). Credentials travel as gRPC metadata
 * `authorization: Bearer <token>`. The config holds no secrets: each credential is the sha256 (hex)
 * of its token, or the NAME of an environment variable holding the token, read once here. Tokens
 * are compared as sha256 digests with `timingSafeEqual`, against every configured credential (no
 * early exit).
 *
 * Roles: runtimes (SessionService, optionally limited to agent ids), operators (quarantine, clear,
 * deregister others), owners (engine registration). One token may hold several roles if configured so.
 * With `auth.required: false` (local development only) every caller is trusted with every role.
 * The reserved owner `core` is contextd itself: it cannot be configured, so with auth required no
 * caller can prove it; the registry refuses the `legacy` id on its own (DEFAULT_SLOT_RESERVED).
 */

export interface RuntimePrincipal {
  readonly kind: "runtime";
  /** `name` from the config entry, else `runtimes[i]`; `anonymous` when auth is off. For logs. */
  readonly name: string;
  /** Agent ids this caller may use: `"*"` any, `"team-*"` a prefix. */
  readonly agents: readonly string[];
  readonly anonymous: boolean;
}

export interface OperatorPrincipal {
  readonly kind: "operator";
  readonly name: string;
  readonly anonymous: boolean;
}

export interface OwnerPrincipal {
  readonly kind: "owner";
  /** The owner, trimmed. */
  readonly owner: string;
  /** How it was proven: a configured owner token, a per-run token (managed sidecars), a client certificate, or not at all (auth off). */
  readonly via: "token" | "run-token" | "certificate" | "anonymous";
}

type Role = "owner" | "operator" | "runtime";
interface Credential {
  role: Role;
  name: string;
  digest: Buffer;
  owner?: string;
  agents?: readonly string[];
  runToken?: boolean;
}

const MISSING = (role: string) => `missing ${role} token: send metadata 'authorization: Bearer <token>'`;

export class Authenticator {
  readonly required: boolean;
  private readonly credentials: Credential[] = [];
  private readonly runTokens = new Set<Credential>();
  private readonly configuredOwners: Set<string>;

  /** Throws ConfigError when auth is required and a referenced `token_env` is unset or empty. */
  constructor(auth: AuthConfig, env: NodeJS.ProcessEnv = process.env) {
    this.required = auth.required;
    this.configuredOwners = new Set(Object.keys(auth.owners));
    const add = (path: PropertyKey[], secret: SecretRef, c: Omit<Credential, "digest">) => {
      const digest = this.resolve(path, secret, env);
      if (digest) this.credentials.push({ ...c, digest });
    };
    for (const [owner, secret] of Object.entries(auth.owners)) {
      add(["auth", "owners", owner], secret, { role: "owner", name: owner, owner });
    }
    auth.operators.forEach((op, i) => add(["auth", "operators", i], op, { role: "operator", name: op.name ?? `operators[${i}]` }));
    auth.runtimes.forEach((rt, i) => add(["auth", "runtimes", i], rt, { role: "runtime", name: rt.name ?? `runtimes[${i}]`, agents: rt.agents }));
    const owners = this.credentials.filter((c) => c.role === "owner");
    for (const [i, a] of owners.entries()) {
      const b = owners.slice(0, i).find((o) => o.digest.equals(a.digest));
      if (b) throw new ConfigError(`config: ${pathText(["auth", "owners", a.name])}: uses the same token as ${pathText(["auth", "owners", b.name])}`);
    }
  }

  /** The calling agent runtime (SessionService). Check the agent id with `checkAgent`. */
  runtime(metadata: Metadata): RuntimePrincipal {
    if (!this.required) return { kind: "runtime", name: "anonymous", agents: ["*"], anonymous: true };
    const token = bearerToken(metadata);
    if (token === undefined) throw new UnauthenticatedError(MISSING("runtime"));
    const matches = this.match(token);
    const runtimes = matches.filter((c) => c.role === "runtime");
    if (runtimes.length === 0) {
      if (matches.length === 0) throw new UnauthenticatedError("runtime token not recognised");
      throw new PermissionDeniedError("runtime token required");
    }
    return { kind: "runtime", name: runtimes[0].name, agents: runtimes.flatMap((c) => c.agents ?? []), anonymous: false };
  }

  /** Any recognised credential (runtime, operator or owner): enough to read the registry. */
  anyone(metadata: Metadata): void {
    if (!this.required) return;
    const token = bearerToken(metadata);
    if (token === undefined) throw new UnauthenticatedError(MISSING("runtime, owner or operator"));
    if (this.match(token).length === 0) throw new UnauthenticatedError("token not recognised");
  }

  /**
   * The tenant a call's token is, for per-tenant limits: the configured credential it matches, as
   * `<role> <name>` (`runtime acme`). Undefined with auth off, or for a missing or unknown token —
   * the method's rule refuses such a call.
   */
  tenantOf(metadata: Metadata): string | undefined {
    if (!this.required) return undefined;
    const token = bearerToken(metadata);
    const match = token === undefined ? undefined : this.match(token)[0];
    return match ? `${match.role} ${match.name}` : undefined;
  }

  /**
   * Who a call is, for the audit trail: the credential its token matches (`<role> <name>`), else
   * the first name of the client certificate TLS verified (`certificate <name>`), else
   * `anonymous` (auth off, or no recognised credential). Never the token.
   */
  actorOf(metadata: Metadata, certificate: PeerCertificate | undefined): string {
    const token = bearerToken(metadata);
    const match = token === undefined ? undefined : this.match(token)[0];
    if (match) return `${match.role} ${match.name}`;
    const names = certificate ? certificateNames(certificate) : [];
    return names.length > 0 ? `certificate ${names[0]}` : "anonymous";
  }

  /** Throws PERMISSION_DENIED when the runtime's token does not cover `agentId`. */
  checkAgent(principal: RuntimePrincipal, agentId: string): void {
    if (!agentAllowed(principal.agents, agentId))
      throw new PermissionDeniedError(`runtime token ${JSON.stringify(principal.name)} may not act for agent ${JSON.stringify(agentId)}`);
  }

  /** An operator (quarantine, clear, deregister engines of other owners). */
  operator(metadata: Metadata): OperatorPrincipal {
    if (!this.required) return { kind: "operator", name: "anonymous", anonymous: true };
    const token = bearerToken(metadata);
    if (token === undefined) throw new UnauthenticatedError(MISSING("operator"));
    const matches = this.match(token);
    const op = matches.find((c) => c.role === "operator");
    if (op) return { kind: "operator", name: op.name, anonymous: false };
    if (matches.length === 0) throw new UnauthenticatedError("operator token not recognised");
    throw new PermissionDeniedError("operator token required");
  }

  /**
   * Proves the caller may act as `owner` (trimmed; empty → INVALID_ARGUMENT): a bearer token configured
   * for that owner or registered with `addOwnerToken`, or a client certificate whose subject CN or a
   * subjectAltName value is the owner. Pass only a certificate the TLS layer verified against
   * `tls.client_ca_file` (i.e. with `require_client_cert`).
   */
  owner(metadata: Metadata, owner: string, clientCertificate?: PeerCertificate | null): OwnerPrincipal {
    const name = owner.trim();
    if (name === "") throw new InvalidArgumentError("owner must not be empty");
    if (!this.required) return { kind: "owner", owner: name, via: "anonymous" };
    if (clientCertificate && certificateNames(clientCertificate).includes(name)) return { kind: "owner", owner: name, via: "certificate" };
    const token = bearerToken(metadata);
    if (token === undefined) throw new UnauthenticatedError(`${MISSING("owner")} (owner ${JSON.stringify(name)})`);
    const known = this.configuredOwners.has(name) || [...this.runTokens].some((c) => c.owner === name);
    if (!known) throw new UnauthenticatedError(`owner ${JSON.stringify(name)} is not configured (auth.owners)`);
    const matches = this.match(token);
    const hit = matches.find((c) => c.role === "owner" && c.owner === name);
    if (hit) return { kind: "owner", owner: name, via: hit.runToken ? "run-token" : "token" };
    if (matches.length === 0) throw new UnauthenticatedError(`owner token for ${JSON.stringify(name)} not recognised`);
    throw new PermissionDeniedError(`token does not prove owner ${JSON.stringify(name)}`);
  }

  /**
   * Registers an extra token for `owner` at run time (a managed sidecar gets a fresh one per start).
   * Returns a function that revokes it.
   */
  addOwnerToken(owner: string, token: string): () => void {
    const name = owner.trim();
    if (name === "" || token === "") throw new TypeError("addOwnerToken: owner and token must not be empty");
    const c: Credential = { role: "owner", name, owner: name, digest: sha256(token), runToken: true };
    this.runTokens.add(c);
    return () => void this.runTokens.delete(c);
  }

  /**
   * Registers an extra runtime token at run time, for `agents` (the explorer's own credential, with
   * which it reads sessions for an operator: explorer-api.ts). Returns a function that revokes it.
   */
  addRuntimeToken(name: string, token: string, agents: readonly string[]): () => void {
    if (name === "" || token === "") throw new TypeError("addRuntimeToken: name and token must not be empty");
    const c: Credential = { role: "runtime", name, agents, digest: sha256(token), runToken: true };
    this.runTokens.add(c);
    return () => void this.runTokens.delete(c);
  }

  /** Every credential whose digest equals the token's; compares against all of them. */
  private match(token: string): Credential[] {
    const digest = sha256(token);
    const hits: Credential[] = [];
    for (const c of [...this.credentials, ...this.runTokens]) if (timingSafeEqual(c.digest, digest)) hits.push(c);
    return hits;
  }

  private resolve(path: PropertyKey[], secret: SecretRef, env: NodeJS.ProcessEnv): Buffer | undefined {
    // The schema guarantees exactly one of the two, the digest as 64 lower-case hex characters.
    if (secret.token_sha256 !== undefined) return Buffer.from(secret.token_sha256, "hex");
    const token = env[secret.token_env];
    if (token) return sha256(token);
    if (this.required) throw new ConfigError(`config: ${pathText([...path, "token_env"])}: environment variable ${secret.token_env} is not set`);
    return undefined;
  }
}

/** Whether agent-id patterns (`"*"`, `"team-*"`, exact ids) cover `agentId`. */
export function agentAllowed(patterns: readonly string[], agentId: string): boolean {
  return patterns.some((p) => (p.endsWith("*") ? agentId.startsWith(p.slice(0, -1)) : p === agentId));
}

/** The value for `token_sha256`: the sha256 of a token, hex. */
export function sha256Hex(token: string): string {
  return sha256(token).toString("hex");
}

/** A fresh random bearer token (256 bits, base64url). */
export function newToken(): string {
  return randomBytes(32).toString("base64url");
}

function sha256(token: string): Buffer {
  return hash("sha256", token, "buffer");
}
