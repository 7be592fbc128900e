/**
 * What the in-process tests of the registry (router.test.ts, quarantine.test.ts) build on: an
 * engine written here against the real ContextEngine interface — the outside component, as
 * grpc-js's outlier-detection tests use fake subchannels — and the real registry, events,
 * quarantine and SQLite store around it. Nothing of contextd's own is replaced.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import type { CallContext, ContextEngine } from "../../src/contract/engine-api.js";
import {
  ContextEngineServiceAssembleResponse,
  EngineInfo,
  type ContextEngineServiceAssembleRequest,
  type ContextEngineServiceCompactRequest,
  type ContextEngineServiceCompactResponse,
  type IngestRequest,
  type IngestResponse,
} from "../../src/contract/gen/contextd/v1/engine.js";
import { EngineHealth, type EngineEvent, type Locality, type QuarantineState } from "../../src/contract/gen/contextd/v1/registry.js";
import type { SessionRef } from "../../src/contract/gen/contextd/v1/types.js";
import type { EngineOperation } from "../../src/registry/engine-call-observer.js";
import type { CallerContext } from "../../src/registry/engine-dispatch.js";
import { EngineEvents } from "../../src/registry/engine-events.js";
import { EngineRegistry, newCounters, newInstanceCounters, type RegisteredEngine } from "../../src/registry/engine-registry.js";
import { Quarantine, type QuarantineSettings } from "../../src/registry/quarantine.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";

/**
 * How the engine meets its next calls: answers; throws `error`; hangs until its AbortSignal fires
 * (then rejects with the signal's reason, as a well-behaved engine does); or holds every call,
 * ignoring the signal, until the test lets it answer (`release`) — an engine that answers late.
 */
export type Behaviour = { kind: "answer" } | { kind: "throw"; error: Error } | { kind: "hang" } | { kind: "hold" };

/** One call the engine received, and what became of its signal. */
export interface SeenCall {
  op: "ingest" | "assemble" | "compact";
  ctx: CallContext;
  /** The reason its signal was aborted with, once it was. */
  abortReason?: unknown;
}

export class ScriptedEngine implements ContextEngine {
  behaviour: Behaviour = { kind: "answer" };
  readonly calls: SeenCall[] = [];
  private held: Array<() => void> = [];

  constructor(readonly id: string) {}

  info(): EngineInfo {
    return EngineInfo.fromPartial({ id: this.id, name: `scripted ${this.id}`, version: "1", protocolVersions: [1] });
  }

  ingest(_req: IngestRequest, ctx: CallContext): Promise<IngestResponse> {
    return this.meet("ingest", ctx, () => ({ ingested: true }));
  }

  assemble(_req: ContextEngineServiceAssembleRequest, ctx: CallContext): Promise<ContextEngineServiceAssembleResponse> {
    return this.meet("assemble", ctx, () => ContextEngineServiceAssembleResponse.fromPartial({ systemPromptAddition: `assembled by ${this.id}` }));
  }

  compact(_req: ContextEngineServiceCompactRequest, ctx: CallContext): Promise<ContextEngineServiceCompactResponse> {
    return this.meet("compact", ctx, () => ({ ok: true, compacted: false, reason: `${this.id}: nothing to compact` }));
  }

  /** Lets every held call answer (late, when their deadline has passed meanwhile). */
  release(): void {
    for (const go of this.held.splice(0)) go();
  }

  /** Calls held now (behaviour "hold"). */
  get holding(): number {
    return this.held.length;
  }

  private meet<T>(op: SeenCall["op"], ctx: CallContext, answer: () => T): Promise<T> {
    const seen: SeenCall = { op, ctx };
    this.calls.push(seen);
    if (ctx.signal.aborted) seen.abortReason = ctx.signal.reason;
    else ctx.signal.addEventListener("abort", () => (seen.abortReason = ctx.signal.reason), { once: true });
    const b = this.behaviour;
    switch (b.kind) {
      case "answer":
        return Promise.resolve(answer());
      case "throw":
        return Promise.reject(b.error);
      case "hang":
        return new Promise<T>((_, reject) => {
          if (ctx.signal.aborted) reject(ctx.signal.reason as Error);
          else ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason as Error), { once: true });
        });
      case "hold":
        return new Promise<T>((resolve) => this.held.push(() => resolve(answer())));
    }
  }
}

/**
 * Puts `engine` in the registry as an admitted sidecar would be (no gRPC client: it is called in
 * process), as the instance `endpoint` of the engine id `engineId` (the engine's own id by default).
 */
export function addSidecar(
  registry: EngineRegistry,
  engine: ContextEngine & { readonly id: string },
  owner = "team-a",
  { engineId = engine.id, endpoint = "127.0.0.1:50999", locality }: { engineId?: string; endpoint?: string; locality?: Locality } = {},
): RegisteredEngine {
  const registered: RegisteredEngine = {
    id: engineId,
    instanceId: endpoint,
    locality,
    owner,
    endpoint,
    builtin: false,
    engine,
    info: engine.info(),
    registeredAtMs: Date.now(),
    health: EngineHealth.ENGINE_HEALTH_SERVING,
    counters: newCounters(),
    instanceCounters: newInstanceCounters(),
    healthFailures: 0,
    ejections: 0,
  };
  registry.set(registered);
  return registered;
}

/** A pino logger whose JSON lines the test reads back. */
export function capturedLog(): { log: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split("\n")) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: "debug" }, sink), lines };
}

/** The real registry pieces over a SQLite file in a fresh temp dir; `close` removes it all. */
export function registryFixture(settings: QuarantineSettings = { baseEjectionMs: 30_000, maxEjectionMs: 300_000 }) {
  const dir = mkdtempSync(join(tmpdir(), "contextd-registry-unit-"));
  const dbPath = join(dir, "contextd.db");
  const store = SqliteStore.open(dbPath);
  const legacyEngine = new ScriptedEngine("legacy");
  const registry = new EngineRegistry(legacyEngine);
  const events = new EngineEvents();
  const seenEvents: EngineEvent[] = [];
  events.subscribe((e) => seenEvents.push(e));
  const { log, lines } = capturedLog();
  const quarantine = new Quarantine(registry, store, settings, events, log);
  return {
    dir,
    dbPath,
    store,
    legacyEngine,
    registry,
    events,
    seenEvents,
    log,
    lines,
    quarantine,
    settings,
    /**
     * The stored quarantine records by engine id: the engine-wide one, else its instance's (these
     * tests give each engine one instance).
     */
    async records(): Promise<Map<string, QuarantineState>> {
      const out = new Map<string, QuarantineState>();
      for (const [id, byInstance] of await store.listInstanceQuarantines()) for (const q of byInstance.values()) out.set(id, q);
      for (const [id, q] of await store.listQuarantines()) out.set(id, q);
      return out;
    },
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The clock the router tests start at (fake timers). */
export const T0 = 1_700_000_000_000;

/** Per-operation engine deadlines of the router tests (ms). */
export const TIMEOUTS: Record<EngineOperation, number> = {
  ingest: 1_000,
  assemble: 2_000,
  compact: 5_000,
  after_turn: 1_000,
  maintain: 1_000,
  bootstrap: 1_000,
  subagent: 1_000,
  forget: 1_000,
};

export const SESSION: SessionRef = { sessionId: "s1", sessionKey: "agent:main:s1", agentId: "main" };

/** A runtime call without a deadline of its own. */
export const NO_DEADLINE: CallerContext = { deadlineMs: Number.POSITIVE_INFINITY };
