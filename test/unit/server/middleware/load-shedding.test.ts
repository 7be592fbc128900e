/**
 * The load-shedding step of the server's middleware (src/server/middleware/load-shedding.ts): what
 * it counts, what it refuses and with which status, what it never touches, and that a slot comes
 * back exactly once. Under real gRPC and a real storm: test/reliability/overload.test.ts.
 */
import { Writable } from "node:stream";
import { status } from "@grpc/grpc-js";
import { pino } from "pino";
import { errorDetails } from "../../../../src/contract/error-details.js";
import { describe, expect, it } from "vitest";
import type { MethodInfo } from "../../../../src/server/middleware/step.js";
import { InFlightLimit, isExempt as isExemptOf, loadShedding } from "../../../../src/server/middleware/load-shedding.js";
import { RPCS } from "../served-services-fixture.js";

/** Against the served services' rows: their deadline class decides. */
const isExempt = (m: MethodInfo) => isExemptOf(m, RPCS);

const method = (path: string, type: MethodInfo["type"] = "unary"): MethodInfo => ({
  path,
  service: path.slice(1, path.lastIndexOf("/")),
  name: path.slice(path.lastIndexOf("/") + 1),
  type,
});
const APPEND = method("/contextd.v1.SessionService/AppendMessages");
const REGISTER = method("/contextd.v1.RegistryService/RegisterEngine");
const EXEMPT = [
  method("/grpc.health.v1.Health/Check"),
  method("/grpc.health.v1.Health/Watch", "server_stream"),
  method("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "bidi_stream"),
  method("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "bidi_stream"),
  method("/contextd.v1.HostService/ReadTranscript"),
  method("/contextd.v1.RegistryService/WatchEngines", "server_stream"),
];

function setup(limitN: number) {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split("\n")) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  let clock = 1_000_000;
  const shed: string[] = [];
  const limit = new InFlightLimit(limitN);
  const step = loadShedding({ rpcs: RPCS, limit, logger: pino({ level: "info" }, sink), shed: (m) => shed.push(m.name), now: () => clock });
  return { limit, step, shed, lines, tick: (ms: number) => (clock += ms) };
}

const md = undefined as never; // the step does not read the metadata

describe("InFlightLimit", () => {
  it("admits up to the limit and never goes below zero", () => {
    const l = new InFlightLimit(2);
    expect([l.tryAcquire(), l.tryAcquire(), l.tryAcquire()]).toEqual([true, true, false]);
    expect(l.active).toBe(2);
    l.release();
    expect(l.tryAcquire()).toBe(true);
    l.release();
    l.release();
    l.release();
    expect(l.active).toBe(0);
  });
});

describe("loadShedding", () => {
  it("refuses calls over the limit with RESOURCE_EXHAUSTED naming the limit and its key, across services, with reason THROTTLED", () => {
    const { limit, step, shed } = setup(2);
    const a = step(APPEND);
    const b = step(REGISTER);
    expect(a.metadata!(md)).toBeUndefined();
    expect(b.metadata!(md)).toBeUndefined();
    const c = step(APPEND);
    const refused = c.metadata!(md);
    const details = "contextd is at its limit of 2 concurrent calls (server.max_concurrent_calls); the call was not processed, retry it with backoff";
    expect(refused).toMatchObject({ code: status.RESOURCE_EXHAUSTED, details });
    expect(errorDetails(refused)).toEqual({
      reason: "THROTTLED",
      domain: "contextd.dev",
      metadata: { limit: "server.max_concurrent_calls", limit_value: "2" },
      fieldViolations: [],
    });
    expect(shed).toEqual(["AppendMessages"]);
    // The refused call's end gives nothing back: it held no slot.
    c.end!({ code: status.RESOURCE_EXHAUSTED, details: "" });
    expect(limit.active).toBe(2);
  });

  it("gives a slot back once per admitted call, however it ended", () => {
    const { limit, step } = setup(1);
    const a = step(APPEND);
    expect(a.metadata!(md)).toBeUndefined();
    a.end!({ code: status.CANCELLED, details: "cancelled by the caller" });
    a.end!({ code: status.OK, details: "" }); // a second end (status after cancel) frees nothing more
    expect(limit.active).toBe(0);
    const b = step(APPEND);
    expect(b.metadata!(md)).toBeUndefined();
    expect(step(APPEND).metadata!(md)).toBeDefined();
    b.end!({ code: status.INTERNAL, details: "boom" });
    expect(step(APPEND).metadata!(md)).toBeUndefined();
  });

  it("never counts or refuses health, reflection, HostService callbacks or WatchEngines", () => {
    const { limit, step, shed } = setup(1);
    expect(step(APPEND).metadata!(md)).toBeUndefined(); // the server is at its limit now
    for (const m of EXEMPT) {
      expect(isExempt(m), m.path).toBe(true);
      const s = step(m);
      expect(s.metadata?.(md), m.path).toBeUndefined();
      s.end?.({ code: status.OK, details: "" });
    }
    expect(limit.active).toBe(1);
    expect(shed).toEqual([]);
    expect(isExempt(APPEND) || isExempt(REGISTER)).toBe(false);
  });

  it("warns at most once a second, with the number shed since the last warning", () => {
    const { step, lines, tick } = setup(1);
    step(APPEND).metadata!(md);
    for (let i = 0; i < 5; i++) step(APPEND).metadata!(md);
    tick(999);
    step(REGISTER).metadata!(md);
    tick(1);
    step(APPEND).metadata!(md);
    const warnings = lines.filter((l) => l.msg === "server at its concurrency limit: calls shed");
    expect(warnings.map((w) => ({ level: w.level, shed: w.shed, limit: w.limit, key: w.key }))).toEqual([
      { level: 40, shed: 1, limit: 1, key: "server.max_concurrent_calls" },
      { level: 40, shed: 6, limit: 1, key: "server.max_concurrent_calls" },
    ]);
  });
});
