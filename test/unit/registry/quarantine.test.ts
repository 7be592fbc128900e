/**
 * Quarantine (src/registry/quarantine.ts), in process: outlier ejection as grpc-js unit-tests its
 * outlier detection — the real Quarantine over a real EngineRegistry, EngineEvents and a SQLite
 * file, with a fixed clock (only Date is faked: the store and the promises run for real). The
 * integration tests (test/registry) show the same against real sidecars over gRPC.
 */
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { EngineEventType } from "../../../src/contract/gen/contextd/v1/registry.js";
import { EngineRegistry } from "../../../src/registry/engine-registry.js";
import { EngineEvents } from "../../../src/registry/engine-events.js";
import { Quarantine } from "../../../src/registry/quarantine.js";
import { SqliteStore } from "../../../src/store/sqlite/sqlite-store.js";
import { addSidecar, capturedLog, registryFixture, ScriptedEngine } from "../registry-fixture.js";

const T0 = 1_700_000_000_000;
const BASE = 10_000;
const MAX = 35_000;

let f: ReturnType<typeof registryFixture>;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(T0);
  f = registryFixture({ baseEjectionMs: BASE, maxEjectionMs: MAX });
});

afterEach(async () => {
  vi.useRealTimers();
  await f.close();
});

const eventsOf = (type: EngineEventType) => f.seenEvents.filter((e) => e.type === type);

describe("Quarantine: ejection on a failure the engine caused", () => {
  it("routes away at once but writes the record after the fallback answer's turn (the write syncs the disk on the event loop)", async () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    f.quarantine.onEngineFailure(e1, "assemble", "timeout", 'engine "e1" assemble: deadline of 250ms exceeded');
    expect(e1.quarantine?.operation).toBe("assemble");
    // What the fallback does next runs in microtasks of this turn: the store is not written yet.
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect((await f.records()).has("e1")).toBe(false);
    await f.registry.localWritesSettled("e1");
    expect((await f.records()).get("e1")).toEqual(e1.quarantine);
  });

  it("ejects for base_ejection, records operation, kind and reason, announces it, logs it and persists it", async () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    f.quarantine.onEngineFailure(e1, "compact", "error", 'engine "e1" failed on compact: boom');
    const expected = {
      operation: "compact",
      reason: 'error: engine "e1" failed on compact: boom',
      failedAtMs: T0,
      releaseAtMs: T0 + BASE,
      ejections: 1,
      manual: false,
    };
    expect(e1.quarantine).toEqual(expected);
    expect(e1.ejections).toBe(1);

    await f.registry.localWritesSettled("e1");
    expect((await f.records()).get("e1")).toEqual(expected);
    expect(f.quarantine.hasPending("e1")).toBe(false);

    const [event, ...more] = eventsOf(EngineEventType.ENGINE_EVENT_TYPE_QUARANTINED);
    expect(more).toEqual([]);
    expect(event!.message).toBe('compact: error: engine "e1" failed on compact: boom');
    expect(event!.engine?.engineId).toBe("e1");
    expect(event!.engine?.quarantine).toEqual(expected);
    expect(f.lines.find((l) => l.msg === "engine quarantined")).toMatchObject({ engineId: "e1", owner: "team-a", operation: "compact", ejections: 1 });
  });

  it("a failure while already quarantined is not a second ejection", async () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    f.quarantine.onEngineFailure(e1, "assemble", "timeout", "first");
    f.quarantine.onEngineFailure(e1, "compact", "error", "second");
    await f.registry.localWritesSettled("e1");
    expect(e1.quarantine).toMatchObject({ operation: "assemble", reason: "timeout: first", ejections: 1 });
    expect(eventsOf(EngineEventType.ENGINE_EVENT_TYPE_QUARANTINED)).toHaveLength(1);
  });

  it("never judges legacy, nor an engine deregistered or replaced while its call ran", async () => {
    f.quarantine.onEngineFailure(f.registry.legacy, "assemble", "error", "legacy failed");
    expect(f.registry.legacy.quarantine).toBeUndefined();

    const old = addSidecar(f.registry, new ScriptedEngine("e1"));
    const replacement = addSidecar(f.registry, new ScriptedEngine("e1")); // re-registered meanwhile
    f.quarantine.onEngineFailure(old, "compact", "error", "the old registration failed");
    expect(old.quarantine).toBeUndefined();
    expect(replacement.quarantine).toBeUndefined();

    const gone = addSidecar(f.registry, new ScriptedEngine("e2"));
    f.registry.delete("e2");
    f.quarantine.onEngineFailure(gone, "compact", "error", "deregistered meanwhile");
    expect(gone.quarantine).toBeUndefined();

    expect(f.seenEvents).toEqual([]);
    expect(await f.records()).toEqual(new Map());
  });
});

