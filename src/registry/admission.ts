import { status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { PROTOCOL_VERSION } from "../contract/engine-api.js";
import { EngineNotRegisteredError, FailedPreconditionError, fieldError, NotFoundError } from "../contract/errors.js";
import type { EngineInfo } from "../contract/gen/contextd/v1/engine.js";
import {
  EngineEventType,
  EngineHealth,
  Refusal,
  type DeregisterEngineRequest,
  type Locality,
  type RegisterEngineRequest,
  type RegisterEngineResponse,
} from "../contract/gen/contextd/v1/registry.js";
import { CORE_OWNER, engineIdProblem, LEGACY_ENGINE_ID } from "../contract/engine-id.js";
import { hasUnsafeCharacters, quote } from "../contract/quote.js";
import type { RegistryStore, StoredRegistration } from "../store/registry-store.js";
import type { EndpointAllowList, EndpointChecker } from "./endpoint-allow-list.js";
import type { EngineEvents } from "./engine-events.js";
import type { EngineReservations } from "./engine-reservations.js";
import { newCounters, newInstanceCounters, toEngineStatus, type EngineRegistry, type RegisteredEngine } from "./engine-registry.js";
import type { Quarantine } from "./quarantine.js";
import { RemoteEngine, type EngineDialing } from "./remote-engine.js";

export const SUPPORTED_PROTOCOL_VERSIONS = [PROTOCOL_VERSION];

/** GetInfo failures that say nothing about the engine's contract: the registration may be retried. */
const TRANSIENT_PROBE_CODES = new Set<number>([status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.CANCELLED, status.RESOURCE_EXHAUSTED]);

export interface AdmissionSettings {
  /** Deadline of the GetInfo and health probes made before admitting. */
  probeTimeoutMs: number;
  dialing: EngineDialing;
  /** Instances one engine id may have (`engines.max_instances`): a new one beyond is refused. */
  maxInstances: number;
}

/**
 * RegisterEngine and DeregisterEngine (documented, checks in order, on RegistryService in
 * proto/contextd/v1/registry.proto): the ownership rules, the endpoint allow-list
 * (checked before any connection), contract validation through GetInfo, protocol negotiation and
 * a health check before admission. The caller's credentials were checked by the service layer.
 */
export class Admission {
  constructor(
    private readonly registry: EngineRegistry,
    private readonly store: RegistryStore,
    private readonly quarantine: Quarantine,
    private readonly allowList: EndpointAllowList,
    private readonly events: EngineEvents,
    private readonly settings: AdmissionSettings,
    private readonly log: Logger,
    private readonly reservations: EngineReservations,
  ) {}

  register(req: RegisterEngineRequest, owner: string): Promise<RegisterEngineResponse> {
    return this.registry.locks.run(req.engineId.trim(), () => this.admit(req, owner));
  }

  private async admit(req: RegisterEngineRequest, owner: string): Promise<RegisterEngineResponse> {
    const engineId = req.engineId.trim();
    const endpoint = req.endpoint.trim();
    if (!engineId) throw fieldError("engine_id", "is required");
    // An engine id is a config key, a metric label and a log field (src/contract/engine-id.ts).
    const idProblem = engineIdProblem(engineId);
    if (idProblem) throw fieldError("engine_id", `${quote(engineId)} ${idProblem}`);
    if (!endpoint) throw fieldError("endpoint", "is required");
    // An instance named by nothing is its endpoint: every sidecar older than instances is one. Only
    // an id the registrant chose is held to the instance-id rule; an endpoint is judged as one (the
    // allow-list, the probe), and a registration valid before instances stays valid.
    const instanceProblem = req.instanceId.trim() ? instanceIdProblem(req.instanceId.trim()) : undefined;
    if (instanceProblem) throw fieldError("instance_id", `${quote(req.instanceId.trim())} ${instanceProblem}`);
    const instanceId = req.instanceId.trim() || endpoint;
    const locality = req.locality && hasLocality(req.locality) ? req.locality : undefined;
    const localityIssue = locality ? localityProblem(locality) : undefined;
    if (localityIssue) throw fieldError("locality", localityIssue);
    const refuse = (refusal: Refusal, message: string, existingOwner = ""): RegisterEngineResponse => {
      this.log.warn({ engineId, instanceId, owner, endpoint, refusal: Refusal[refusal], reason: message }, "engine registration refused");
      return { ok: false, existingOwner, refusal, message, engine: undefined, protocolVersion: 0, instanceId: "" };
    };

    if (engineId === LEGACY_ENGINE_ID)
      return refuse(Refusal.REFUSAL_DEFAULT_SLOT_RESERVED, `"${LEGACY_ENGINE_ID}" is the default slot, owned by core (contextd itself)`, CORE_OWNER);
    // Reserved ids are decided by the config, before the store: registered or not, no one else gets them.
    const reserved = this.reservations.refusal(engineId, owner);
    if (reserved) return refuse(Refusal.REFUSAL_OWNED_BY_OTHER, reserved.message, reserved.owner);
    // The store is what every replica shares: a registration made at another replica a moment ago
    // (not applied here yet) owns the id as much as one made here.
    const stored = (await this.store.listRegistrations()).filter((r) => r.engineId === engineId);
    const holder = stored[0]?.owner ?? this.registry.get(engineId)?.owner;
    if (holder !== undefined && holder !== owner) {
      return refuse(Refusal.REFUSAL_OWNED_BY_OTHER, `engine "${engineId}" is owned by "${holder}"`, holder);
    }
    // Same-owner refresh is per instance: another instance of an id its owner holds is added.
    const registered = stored.some((r) => r.instanceId === instanceId) || this.registry.instance(engineId, instanceId) !== undefined;
    if (registered && !req.allowSameOwnerRefresh) {
      return refuse(
        Refusal.REFUSAL_ALREADY_REGISTERED,
        `engine "${engineId}" instance ${quote(instanceId)} is already registered by "${owner}"; set allow_same_owner_refresh to replace it`,
        owner,
      );
    }
    // Every instance is a set of health checks, a channel and metric series: an owner gets a bounded
    // number. Checked against the store, so replicas agree; registrations racing at several replicas
    // may pass it together, by at most their number.
    if (!registered) {
      const held = new Set([...stored.map((r) => r.instanceId), ...this.registry.instances(engineId).map((i) => i.instanceId)]).size;
      if (held >= this.settings.maxInstances)
        return refuse(
          Refusal.REFUSAL_TOO_MANY_INSTANCES,
          `engine "${engineId}" has ${held} instances, the most engines.max_instances allows; deregister one, or retry once a dead one is removed`,
        );
    }
    // Resolved and checked here; the engine dials exactly the addresses (or socket) checked.
    const checked = await this.allowList.check(endpoint, Date.now() + this.settings.probeTimeoutMs);
    if (!checked.ok && checked.unresolved)
      return refuse(Refusal.REFUSAL_UNREACHABLE, `${quote(endpoint)} is not reachable within the admission deadline (${checked.reason})`);
    if (!checked.ok) return refuse(Refusal.REFUSAL_ENDPOINT_NOT_ALLOWED, `endpoint ${quote(endpoint)} refused without dialling: ${checked.reason}`);
    const offered = req.protocolVersions.length ? req.protocolVersions : [PROTOCOL_VERSION];
    const version = Math.max(0, ...offered.filter((v) => SUPPORTED_PROTOCOL_VERSIONS.includes(v)));
    if (!version)
      return refuse(Refusal.REFUSAL_VERSION_UNSUPPORTED, `protocol_versions [${offered.join(", ")}] has none of [${SUPPORTED_PROTOCOL_VERSIONS.join(", ")}]`);

    const remote = new RemoteEngine(endpoint, emptyInfo(engineId), this.settings.dialing, { checker: this.allowList, checked: checked.dial });
    const probe = await this.probe(remote, engineId, version);
    if (probe.refusal) {
      remote.close();
      return refuse(probe.refusal, probe.message);
    }
    remote.setInfo(probe.info!);

    // Read again after the probe: another replica's change may have been applied meanwhile.
    const existing = this.registry.instance(engineId, instanceId);
    const engine: RegisteredEngine = {
      id: engineId,
      instanceId,
      locality,
      owner,
      endpoint,
      builtin: false,
      engine: remote,
      remote,
      info: probe.info!,
      registeredAtMs: Date.now(),
      health: EngineHealth.ENGINE_HEALTH_SERVING,
      counters: this.registry.get(engineId)?.counters ?? newCounters(),
      instanceCounters: existing?.instanceCounters ?? newInstanceCounters(),
      healthFailures: 0,
      ejections: existing?.ejections ?? 0,
      quarantine: existing?.quarantine,
    };
    const written = this.registry.beginLocalWrite(engineId);
    try {
      const claim = await this.store.claimRegistration(
        { engineId, instanceId, locality, owner, endpoint, info: probe.info!, protocolVersion: version, registeredAtMs: engine.registeredAtMs },
        { refresh: req.allowSameOwnerRefresh },
      );
      // Another replica admitted the id while this one probed: the database decided, and says who.
      if (!claim.written) {
        remote.close();
        const other = claim.holder.owner;
        return other !== owner
          ? refuse(Refusal.REFUSAL_OWNED_BY_OTHER, `engine "${engineId}" is owned by "${other}" (registered at another replica a moment ago)`, other)
          : refuse(
              Refusal.REFUSAL_ALREADY_REGISTERED,
              `engine "${engineId}" instance ${quote(instanceId)} was registered by "${owner}" at another replica a moment ago; set allow_same_owner_refresh to replace it`,
              owner,
            );
      }
      const replaced = this.registry.instance(engineId, instanceId);
      this.registry.set(engine);
      if (replaced?.remote && replaced.remote !== remote) replaced.remote.close();
      await this.quarantine.onRegistered(engine);
    } finally {
      written();
    }
    this.log.info({ engineId, instanceId, owner, endpoint, protocolVersion: version, refreshed: Boolean(existing) }, "engine registered");
    this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_REGISTERED, engine, existing ? "registration refreshed" : "registered");
    return {
      ok: true,
      existingOwner: "",
      refusal: Refusal.REFUSAL_NONE,
      message: "registered",
      engine: toEngineStatus(engine, this.registry.view),
      protocolVersion: version,
      instanceId,
    };
  }

  /** GetInfo under a short deadline, contract validation, then a health check. */
  private async probe(remote: RemoteEngine, engineId: string, version: number): Promise<{ refusal?: Refusal; message: string; info?: EngineInfo }> {
    let info: EngineInfo | undefined;
    try {
      info = await remote.getInfo(this.settings.probeTimeoutMs);
    } catch (err) {
      // Not reached (or out of time) may pass, and engines retry on UNREACHABLE; an answer that is
      // an error or no EngineInfo at all (garbage bytes, UNIMPLEMENTED) is the contract broken.
      const code = (err as { code?: number }).code;
      const transient = code === undefined || TRANSIENT_PROBE_CODES.has(code);
      const name = status[code ?? status.UNAVAILABLE] ?? String(code);
      // The transport's text (`connect ENOENT /path`, EACCES, ECONNREFUSED) would tell an owner
      // which files exist: it goes to the debug log only, the caller gets the status name.
      this.log.debug({ engineId, endpoint: quote(remote.endpoint), err: (err as Error).message }, "admission probe: GetInfo failed");
      if (transient)
        return { refusal: Refusal.REFUSAL_UNREACHABLE, message: `${quote(remote.endpoint)} is not reachable within the admission deadline (${name})` };
      return {
        refusal: Refusal.REFUSAL_CONTRACT_INVALID,
        message: `GetInfo on ${quote(remote.endpoint)} answered ${name}: ${quote((err as { details?: string }).details ?? "")}`,
      };
    }
    if (!info || !info.id.trim() || !info.name.trim()) {
      return { refusal: Refusal.REFUSAL_CONTRACT_INVALID, message: "GetInfo must answer an EngineInfo with non-empty id and name" };
    }
    if (info.id !== engineId) {
      return { refusal: Refusal.REFUSAL_CONTRACT_INVALID, message: `GetInfo says id ${quote(info.id)}, but the registration is for "${engineId}"` };
    }
    const problem = engineInfoProblem(info);
    if (problem) return { refusal: Refusal.REFUSAL_CONTRACT_INVALID, message: `GetInfo: ${problem}` };
    if (info.protocolVersions.length && !info.protocolVersions.includes(version)) {
      return {
        refusal: Refusal.REFUSAL_VERSION_UNSUPPORTED,
        message: `the engine speaks protocol [${info.protocolVersions.join(", ")}], contextd [${SUPPORTED_PROTOCOL_VERSIONS.join(", ")}]`,
      };
    }
    const health = await remote.checkHealth(this.settings.probeTimeoutMs);
    if (health === "UNREACHABLE")
      return { refusal: Refusal.REFUSAL_UNREACHABLE, message: `${quote(remote.endpoint)} is not reachable within the admission deadline (health check)` };
    if (health !== "SERVING") return { refusal: Refusal.REFUSAL_UNREACHABLE, message: `health check answered ${health}` };
    return { message: "", info };
  }

  /** One instance (`instance_id`), or the engine with all its instances; the engine goes with its last one. */
  async deregister(req: DeregisterEngineRequest, authorize: (owner: string) => void): Promise<boolean> {
    const engineId = req.engineId.trim();
    const instanceId = req.instanceId.trim();
    if (engineId === LEGACY_ENGINE_ID) throw new FailedPreconditionError(`"${LEGACY_ENGINE_ID}" is built in and cannot be deregistered`);
    return this.registry.locks.run(engineId, async () => {
      const engine = this.registry.get(engineId);
      if (!engine) throw new EngineNotRegisteredError(engineId);
      const removed = instanceId ? this.registry.instance(engineId, instanceId) : undefined;
      if (instanceId && !removed) throw new NotFoundError(`engine "${engineId}" has no instance ${quote(instanceId)}`);
      authorize(engine.owner);
      const gone = removed ? [removed] : this.registry.instances(engineId);
      const written = this.registry.beginLocalWrite(engineId);
      try {
        this.registry.delete(engineId, removed ? instanceId : undefined);
        for (const i of gone) i.remote?.close();
        const last = !this.registry.get(engineId);
        await this.store.deleteRegistration(engineId, last ? undefined : instanceId);
        await this.store.clearQuarantine(engineId, last ? undefined : instanceId);
      } finally {
        written();
      }
      for (const i of gone) {
        this.log.info({ engineId, instanceId: i.instanceId, owner: i.owner }, "engine deregistered");
        this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_DEREGISTERED, i, "deregistered");
      }
      return true;
    });
  }

  /**
   * Removes an instance that died (the health monitor's verdict) unless it is its engine's last: as a
   * deregistration, but only of the registration it was — one refreshed meanwhile (here or at
   * another replica) is alive.
   */
  async expire(instance: RegisteredEngine, why: string): Promise<void> {
    const engineId = instance.id;
    await this.registry.locks.run(engineId, async () => {
      if (!this.registry.holds(instance) || this.registry.instances(engineId).length < 2) return;
      const written = this.registry.beginLocalWrite(engineId);
      try {
        this.registry.delete(engineId, instance.instanceId);
        instance.remote?.close();
        const removed = await this.store.deleteRegistration(engineId, instance.instanceId, { registeredAtMs: instance.registeredAtMs });
        if (removed) await this.store.clearQuarantine(engineId, instance.instanceId);
      } finally {
        written();
      }
      this.log.warn({ engineId, instanceId: instance.instanceId, owner: instance.owner, reason: why }, "engine instance removed: it is dead");
      this.events.publish(EngineEventType.ENGINE_EVENT_TYPE_DEREGISTERED, instance, `removed: ${why}`);
    });
  }

  /** Restores persisted registrations at start; health is UNKNOWN until the first check. */
  async restore(): Promise<void> {
    for (const r of await this.store.listRegistrations()) {
      if (r.engineId === LEGACY_ENGINE_ID) continue;
      // Made before the id was reserved for someone else (or by a replica with another config): the
      // reservation wins, and the stale holder must register under another id.
      const reserved = this.reservations.refusal(r.engineId, r.owner);
      if (reserved) {
        this.log.warn({ engineId: r.engineId, owner: r.owner, reason: reserved.message }, "stored registration dropped: the id is reserved for another owner");
        await this.store.deleteRegistration(r.engineId);
        continue;
      }
      this.registry.set(restoredEngine(r, this.settings.dialing, this.allowList));
    }
  }
}

