import type { Logger } from "pino";
import { EngineEventType, EngineHealth } from "../contract/gen/contextd/v1/registry.js";
import type { EngineEvents } from "./engine-events.js";
import type { EngineRegistry, RegisteredEngine } from "./engine-registry.js";
import type { Quarantine } from "./quarantine.js";

export interface HealthSettings {
  intervalMs: number;
  timeoutMs: number;
  unhealthyThreshold: number;
  /** An instance failing its checks this long, while its engine has others, is removed (none: never). */
  removeAfterMs?: number;
}

/** Removes an instance that died (Admission.expire). */
export type RemoveInstance = (instance: RegisteredEngine, why: string) => Promise<void>;

/**
 * Checks every instance of every registered sidecar with grpc.health.v1 on an interval, each check
 * under its own deadline. `unhealthy_threshold` failures in a row quarantine that instance (its
 * siblings serve on); a passing check after the ejection time releases it.
 *
 * Each check first runs the engine's endpoint through the allow list again (RemoteEngine
 * recheckEndpoint): a name whose DNS record now points outside engines.allow_endpoints (say, at
 * 169.254.169.254) is quarantined at once, naming the address, and not dialled; new addresses that
 * are allowed re-point the engine's channel.
 */
export class HealthMonitor {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly registry: EngineRegistry,
    private readonly quarantine: Quarantine,
    private readonly events: EngineEvents,
    private readonly settings: HealthSettings,
    private readonly log: Logger,
    private readonly remove: RemoveInstance = async () => {},
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.checkAll(), this.settings.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** One round over every sidecar; a round still running makes the next tick a no-op. */
  async checkAll(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await Promise.all(
        this.registry
          .allInstances()
          .filter((e) => e.remote)
          .map((e) => this.check(e)),
      );
    } finally {
      this.running = false;
    }
  }

  async check(engine: RegisteredEngine): Promise<void> {
    const refused = await engine.remote!.recheckEndpoint(this.settings.timeoutMs);
    if (!this.registry.holds(engine)) return; // replaced or deregistered meanwhile
    if (refused) return this.refuseEndpoint(engine, refused);
    const answer = await engine.remote!.checkHealth(this.settings.timeoutMs);
    if (!this.registry.holds(engine)) return;
    const health =
      answer === "SERVING"
        ? EngineHealth.ENGINE_HEALTH_SERVING
        : answer === "NOT_SERVING"
          ? EngineHealth.ENGINE_HEALTH_NOT_SERVING
          : EngineHealth.ENGINE_HEALTH_UNKNOWN;
    if (health !== engine.health) {
      engine.health = health;
      this.log.info({ engineId: engine.id, instanceId: engine.instanceId, owner: engine.owner, health: answer }, "engine health changed");
      this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_HEALTH_CHANGED, engine, `health check: ${answer}`);
    }
    if (answer === "SERVING") {
      engine.healthFailures = 0;
      engine.unhealthySinceMs = undefined;
      await this.quarantine.releaseIfDue(engine);
      return;
    }
    engine.healthFailures++;
    engine.unhealthySinceMs ??= Date.now();
    this.log.debug({ engineId: engine.id, instanceId: engine.instanceId, answer, failures: engine.healthFailures }, "health check failed");
    if (!engine.quarantine && engine.healthFailures >= this.settings.unhealthyThreshold) {
      await this.quarantine.isolate(engine, "health", `health check failed ${engine.healthFailures} times in a row (${answer})`, false);
    }
    await this.removeIfDead(engine, answer);
  }

  /**
   * An instance that has failed its checks for `remove_after` while its engine has other instances
   * is dead: it is removed, as if it had deregistered (docs/registry.md, "Instances"). The engine's
   * last instance stays, quarantined, as a lone engine always has: its id stays held and its
   * fallbacks say "quarantined".
   */
  private async removeIfDead(engine: RegisteredEngine, answer: string): Promise<void> {
    const after = this.settings.removeAfterMs;
    if (after === undefined || engine.unhealthySinceMs === undefined) return;
    const forMs = Date.now() - engine.unhealthySinceMs;
    if (forMs < after || this.registry.instances(engine.id).length < 2) return;
    await this.remove(engine, `health checks failing for ${Math.round(forMs / 1000)} s (${answer})`);
  }

  /** Not waiting for the threshold: the engine is not dialled at all while this holds. */
  private async refuseEndpoint(engine: RegisteredEngine, reason: string): Promise<void> {
    engine.healthFailures++;
    if (engine.health !== EngineHealth.ENGINE_HEALTH_UNKNOWN) {
      engine.health = EngineHealth.ENGINE_HEALTH_UNKNOWN;
      this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_HEALTH_CHANGED, engine, `endpoint not allowed: ${reason}`);
    }
    this.log.warn({ engineId: engine.id, instanceId: engine.instanceId, owner: engine.owner, reason }, "engine endpoint no longer allowed; not dialled");
    if (!engine.quarantine) await this.quarantine.isolate(engine, "health", `endpoint no longer allowed: ${reason}`, false);
  }
}