describe("Quarantine: ejection time and release", () => {
  it("grows as base_ejection × consecutive ejections and is capped at max_ejection", async () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    const lasted: number[] = [];
    for (let n = 1; n <= 5; n++) {
      const failedAt = Date.now();
      f.quarantine.onEngineFailure(e1, "compact", "error", `failure ${n}`);
      await f.registry.localWritesSettled("e1");
      expect(e1.quarantine?.ejections).toBe(n);
      lasted.push(e1.quarantine!.releaseAtMs - failedAt);
      vi.setSystemTime(e1.quarantine!.releaseAtMs);
      expect(await f.quarantine.releaseIfDue(e1)).toBe(true);
      expect(e1.ejections).toBe(n); // a release after the ejection time keeps the count: the next one is longer
      vi.setSystemTime(Date.now() + 1_000);
    }
    expect(lasted).toEqual([BASE, 2 * BASE, 3 * BASE, MAX, MAX]);
  });

  it("a passing health check before the ejection time is over releases nothing; after it, the engine is released, announced and its record cleared", async () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    e1.healthFailures = 2;
    f.quarantine.onEngineFailure(e1, "ingest", "error", "boom");
    await f.registry.localWritesSettled("e1");

    vi.setSystemTime(T0 + BASE - 1);
    expect(await f.quarantine.releaseIfDue(e1)).toBe(false);
    expect(e1.quarantine).toBeDefined();
    expect(eventsOf(EngineEventType.ENGINE_EVENT_TYPE_RELEASED)).toEqual([]);

    vi.setSystemTime(T0 + BASE);
    expect(await f.quarantine.releaseIfDue(e1)).toBe(true);
    expect(e1.quarantine).toBeUndefined();
    expect(e1.healthFailures).toBe(0);
    expect(eventsOf(EngineEventType.ENGINE_EVENT_TYPE_RELEASED).map((e) => e.message)).toEqual(["ejection time over and health check passed"]);
    expect(await f.records()).toEqual(new Map());

    expect(await f.quarantine.releaseIfDue(e1)).toBe(false); // nothing left to release
    expect(eventsOf(EngineEventType.ENGINE_EVENT_TYPE_RELEASED)).toHaveLength(1);
  });

  it("a manual quarantine outlasts any ejection time; ClearQuarantine releases it and forgets past ejections", async () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    f.quarantine.onEngineFailure(e1, "compact", "error", "boom");
    await f.registry.localWritesSettled("e1");
    vi.setSystemTime(T0 + BASE);
    await f.quarantine.releaseIfDue(e1);

    await f.quarantine.isolate(e1, "manual", "operator says so", true);
    expect(e1.quarantine).toMatchObject({ operation: "manual", manual: true, releaseAtMs: 0, ejections: 2 });
    vi.setSystemTime(T0 + 100 * MAX);
    expect(await f.quarantine.releaseIfDue(e1)).toBe(false);
    expect((await f.records()).get("e1")?.manual).toBe(true);

    await f.quarantine.clear(e1, "cleared by an operator");
    expect(e1.quarantine).toBeUndefined();
    expect(e1.ejections).toBe(0);
    expect(await f.records()).toEqual(new Map());
    expect(eventsOf(EngineEventType.ENGINE_EVENT_TYPE_RELEASED).at(-1)?.message).toBe("cleared by an operator");

    // The count starts again: the next ejection is base_ejection long.
    f.quarantine.onEngineFailure(e1, "compact", "error", "again");
    expect(e1.quarantine!.releaseAtMs - Date.now()).toBe(BASE);
  });
});

