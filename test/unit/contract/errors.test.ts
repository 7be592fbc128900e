/**
 * Every typed error has a stable reason of contextd.v1.ErrorReason (proto/contextd/v1/errors.proto):
 * each ContextdError subclass in src/ and engines/ declares one or takes the one named after its
 * code, and the reason goes with the status code its proto comment names.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { status } from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { parseErrorReasons } from "../../../scripts/error-reasons.mjs";
import { ContextdError, reasonOfCode } from "../../../src/contract/errors.js";
import { ErrorReason } from "../../../src/contract/gen/contextd/v1/errors.js";

const ROOT = path.resolve(import.meta.dirname, "../../..");
const PROTO = parseErrorReasons(readFileSync(path.join(ROOT, "proto/contextd/v1/errors.proto"), "utf8"));

function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts") && !f.includes("gen/") && !f.includes("node_modules"))
    .map((f) => path.join(dir, f));
}

/**
 * Every exported class of src/ and engines/ that extends ContextdError (through any chain), with its
 * module; abstract ones (ModelError) are left to their subclasses.
 */
async function contextdErrorClasses(): Promise<Array<{ name: string; file: string; cls: typeof ContextdError }>> {
  const declared = new Map<string, { parent: string; file: string; abstract: boolean }>();
  for (const file of [...sources("src"), ...sources("engines")]) {
    for (const m of readFileSync(path.join(ROOT, file), "utf8").matchAll(/export (abstract )?class (\w+) extends (\w+)/g)) {
      declared.set(m[2], { parent: m[3], file, abstract: m[1] !== undefined });
    }
  }
  const descends = (name: string): boolean => name === "ContextdError" || (declared.has(name) && descends(declared.get(name)!.parent));
  const out = [];
  for (const [name, { file, abstract, parent }] of declared) {
    if (abstract || !descends(parent)) continue;
    const mod = (await import(path.join(ROOT, file))) as Record<string, unknown>;
    out.push({ name, file, cls: mod[name] as typeof ContextdError });
  }
  return out;
}

describe("error reasons", () => {
  it("every ContextdError subclass in src/ and engines/ maps to a reason of contextd.v1.ErrorReason: its own, or the one named after its code", async () => {
    const classes = await contextdErrorClasses();
    // The scan finds the classes it must (a broken regex would find none and pass).
    expect(classes.map((c) => c.name)).toEqual(expect.arrayContaining(["InvalidArgumentError", "SessionNotFoundError", "ModelRejectedError", "HostCallError"]));
    for (const { name, file, cls } of classes) {
      expect(cls.prototype, `${name} (${file}) is exported`).toBeInstanceOf(ContextdError);
      const declaredReason = cls.reason;
      if (declaredReason !== undefined) {
        // A declared reason: a value of the enum, never the zero one, whose comment says its code(s).
        const value = PROTO.find((v) => v.number === declaredReason);
        expect(value, `${name}.reason ${declaredReason} is a value of ErrorReason`).toBeDefined();
        expect(value!.number, `${name}.reason`).not.toBe(0);
      } else {
        // No declared reason: a status class of errors.ts, whose reason is named after its code.
        const err = new (cls as unknown as new (message: string) => ContextdError)("m");
        expect(ErrorReason[err.reason], name).toBe(status[err.code]);
      }
    }
  });

  it("every status code but OK has the reason named after it, with that code in its comment", () => {
    for (const code of Object.values(status).filter((c): c is status => typeof c === "number" && c !== status.OK)) {
      const reason = reasonOfCode(code);
      expect(ErrorReason[reason]).toBe(status[code]);
      expect(reason).toBe(code);
      expect(PROTO.find((v) => v.number === reason)?.codes).toEqual([status[code]]);
    }
  });

  it("every value of ErrorReason names the status codes it goes with, except the zero value and HOST_CALL_FAILED (the host's code)", () => {
    for (const v of PROTO) {
      if (v.name === "ERROR_REASON_UNSPECIFIED" || v.name === "HOST_CALL_FAILED") expect(v.codes).toEqual([]);
      else for (const c of v.codes.length ? v.codes : ["(none)"]) expect(Object.keys(status), `${v.name}: ${c}`).toContain(c);
    }
    // The parse and the generated enum agree.
    expect(PROTO.map((v) => v.name)).toEqual(Object.keys(ErrorReason).filter((k) => Number.isNaN(Number(k)) && k !== "UNRECOGNIZED"));
  });
});