/**
 * The in-memory engine for a registration read from the store (at start, or made at another
 * replica): no admission probe — the admitting replica made it — and health UNKNOWN until this
 * replica's own first check. `previous` (the engine it replaces) keeps its counters. The endpoint
 * is checked against this replica's allow list before the first dial (RemoteEngine): stored by
 * another replica, or under another config, it is not trusted as it is.
 */
export function restoredEngine(r: StoredRegistration, dialing: EngineDialing, checker: EndpointChecker, previous?: RegisteredEngine): RegisteredEngine {
  const remote = new RemoteEngine(r.endpoint, r.info, dialing, { checker });
  return {
    id: r.engineId,
    instanceId: r.instanceId,
    locality: r.locality,
    owner: r.owner,
    endpoint: r.endpoint,
    builtin: false,
    engine: remote,
    remote,
    info: r.info,
    registeredAtMs: r.registeredAtMs,
    health: EngineHealth.ENGINE_HEALTH_UNKNOWN,
    counters: previous?.counters ?? newCounters(),
    instanceCounters: previous?.instanceCounters ?? newInstanceCounters(),
    healthFailures: 0,
    ejections: previous?.ejections ?? 0,
    quarantine: previous?.quarantine,
  };
}

/** The longest instance id: a pod name or an address fits well within it. */
const INSTANCE_ID_MAX_CHARS = 256;

