/**
 * Found while measuring per-tenant limits (issue 26): a call refused by a middleware step when its
 * metadata arrived (load shedding, a tenant's limit) was answered before its request was read.
 * HTTP/2 flow control counts a stream's unread bytes against the whole connection, so a client
 * sending large requests into refusals starved its own connection: after a few refusals of 50 KB
 * appends not one admitted call on that connection completed again (they ran into their deadlines),
 * while the client buffered every refused request. Now a refused call is answered once its request
 * has been read (src/server/middleware/interceptors.ts `chain`).
 *
 * Real contextd; one runtime connection, more closed-loop writers than `server.max_concurrent_calls`.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

const LIMIT = 8;
const WRITERS = 24;
const WANTED = 150;

describe("refused calls do not stall the other calls of their connection", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;

  beforeAll(async () => {
    cd = await startContextd({ config: { server: { max_concurrent_calls: LIMIT } } });
    cx = new ContextdClient({ address: cd.address, timeoutMs: 15_000 });
  });
  afterAll(async () => {
    cx?.close();
    await cd?.cleanup();
  });

  it("writers of 50 KB appends over server.max_concurrent_calls on one connection: every call OK or RESOURCE_EXHAUSTED, and the admitted ones keep completing", async () => {
    const text = "a few words of a long tool result ".repeat(1_500); // ~50 KB
    const outcomes = { ok: 0, shed: 0, other: [] as string[] };
    const writer = async (w: number) => {
      for (let i = 0; outcomes.ok < WANTED && outcomes.other.length === 0; i++) {
        try {
          await cx.appendMessages({
            session: { sessionId: `writer-${w}` },
            messages: [{ role: Role.ROLE_USER, content: [{ block: { $case: "text", value: { text: `${i} ${text}` } } }] }],
          });
          outcomes.ok++;
        } catch (err) {
          const e = err as ServiceError;
          if (e.code === status.RESOURCE_EXHAUSTED && e.details.includes("server.max_concurrent_calls")) outcomes.shed++;
          else outcomes.other.push(`${status[e.code]}: ${e.details}`);
        }
      }
    };
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    // Before: the first deadlines expired after a few dozen answers (DEADLINE_EXCEEDED).
    expect(outcomes.other).toEqual([]);
    expect(outcomes.ok).toBeGreaterThanOrEqual(WANTED);
    expect(outcomes.shed).toBeGreaterThan(0);
  }, 120_000);
});
