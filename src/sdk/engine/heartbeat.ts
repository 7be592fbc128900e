import { status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { EngineStatus, QuarantineState } from "../../contract/gen/contextd/v1/registry.js";
import { TRANSIENT, codeOf, detailsOf } from "./registration-error.js";

/**
 * What the Registrar does after a heartbeat: nothing but schedule the next one (`intact`;
 * `displaced` while another instance holds the id; `unknown` while the registry cannot answer),
 * register again (`lost`: the registry answered NOT_FOUND), or stop heartbeating (`disabled`).
 */
export type HeartbeatVerdict = "intact" | "displaced" | "unknown" | "lost" | "disabled";

/**
 * Reads the registry's answers to the heartbeat's GetEngine. A heartbeat runs every few seconds,
 * so it remembers what it last reported (registry down, a failing heartbeat, a quarantine, another
 * instance holding the id) and logs a lasting condition when it starts and ends, not on every beat.
 *
 * With a contextd that lists instances (EngineStatus.instances), this instance is registered while
 * its endpoint is among them; when it is not (deregistered alone, say), it registers again, which
 * adds it beside the others.
 *
 * With an older contextd, only NOT_FOUND means the registry lost the engine. Another endpoint under
 * the id means another instance of this engine (a replica, or the next version in a rolling deploy)
 * registered after us: registering again would take the id back, the other instance would do the
 * same on its next heartbeat, and the two would keep resetting each other's registration. So this
 * instance leaves the id to the other one and keeps heartbeating; when the other deregisters
 * (NOT_FOUND), it registers again.
 */
export class HeartbeatWatch {
  private registryDown = false;
  private problem = "";
  private lastQuarantine = "";
  /** The endpoint of the other instance that holds the id, while one does. */
  private heldBy = "";

  constructor(
    private readonly log: Logger,
    private readonly engineId: string,
    private readonly endpoint: string,
    /** As the registry names this instance (its endpoint unless it named itself). */
    private readonly instanceId: string = endpoint,
  ) {}

  /** The engine (re)registered: an outage, failure or takeover seen before is over. A quarantine is not. */
  registered(): void {
    this.registryDown = false;
    this.problem = "";
    this.heldBy = "";
  }

  /** GetEngine answered: is it this engine at this endpoint? */
  answered(engine: EngineStatus | undefined): HeartbeatVerdict {
    if (!engine) return this.failedWith("GetEngine answered without the engine");
    if (this.registryDown) this.log.info("registry reachable again");
    this.registryDown = false;
    this.problem = "";
    // A contextd with instances lists them: this instance is intact while it is among them, and
    // registering again when it is not displaces nobody (docs/registry.md, "Instances").
    if (engine.instances.length > 0) {
      const mine = engine.instances.find((i) => i.instanceId === this.instanceId);
      if (!mine) {
        this.log.warn(`the registry no longer has this instance of ${this.engineId}; registering again`);
        this.heldBy = "";
        return "lost";
      }
      this.reportQuarantine(mine.quarantine);
      return "intact";
    }
    if (engine.endpoint !== this.endpoint) {
      if (engine.endpoint !== this.heldBy) {
        this.log.warn(
          { registeredEndpoint: engine.endpoint },
          `another instance now holds the registration of ${this.engineId} at ${engine.endpoint}; not re-registering`,
        );
        this.heldBy = engine.endpoint;
      }
      return "displaced";
    }
    if (this.heldBy) {
      this.log.info({ previousEndpoint: this.heldBy }, "the registry points at this instance again");
      this.heldBy = "";
    }
    this.reportQuarantine(engine.quarantine);
    return "intact";
  }

  /** Logs a quarantine of this engine (or instance) when it starts and when it ends. */
  private reportQuarantine(q: QuarantineState | undefined): void {
    const quarantine = q ? `${q.operation}: ${q.reason}` : "";
    if (quarantine === this.lastQuarantine) return;
    if (quarantine) this.log.warn({ quarantine: q }, "the registry has quarantined this engine");
    else this.log.info("the registry released this engine from quarantine");
    this.lastQuarantine = quarantine;
  }

  /** GetEngine failed. */
  failed(err: unknown): HeartbeatVerdict {
    const code = codeOf(err);
    if (code === status.NOT_FOUND) {
      let why = "the registry no longer has this engine; registering again";
      if (this.heldBy) why = `the other instance at ${this.heldBy} gave up the registration of ${this.engineId}; registering again`;
      else if (this.registryDown) why = "the registry is back without this engine (it restarted); registering again";
      this.log.warn(why);
      this.registryDown = false;
      this.heldBy = "";
      return "lost";
    }
    if (code !== undefined && TRANSIENT.has(code)) {
      if (!this.registryDown) this.log.warn({ code: status[code] }, "registry unreachable; will check the registration again when it is back");
      this.registryDown = true;
    } else if (code === status.UNIMPLEMENTED) {
      this.log.warn("the registry does not implement GetEngine; registration heartbeat disabled");
      return "disabled";
    } else {
      return this.failedWith(`${code === undefined ? "error" : status[code]}: ${detailsOf(err)}`);
    }
    return "unknown";
  }

  /** A heartbeat that tells nothing about the registration: logged when the problem changes. */
  private failedWith(problem: string): HeartbeatVerdict {
    if (problem !== this.problem) this.log.warn({ reason: problem }, "registration heartbeat failed");
    this.problem = problem;
    return "unknown";
  }
}
