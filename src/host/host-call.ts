import type { Logger } from "pino";
import type { CallerContext } from "../registry/engine-dispatch.js";
import type { RuntimeAccess } from "./runtime-access.js";

/** A runtime's call as the host's session operations get it: its deadline and cancellation, log and credentials. */
export interface HostCall extends CallerContext {
  log: Logger;
  /** What the runtime's credentials allow. */
  access: RuntimeAccess;
}
