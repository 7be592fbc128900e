import pino from "pino";
import { describe, expect, it } from "vitest";
import { buildEngineInfo, serveEngine, TurnMaintenanceMode, validateDefinition, type EngineDefinition } from "../../../../src/sdk/engine-sdk.js";
import { parseListen } from "../../../../src/sdk/engine/options.js";

const logger = pino({ level: "silent" });
const base = {
  info: { id: "x", name: "X" },
  assemble: () => ({}),
  compact: () => ({}),
};

describe("engine definition validation", () => {
  it.each<[string, unknown, RegExp]>([
    ["not an object", null, /expected an object/],
    ["no info", { ...base, info: undefined }, /`info` is missing/],
    ["empty id", { ...base, info: { id: "  ", name: "X" } }, /`info.id` must be a non-empty string/],
    ["padded id", { ...base, info: { id: " x", name: "X" } }, /whitespace/],
    ["reserved id", { ...base, info: { id: "legacy", name: "X" } }, /reserved/],
    ["empty name", { ...base, info: { id: "x", name: "" } }, /`info.name` must be a non-empty string/],
    ["bad mode", { ...base, info: { id: "x", name: "X", turnMaintenanceMode: "sometimes" } }, /turnMaintenanceMode/],
    ["bad requirements", { ...base, info: { id: "x", name: "X", hostRequirements: "llm-complete" } }, /hostRequirements/],
    ["no assemble", { ...base, assemble: undefined }, /`assemble` must be a function \(it is missing\)/],
    ["compact not a function", { ...base, compact: {} }, /`compact` must be a function \(it is a object\)/],
    ["ingest not a function", { ...base, ingest: true }, /`ingest` must be a function when present/],
    ["afterTurn not a function", { ...base, afterTurn: "yes" }, /`afterTurn` must be a function when present/],
    ["misspelt method", { ...base, afterturn: () => undefined }, /unknown member `afterturn`: did you mean `afterTurn`\?/],
  ])("rejects %s", (_label, def, message) => {
    expect(() => validateDefinition(def)).toThrow(message);
  });

  it("serveEngine throws before serving anything", async () => {
    await expect(serveEngine({ ...base, info: { id: "", name: "X" } } as EngineDefinition, { registry: "", logger, handleSignals: false })).rejects.toThrow(
      /serveEngine: invalid engine definition: `info.id`/,
    );
  });

  it("accepts class instances (methods on the prototype) and derives capabilities from them", () => {
    class Engine {
      info = { id: "cls", name: "Class engine" };
      assemble() {
        return {};
      }
      compact() {
        return {};
      }
      maintain() {
        return {};
      }
    }
    const def = new Engine();
    validateDefinition(def);
    const info = buildEngineInfo(def);
    expect(info.capabilities?.maintain).toBe(true);
    expect(info.capabilities?.afterTurn).toBe(false);
    expect(info.turnMaintenanceMode).toBe(TurnMaintenanceMode.TURN_MAINTENANCE_MODE_FOREGROUND);
  });

  it("rejects bad options with the option named", async () => {
    await expect(serveEngine(base, { registry: "", listen: "nonsense", logger, handleSignals: false })).rejects.toThrow(/listen address "nonsense"/);
    await expect(serveEngine(base, { registry: "", heartbeatMs: -1, logger, handleSignals: false })).rejects.toThrow(/`heartbeatMs` must be a positive/);
  });

  it("parses listen addresses", () => {
    expect(parseListen("127.0.0.1:0")).toEqual({ kind: "tcp", host: "127.0.0.1", port: 0 });
    expect(parseListen("[::1]:5000")).toEqual({ kind: "tcp", host: "::1", port: 5000 });
    expect(parseListen(":7000")).toEqual({ kind: "tcp", host: "0.0.0.0", port: 7000 });
    expect(parseListen("unix:/tmp/e.sock")).toEqual({ kind: "unix", target: "unix:/tmp/e.sock" });
    expect(() => parseListen("host:99999")).toThrow(/invalid port/);
  });
});
