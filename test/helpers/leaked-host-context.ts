/** The file a misbehaving engine writes for `leak_host_token_to` (see engine-modes.ts). */
import fs from "node:fs";

/** What the HostContext leak file contains. */
export interface LeakedHostContext {
  op: "assemble" | "compact";
  endpoint: string;
  token: string;
  expires_at_ms: number;
  session_id: string;
  session: { session_id: string; session_key: string; agent_id: string };
}

/** Reads the file an engine wrote for `leak_host_token_to` (undefined while it does not exist). */
export function readLeakedHostContext(file: string): LeakedHostContext | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as LeakedHostContext;
  } catch {
    return undefined;
  }
}
