import { createHash } from "node:crypto";
import { Message } from "../contract/gen/contextd/v1/types.js";

/**
 * What an idempotency key is bound to: a SHA-256 over the request's messages (their protobuf
 * encoding, with the host-assigned `id` and `token_count` cleared and `metadata` in key order, so
 * that a retry from any client library digests the same), `is_heartbeat`, and the message keys
 * when there are any (a request without them digests as it always did, so recorded keys still match).
 */
export function appendDigest(messages: Message[], isHeartbeat: boolean, messageKeys?: readonly string[]): string {
  const hash = createHash("sha256");
  hash.update(isHeartbeat ? "h1" : "h0");
  if (messageKeys) for (const k of messageKeys) hash.update(`k${Buffer.byteLength(k)}:`).update(k);
  for (const m of messages) {
    const metadata: Record<string, string> = {};
    for (const key of Object.keys(m.metadata ?? {}).sort()) metadata[key] = m.metadata[key];
    const bytes = Message.encode({ ...m, id: "", tokenCount: 0, metadata }).finish();
    hash.update(String(bytes.length)).update(":").update(bytes);
  }
  return hash.digest("hex");
}
