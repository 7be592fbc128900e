/**
 * Finding: "one tenant must never slow another" had no mechanism behind it — any runtime token
 * could hold any number of calls and append at any rate, up to the server-wide limits every tenant
 * shares. Now per runtime token and per agent (limits.tenant, src/contract/tenant-limits.ts): calls
 * in flight, append bytes per second, and WatchEngines streams; a call over a limit is refused
 * RESOURCE_EXHAUSTED naming it, before any work is done for it, and other tenants are served.
 *
 * Real contextd with auth required: runtime tokens `noisy` (agents noisy-*) and `quiet` (agent
 * quiet); noisy's sessions are routed to the real TypeScript test engine, which holds their
 * Assembles open ("hang") until the test cancels them.
 */
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startTsEngine, type EngineProcess } from "../helpers/engine-process.js";
import { refusal, registryClient } from "../helpers/registry-client.js";

const LIMITS = { max_calls_in_flight: 4, max_calls_in_flight_per_agent: 3, append_bytes_per_second: 1_000_000, max_watch_streams: 2, max_calls_running: 1 };

describe("per-tenant limits keep one runtime token from taking the service from another", () => {
  let cd: ContextdProcess;
  let noisy: ContextdClient;
  let quiet: ContextdClient;
  let engine: EngineProcess;

  beforeAll(async () => {
    cd = await startContextd({
      config: {
        auth: {
          required: true,
          runtimes: [
            { name: "noisy", token_env: "NOISY", agents: ["noisy-*"] },
            { name: "quiet", token_env: "QUIET", agents: ["quiet"] },
          ],
          owners: { team: { token_env: "OWNER", engines: ["holder"] } },
        },
        slots: { agents: { "noisy-a": "holder", "noisy-b": "holder" } },
        engines: { timeouts: { assemble: "60s" } },
        limits: { tenant: LIMITS },
      },
      env: { NOISY: "noisy-token", QUIET: "quiet-token", OWNER: "owner-token" },
    });
    noisy = new ContextdClient({ address: cd.address, token: "noisy-token", timeoutMs: 60_000 });
    quiet = new ContextdClient({ address: cd.address, token: "quiet-token", timeoutMs: 60_000 });
    engine = await startTsEngine({ engineId: "holder", registry: cd.address, owner: "team", ownerToken: "owner-token" });
    expect((await engine.registered).ok).toBe(true);
    for (const agent of ["noisy-a", "noisy-b", "noisy-c"]) {
      await noisy.appendMessages({ session: { sessionId: `${agent}-session`, agentId: agent }, messages: [user("hello")] });
    }
    await quiet.appendMessages({ session: { sessionId: "quiet-session", agentId: "quiet" }, messages: [user("hello")] });
  }, 60_000);
  afterAll(async () => {
    noisy?.close();
    quiet?.close();
    await engine?.stop();
    await cd?.cleanup();
  });

  /** How many Assemble events `event` the engine logged from index `from` through `to`. */
  const seen = (event: string, from: number, to: number) =>
    engine
      .events()
      .slice(from, to + 1)
      .filter((e) => e.event === event && e.op === "assemble").length;

  /** `n` Assembles of `agent` held open by the engine; `release` cancels them and waits until the engine saw each end. */
  async function hold(agent: string, n: number) {
    engine.control({ assemble: "hang" });
    const controller = new AbortController();
    const from = engine.events().length;
    const calls = Array.from({ length: n }, () =>
      noisy.assemble({ session: { sessionId: `${agent}-session`, agentId: agent }, tokenBudget: 1_000 }, { signal: controller.signal }).catch(() => undefined),
    );
    await engine.waitForEvent((_, i) => i >= from && seen("call", from, i) === n);
    return {
      async release() {
        const before = engine.events().length;
        controller.abort();
        await Promise.all(calls);
        await engine.waitForEvent((_, i) => i >= before && seen("cancelled", before, i) === n);
        engine.control({});
      },
    };
  }

  it("calls waiting on a sidecar engine give their turn up: more than limits.tenant.max_calls_running of one token's calls reach the engine at once, and its other calls still run", async () => {
    const held = await hold("noisy-a", 2); // max_calls_running is 1: both reached the engine
    try {
      const answer = await noisy.assemble({ session: { sessionId: "noisy-c-session", agentId: "noisy-c" }, tokenBudget: 1_000 });
      expect(answer.messages.length).toBe(1);
    } finally {
      await held.release();
    }
  });

  it("a token at limits.tenant.max_calls_in_flight is refused RESOURCE_EXHAUSTED naming the limit, while another token is served", async () => {
    const a = await hold("noisy-a", 2);
    const b = await hold("noisy-b", 2);
    try {
      const over = await refusal(noisy.assemble({ session: { sessionId: "noisy-c-session", agentId: "noisy-c" }, tokenBudget: 1_000 }));
      expect(over.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(over.details).toBe(
        `runtime noisy has 4 calls in flight, its limit (limits.tenant.max_calls_in_flight); the call was not processed, retry it with backoff`,
      );
      const served = await quiet.assemble({ session: { sessionId: "quiet-session", agentId: "quiet" }, tokenBudget: 1_000 });
      expect(served.messages).toHaveLength(1);
    } finally {
      await a.release();
      await b.release();
    }
    // Released with its calls: noisy is served again.
    expect((await noisy.assemble({ session: { sessionId: "noisy-c-session", agentId: "noisy-c" }, tokenBudget: 1_000 })).messages).toHaveLength(1);
  });

  it("an agent at limits.tenant.max_calls_in_flight_per_agent is refused naming that limit, while its token's other agents are served", async () => {
    const a = await hold("noisy-a", 3);
    try {
      const over = await refusal(noisy.getSession({ session: { sessionId: "noisy-a-session" } }));
      expect(over.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(over.details).toContain(`agent "noisy-a" has 3 calls in flight, its limit (limits.tenant.max_calls_in_flight_per_agent)`);
      expect((await noisy.getSession({ session: { sessionId: "noisy-c-session" } })).info?.messageCount).toBe(1);
    } finally {
      await a.release();
    }
    expect((await noisy.getSession({ session: { sessionId: "noisy-a-session" } })).info?.messageCount).toBe(1);
  });

  it("appends over limits.tenant.append_bytes_per_second are refused naming the limit and when to retry, nothing written; another token appends meanwhile", async () => {
    const big = (n: number) => [{ role: Role.ROLE_USER, content: [{ block: { $case: "text" as const, value: { text: "a few words ".repeat(n / 12) } } }] }];
    const session = { sessionId: "noisy-c-bytes", agentId: "noisy-c" };
    // A full bucket admits one append larger than a second's worth (then owes it)...
    await noisy.appendMessages({ session, messages: big(2_400_000) });
    // ...and the next is refused until the debt is paid.
    const over = await refusal(noisy.appendMessages({ session, messages: big(10) }));
    expect(over.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(over.details).toMatch(
      /^runtime noisy is over its 1000000 bytes per second of appends \(limits\.tenant\.append_bytes_per_second\); the call was not processed, retry it in \d+ ms or later$/,
    );
    const waitMs = Number(/retry it in (\d+) ms/.exec(over.details)![1]);
    // 1.4 MB owed at 1 MB/s, less what the first append's own processing time paid back.
    expect(waitMs).toBeGreaterThan(100);
    expect(waitMs).toBeLessThanOrEqual(1_400);
    expect((await noisy.getSession({ session })).info?.messageCount).toBe(1);
    await quiet.appendMessages({ session: { sessionId: "quiet-session", agentId: "quiet" }, messages: big(100_000) });
  });

  it("WatchEngines streams over limits.tenant.max_watch_streams are refused per token; another token still watches", async () => {
    const noisyRegistry = registryClient(cd.address);
    const quietRegistry = registryClient(cd.address);
    const watch = (client: ReturnType<typeof registryClient>, token: string) => {
      const md = new Metadata();
      md.set("authorization", `Bearer ${token}`);
      return client.raw.watchEngines({ includeCurrent: true }, md);
    };
    const streams = [watch(noisyRegistry, "noisy-token"), watch(noisyRegistry, "noisy-token")];
    try {
      for (const s of streams) await new Promise((resolve) => s.once("data", resolve));
      const third = watch(noisyRegistry, "noisy-token");
      const err = await new Promise<ServiceError>((resolve) => third.on("error", resolve));
      expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(err.details).toBe("runtime noisy has 2 WatchEngines streams open, its limit (limits.tenant.max_watch_streams)");
      const other = watch(quietRegistry, "quiet-token");
      await new Promise((resolve) => other.once("data", resolve));
      other.cancel();
      other.on("error", () => undefined);
    } finally {
      for (const s of streams) {
        s.on("error", () => undefined);
        s.cancel();
      }
      noisyRegistry.close();
      quietRegistry.close();
    }
  });
});
