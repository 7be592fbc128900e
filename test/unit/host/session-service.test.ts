/**
 * SessionService's table (src/host/session-service.ts), against the generated service definition:
 * every RPC the proto declares has its row — a handler that resolves the sessions it names — and
 * the table has no row the proto does not declare.
 */
import { describe, expect, it } from "vitest";
import { SessionServiceService } from "../../../src/contract/gen/contextd/v1/session.js";
import { DEFAULT_TENANT_LIMITS, TenantLimits } from "../../../src/contract/tenant-limits.js";
import { sessionHandlers } from "../../../src/host/session-service.js";

describe("SessionService's table of RPCs", () => {
  it("has one row per RPC of the generated service definition, each a handler", () => {
    const never = new Proxy({}, { get: () => () => Promise.reject(new Error("not called by this test")) });
    const table = sessionHandlers(
      never as never,
      never as never,
      never as never,
      never as never,
      never as never,
      never as never,
      new TenantLimits(DEFAULT_TENANT_LIMITS),
    );
    expect(Object.keys(table).sort()).toEqual(Object.keys(SessionServiceService).sort());
    for (const handler of Object.values(table)) expect(typeof handler).toBe("function");
  });
});
