import { status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { EngineStatus } from "../../contract/gen/contextd/v1/registry.js";
import { TRANSIENT, codeOf, detailsOf } from "./registration-error.js";

/**
 * What the Registrar does after a heartbeat: nothing but schedule the next one (`intact`, or
 * `unknown` while the registry cannot answer), register again (`lost`, `moved`), or stop
 * heartbeating (`disabled`).
 */
export type HeartbeatVerdict = "intact" | "unknown" | "lost" | "moved" | "disabled";

/**
 * Reads the registry's answers to the heartbeat's GetEngine. A heartbeat runs every few seconds,
 * so it remembers what it last reported (registry down, a failing heartbeat, a quarantine) and
 * logs a lasting condition when it starts and ends, not on every beat.
 */
export class HeartbeatWatch {
  private registryDown = false;
  private problem = "";
  private lastQuarantine = "";

  constructor(
    private readonly log: Logger,
    private readonly endpoint: string,
  ) {}

  /** The engine (re)registered: an outage or failure seen before is over. A quarantine is not. */
  registered(): void {
    this.registryDown = false;
    this.problem = "";
  }

  /** GetEngine answered: is it this engine at this endpoint? */
  answered(engine: EngineStatus | undefined): HeartbeatVerdict {
    if (!engine || engine.endpoint !== this.endpoint) {
      this.log.warn({ registeredEndpoint: engine?.endpoint ?? "" }, "the registry has this engine id at another endpoint; registering again");
      this.registryDown = false;
      return "moved";
    }
    if (this.registryDown) this.log.info("registry reachable again; registration intact");
    this.registryDown = false;
    this.problem = "";
    const quarantine = engine.quarantine ? `${engine.quarantine.operation}: ${engine.quarantine.reason}` : "";
    if (quarantine !== this.lastQuarantine) {
      if (quarantine) this.log.warn({ quarantine: engine.quarantine }, "the registry has quarantined this engine");
      else this.log.info("the registry released this engine from quarantine");
      this.lastQuarantine = quarantine;
    }
    return "intact";
  }

  /** GetEngine failed. */
  failed(err: unknown): HeartbeatVerdict {
    const code = codeOf(err);
    if (code === status.NOT_FOUND) {
      this.log.warn(
        this.registryDown ? "the registry is back without this engine (it restarted); registering again" : "the registry no longer has this engine; registering again",
      );
      this.registryDown = false;
      return "lost";
    }
    if (code !== undefined && TRANSIENT.has(code)) {
      if (!this.registryDown) this.log.warn({ code: status[code] }, "registry unreachable; will check the registration again when it is back");
      this.registryDown = true;
    } else if (code === status.UNIMPLEMENTED) {
      this.log.warn("the registry does not implement GetEngine; registration heartbeat disabled");
      return "disabled";
    } else {
      const problem = `${code === undefined ? "error" : status[code]}: ${detailsOf(err)}`;
      if (problem !== this.problem) this.log.warn({ reason: problem }, "registration heartbeat failed");
      this.problem = problem;
    }
    return "unknown";
  }
}