describe("Quarantine: registration and restart", () => {
  it("a successful registration clears an automatic quarantine and its ejections", async () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    f.quarantine.onEngineFailure(e1, "compact", "error", "boom");
    await f.registry.localWritesSettled("e1");

    await f.quarantine.onRegistered(e1);
    expect(e1.quarantine).toBeUndefined();
    expect(e1.ejections).toBe(0);
    expect(eventsOf(EngineEventType.ENGINE_EVENT_TYPE_RELEASED).map((e) => e.message)).toEqual(["re-registered"]);
    expect(await f.records()).toEqual(new Map());
  });

  it("an operator's quarantine holds across a re-registration: the stored record is applied to the new registration", async () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    await f.quarantine.isolate(e1, "manual", "operator says so", true);

    const again = addSidecar(f.registry, new ScriptedEngine("e1")); // the sidecar restarted and registered anew
    await f.quarantine.onRegistered(again);
    expect(again.quarantine).toMatchObject({ operation: "manual", reason: "operator says so", manual: true });
    expect(again.ejections).toBe(1);
    expect((await f.records()).get("e1")?.manual).toBe(true);
    expect(eventsOf(EngineEventType.ENGINE_EVENT_TYPE_RELEASED)).toEqual([]);
  });

  it("survives a restart: a new registry over the same file gets the records back (restore)", async () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    f.quarantine.onEngineFailure(e1, "assemble", "contract", "over budget");
    await f.registry.localWritesSettled("e1");
    const before = e1.quarantine;

    const reopened = SqliteStore.open(f.dbPath);
    try {
      const registry = new EngineRegistry(new ScriptedEngine("legacy"));
      const restored = addSidecar(registry, new ScriptedEngine("e1"));
      const other = addSidecar(registry, new ScriptedEngine("e2"));
      await new Quarantine(registry, reopened, f.settings, new EngineEvents(), capturedLog().log).restore();
      expect(restored.quarantine).toEqual(before);
      expect(restored.ejections).toBe(1);
      expect(other.quarantine).toBeUndefined();
    } finally {
      await reopened.close();
    }
  });
});

describe("Quarantine: what is not a fault", () => {
  it("bulkhead rejections never quarantine; they are logged at most once a second, with the count turned away", () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    const warnings = () => f.lines.filter((l) => l.msg === "engine at its concurrency limit: calls turned away");
    for (let i = 0; i < 5; i++) f.quarantine.onRejected(e1, "assemble", "at its limit");
    expect(warnings().map((l) => l.rejected)).toEqual([1]);
    vi.setSystemTime(T0 + 999);
    f.quarantine.onRejected(e1, "assemble", "at its limit");
    expect(warnings()).toHaveLength(1);
    vi.setSystemTime(T0 + 1_000);
    f.quarantine.onRejected(e1, "assemble", "at its limit");
    expect(warnings().map((l) => l.rejected)).toEqual([1, 6]);
    expect(e1.quarantine).toBeUndefined();
    expect(f.seenEvents).toEqual([]);
  });
});

describe("Quarantine: a store that cannot be written", () => {
  it("keeps the decision in memory and writes the record again at persistPending", async () => {
    const e1 = addSidecar(f.registry, new ScriptedEngine("e1"));
    // Another connection holds the write lock past the store's busy_timeout: the write fails for real.
    const locker = new Database(f.dbPath);
    try {
      locker.exec("BEGIN EXCLUSIVE");
      f.quarantine.onEngineFailure(e1, "compact", "error", "boom");
      await f.registry.localWritesSettled("e1");
      expect(e1.quarantine?.ejections).toBe(1);
      expect(f.quarantine.hasPending("e1")).toBe(true);
      expect(f.lines.find((l) => l.msg?.toString().startsWith("could not persist the quarantine record"))).toMatchObject({ engineId: "e1" });
      locker.exec("COMMIT");
    } finally {
      locker.close();
    }
    expect(await f.records()).toEqual(new Map());

    await f.quarantine.persistPending();
    expect(f.quarantine.hasPending("e1")).toBe(false);
    expect((await f.records()).get("e1")).toEqual(e1.quarantine);
  });
});