function instanceIdProblem(id: string): string | undefined {
  if (id.length > INSTANCE_ID_MAX_CHARS) return `is ${id.length} characters, over ${INSTANCE_ID_MAX_CHARS}`;
  if (hasUnsafeCharacters(id)) return "holds control, bidi or zero-width characters";
  return undefined;
}

/** A locality field is a label: ASCII letters, digits, `.`, `_`, `-`, `:`; at most 128 characters. */
const LOCALITY_PATTERN = /^[A-Za-z0-9._:-]{0,128}$/;

function hasLocality(l: Locality): boolean {
  return Boolean(l.node || l.zone || l.replica);
}

function localityProblem(l: Locality): string | undefined {
  for (const [field, value] of Object.entries({ node: l.node, zone: l.zone, replica: l.replica })) {
    if (!LOCALITY_PATTERN.test(value)) return `${field} ${quote(value)} is not at most 128 ASCII letters, digits, ".", "_", "-" and ":"`;
  }
  return undefined;
}

function emptyInfo(id: string): EngineInfo {
  return { id, name: "", version: "", ownsCompaction: false, turnMaintenanceMode: 0, capabilities: undefined, hostRequirements: [], protocolVersions: [] };
}

/** Bounds of what an EngineInfo says of itself: every runtime reads it (ListEngines, WatchEngines). */
const INFO_LIMITS = { name: 128, version: 64, requirement: 64, requirements: 16, protocolVersions: 16 };

/** Why `info` is not fit to store and show to every runtime, or undefined. */
function engineInfoProblem(info: EngineInfo): string | undefined {
  const text = (field: string, value: string, max: number) => {
    if (value.length > max) return `${field} is ${value.length} characters, over ${max}`;
    if (hasUnsafeCharacters(value)) return `${field} ${quote(value)} holds control, bidi or zero-width characters`;
    return undefined;
  };
  if (info.hostRequirements.length > INFO_LIMITS.requirements)
    return `host_requirements has ${info.hostRequirements.length} entries, over ${INFO_LIMITS.requirements}`;
  if (info.protocolVersions.length > INFO_LIMITS.protocolVersions)
    return `protocol_versions has ${info.protocolVersions.length} entries, over ${INFO_LIMITS.protocolVersions}`;
  return (
    text("name", info.name, INFO_LIMITS.name) ??
    text("version", info.version, INFO_LIMITS.version) ??
    info.hostRequirements.map((r, i) => text(`host_requirements[${i}]`, r, INFO_LIMITS.requirement)).find(Boolean)
  );
}
