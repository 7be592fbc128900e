import { InvalidArgumentError } from "../contract/errors.js";

/**
 * Page tokens are opaque to clients (base64url); inside they carry the position to resume from.
 * A token that does not decode is the caller's error, not an empty page.
 */
export function encodePageToken(position: string): string {
  return Buffer.from(`v1:${position}`, "utf8").toString("base64url");
}

export function decodePageToken(token: string, field = "page_token"): string | undefined {
  if (!token) return undefined;
  const raw = Buffer.from(token, "base64url").toString("utf8");
  if (!raw.startsWith("v1:")) throw new InvalidArgumentError(`${field} is not a token this server issued`);
  return raw.slice(3);
}

/** AIP-158 style: 0 means the default; values above the maximum are coerced to it. */
export function pageSize(requested: number, defaultSize: number, maxSize: number): number {
  if (!requested) return defaultSize;
  return Math.min(requested, maxSize);
}
