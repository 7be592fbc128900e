import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from "node:crypto";
import { fieldError } from "../contract/errors.js";

/**
 * Page tokens (ListSessions, GetTranscript, HostService.ReadTranscript) are opaque and
 * tamper-evident: the resume position is sealed with AES-256-GCM under a key derived from the
 * caller's credential, with what the token is for (the RPC, and the session for a transcript) as
 * associated data.
 *
 * Why a key derived from the caller's credential, not a server secret: replicas on one PostgreSQL
 * must accept each other's tokens, across restarts, and they share no secret but the config —
 * which holds each runtime token's sha256, the same on every replica. The bearer token a runtime
 * presents is secret to it and the servers, so:
 * - a token issued to one runtime token does not open under another (INVALID_ARGUMENT), even one
 *   with the same agents: it cannot be replayed by anyone else, nor read by whoever sees it in a log;
 * - the caller itself could forge tokens (it holds the key), but a token only ever carries what it
 *   was already shown — the last session or entry of its previous page — and listings are filtered
 *   by the caller's agents in the store query, so a forged position only moves the caller within
 *   what it may see anyway;
 * - a rotated runtime token makes its outstanding page tokens fail; the runtime lists again.
 * With `auth.required: false` every caller derives the same key; every caller may see everything then.
 */
export type PageKey = Buffer;

const SALT = "contextd page token v1";
const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Tokens this server issues stay far below this (a 256-character session id in a position). */
const MAX_TOKEN_CHARS = 1024;

/** The page key of a credential (`undefined` or "" when auth is off). */
export function pageKey(credential: string | undefined): PageKey {
  const digest = createHash("sha256")
    .update(credential ?? "", "utf8")
    .digest();
  return Buffer.from(hkdfSync("sha256", digest, SALT, "page tokens", 32));
}

/** HostService.ReadTranscript's key: its tokens are bound to the session by `purpose` alone. */
export const HOST_PAGE_KEY: PageKey = pageKey("contextd host service");

export function encodePageToken(key: PageKey, purpose: string, position: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(purpose, "utf8"));
  const sealed = Buffer.concat([cipher.update(position, "utf8"), cipher.final()]);
  return Buffer.concat([Buffer.from([VERSION]), iv, sealed, cipher.getAuthTag()]).toString("base64url");
}

/** The position a token carries; INVALID_ARGUMENT (never echoing the token) when this caller was not issued it for `purpose`. */
export function decodePageToken(key: PageKey, purpose: string, token: string, field = "page_token"): string | undefined {
  if (!token) return undefined;
  if (token.length > MAX_TOKEN_CHARS) {
    throw fieldError(field, `is ${token.length} characters, longer than any token this server issues (at most ${MAX_TOKEN_CHARS})`);
  }
  const raw = Buffer.from(token, "base64url");
  const refused = fieldError(
    field,
    "is not a token this server issued to this caller for this call (page tokens are bound to the runtime token and the request)",
  );
  if (raw.length < 1 + IV_BYTES + TAG_BYTES || raw[0] !== VERSION) throw refused;
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(1, 1 + IV_BYTES));
    decipher.setAAD(Buffer.from(purpose, "utf8"));
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
    return Buffer.concat([decipher.update(raw.subarray(1 + IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString("utf8");
  } catch {
    throw refused;
  }
}

/** AIP-158 style: 0 means the default; values above the maximum are coerced to it. */
export function pageSize(requested: number, defaultSize: number, maxSize: number): number {
  if (!requested) return defaultSize;
  return Math.min(requested, maxSize);
}
