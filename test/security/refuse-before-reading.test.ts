/**
 * Finding: "timing oracle and amplification on the view path" — agent B's Assemble / Compact /
 * AfterTurn on agent A's 30,000-message session answered the right NOT_FOUND, but only after the
 * session's whole active view was read and decoded (318–462 ms, against 1–2 ms for a missing id):
 * the time told B how long A's session is, and a few such calls at once stalled the server. Now the
 * store refuses another agent's session on its row, before any entry is read
 * (src/store/*\/active-view-read.ts with the caller's AgentScope), on SQLite and on PostgreSQL.
 *
 * Real contextd with auth required, tokens limited to `alice` and `bob`, on each store.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";

const MESSAGES = 30_000;
const ROUNDS = 9;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** How long `call` took to fail, and how. */
async function refusal(call: () => Promise<unknown>): Promise<{ ms: number; code: number; details: string }> {
  const started = performance.now();
  try {
    await call();
    return { ms: performance.now() - started, code: status.OK, details: "" };
  } catch (err) {
    const e = err as ServiceError;
    return { ms: performance.now() - started, code: e.code, details: e.details };
  }
}

describe.each(["sqlite", "postgres"] as const)("another agent's session is refused before it is read (%s)", (store) => {
  let contextd: ContextdProcess;
  let alice: ContextdClient;
  let bob: ContextdClient;
  let db: ScratchDatabase | undefined;

  beforeAll(async () => {
    db = store === "postgres" ? await createScratchDatabase() : undefined;
    contextd = await startContextd({
      config: {
        ...(db ? { store: db.url() } : {}),
        auth: {
          required: true,
          runtimes: [
            { token_env: "ALICE", agents: ["alice"] },
            { token_env: "BOB", agents: ["bob"] },
          ],
        },
      },
      env: { ALICE: "alice-token", BOB: "bob-token" },
    });
    alice = new ContextdClient({ address: contextd.address, token: "alice-token", timeoutMs: 60_000 });
    bob = new ContextdClient({ address: contextd.address, token: "bob-token", timeoutMs: 60_000 });
    const batch = (b: number) =>
      Array.from({ length: 1000 }, (_, i) => ({
        role: i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER,
        content: [{ block: { $case: "text" as const, value: { text: `message ${b * 1000 + i} of alice's long conversation` } } }],
      }));
    for (let b = 0; b < MESSAGES / 1000; b++) await alice.appendMessages({ session: { sessionId: "alice-long", agentId: "alice" }, messages: batch(b) });
  }, 240_000);
  afterAll(async () => {
    alice?.close();
    bob?.close();
    await contextd?.cleanup();
    await db?.drop();
  });

  const calls = {
    Assemble: (sessionId: string) => bob.assemble({ session: { sessionId }, tokenBudget: 100_000 }),
    Compact: (sessionId: string) => bob.compact({ session: { sessionId }, tokenBudget: 1_000 }),
    AfterTurn: (sessionId: string) => bob.afterTurn({ session: { sessionId } }),
  };

  it.each(Object.keys(calls) as Array<keyof typeof calls>)(
    "%s on a 30,000-message session of another agent answers NOT_FOUND in the time a missing id takes",
    async (rpc) => {
      const refused: number[] = [];
      const missing: number[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        const other = await refusal(() => calls[rpc]("alice-long"));
        const none = await refusal(() => calls[rpc](`no-such-session-${i}`));
        expect(other).toMatchObject({ code: status.NOT_FOUND, details: 'session "alice-long" not found' });
        expect(none).toMatchObject({ code: status.NOT_FOUND, details: `session "no-such-session-${i}" not found` });
        refused.push(other.ms);
        missing.push(none.ms);
      }
      // Before: ~300-460 ms against 1-2 ms. Within noise now: a few ms on a busy 2-core machine.
      expect(median(refused), `refused ${refused.map((m) => m.toFixed(1))} ms; missing ${missing.map((m) => m.toFixed(1))} ms`).toBeLessThan(
        2 * median(missing) + 15,
      );
    },
    60_000,
  );

  it("the owner still reads its session", async () => {
    expect((await alice.getSession({ session: { sessionId: "alice-long" } })).info?.messageCount).toBe(MESSAGES);
    const view = await alice.assemble({ session: { sessionId: "alice-long" }, tokenBudget: 1_000 });
    expect(view.messages.at(-1)?.content[0]?.block).toMatchObject({ value: { text: `message ${MESSAGES - 1} of alice's long conversation` } });
  }, 60_000);
});
