/**
 * The services contextd serves (src/server/served-services.ts), held to the contract: every RPC of
 * every generated service definition contextd serves has exactly one row in its service's table,
 * and each row's columns agree with what the proto says of its request — so that a new RPC cannot
 * ship without its authorization rule, its sessions, its deadline class and its handler, and a
 * request that names a session cannot be served without admitting it.
 */
import path from "node:path";
import { loadSync } from "@grpc/proto-loader";
import { describe, expect, it } from "vitest";
import * as audit from "../../../src/contract/gen/contextd/v1/audit.js";
import * as engine from "../../../src/contract/gen/contextd/v1/engine.js";
import * as host from "../../../src/contract/gen/contextd/v1/host.js";
import * as registry from "../../../src/contract/gen/contextd/v1/registry.js";
import * as session from "../../../src/contract/gen/contextd/v1/session.js";
import type { AuthRule, DeadlineClass } from "../../../src/contract/rpc-table.js";
import { RPCS, SERVED } from "./served-services-fixture.js";

/** Every service definition the generated code holds, by its fully-qualified name. */
const GENERATED = new Map(
  [audit, engine, host, registry, session].flatMap((module) =>
    Object.values(module)
      .filter((value): value is Record<string, { path: string; responseStream: boolean }> => {
        const first = typeof value === "object" && value !== null ? Object.values(value)[0] : undefined;
        return typeof first === "object" && first !== null && typeof (first as { path?: unknown }).path === "string";
      })
      .map((definition) => {
        const p = Object.values(definition)[0].path;
        return [p.slice(1, p.lastIndexOf("/")), definition] as const;
      }),
  ),
);
/** Served by every engine, called by contextd: the one generated service contextd does not serve. */
const ENGINE_SIDE = ["contextd.v1.ContextEngineService"];

/** The repository's protos, the source of truth the generated code is made from. */
const PROTO_DIR = path.resolve(import.meta.dirname, "../../../proto");
const protos = loadSync(
  ["session", "registry", "host", "audit"].map((f) => `contextd/v1/${f}.proto`),
  { includeDirs: [PROTO_DIR], keepCase: true },
);
/** The request fields of an RPC (by method path) that are SessionRefs, as the proto declares them, in camelCase. */
function sessionFields(methodPath: string): string[] {
  const service = methodPath.slice(1, methodPath.lastIndexOf("/"));
  const method = (protos[service] as Record<string, { requestType: { type: { field: { name: string; typeName: string }[] } } }>)[
    methodPath.slice(methodPath.lastIndexOf("/") + 1)
  ];
  return method.requestType.type.field
    .filter((f) => f.typeName === "SessionRef" || f.typeName.endsWith(".SessionRef"))
    .map((f) => f.name.replace(/_(\w)/g, (_, c: string) => c.toUpperCase()));
}
function requestFields(methodPath: string): string[] {
  const service = methodPath.slice(1, methodPath.lastIndexOf("/"));
  const method = (protos[service] as Record<string, { requestType: { type: { field: { name: string }[] } } }>)[
    methodPath.slice(methodPath.lastIndexOf("/") + 1)
  ];
  return method.requestType.type.field.map((f) => f.name);
}

const RULES: AuthRule[] = ["runtime", "reader", "owner", "operator", "host-grant"];
const CLASSES: DeadlineClass[] = ["call", "stream", "engine-call"];

describe("the served services' tables", () => {
  it("serve every generated service but the engines' own", () => {
    expect(SERVED.map((s) => s.name).sort()).toEqual([...GENERATED.keys()].filter((name) => !ENGINE_SIDE.includes(name)).sort());
    for (const s of SERVED) expect(s.definition).toBe(GENERATED.get(s.name));
  });

  it("have exactly one row per RPC of the generated definition, each with a rule, a deadline class and a handler", () => {
    for (const s of SERVED) {
      expect(Object.keys(s.table).sort(), s.name).toEqual(Object.keys(s.definition).sort());
      for (const [name, row] of Object.entries(s.table)) {
        const where = `${s.name}/${name}`;
        expect(RULES, where).toContain(row.auth);
        expect(CLASSES, where).toContain(row.deadline);
        expect(typeof (row as unknown as { handler: unknown }).handler, where).toBe("function");
      }
    }
    expect(RPCS.size).toBe(SERVED.reduce((n, s) => n + Object.keys(s.definition).length, 0));
  });

  it("declare a session use for every RPC whose request names a session, and for no other", () => {
    for (const s of SERVED) {
      for (const [name, method] of Object.entries(s.definition)) {
        const declared = s.table[name].session;
        const named = sessionFields(method.path);
        const where = method.path;
        if (s.name === "contextd.v1.SessionService") {
          // Each SessionRef field by name, with how the call uses it; nothing the request lacks.
          expect(Object.keys(declared as object).sort(), where).toEqual(named.sort());
          for (const use of Object.values(declared as object)) expect(["existing", "create", "view"], where).toContain(use);
        } else if (named.length > 0) {
          expect(declared, where).not.toBe("none");
        } else {
          expect(declared, where).toBe("none");
        }
      }
    }
  });

  it("state rules the request can satisfy: an owner to prove, a session for a host token", () => {
    for (const s of SERVED) {
      for (const [name, method] of Object.entries(s.definition)) {
        const row = s.table[name];
        if (row.auth === "owner") expect(requestFields(method.path), method.path).toContain("owner");
        if (row.auth === "host-grant") expect(sessionFields(method.path), method.path).toEqual(["session"]);
      }
    }
  });

  it("class as `stream` exactly the RPCs the proto makes server-streaming", () => {
    for (const s of SERVED) {
      for (const [name, method] of Object.entries(s.definition)) {
        expect(s.table[name].deadline === "stream", method.path).toBe(method.responseStream);
      }
    }
  });
});
