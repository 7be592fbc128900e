import { afterEach, describe, expect, it } from "vitest";

import { UnavailableError } from "../../src/contract/errors.js";
import { Role, type TranscriptEntry } from "../../src/contract/gen/contextd/v1/types.js";
import { messageText, textMessage } from "../../src/contract/messages.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import type { IdempotentAppend } from "../../src/store/types.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";

// Several pools on one database stand for several contextd replicas: each has its own connections,
// and nothing but PostgreSQL is shared between them.

const LABELS = { sessionKey: "k", agentId: "a" };
const cleanup: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function replicas(n: number, poolMax = 2): Promise<{ db: ScratchDatabase; stores: PostgresStore[] }> {
  const db = await createScratchDatabase();
  cleanup.push(() => db.drop());
  const stores: PostgresStore[] = [];
  for (let i = 0; i < n; i++) {
    const s = await PostgresStore.open(db.url({ pool_max: poolMax }));
    cleanup.push(() => s.close());
    stores.push(s);
  }
  return { db, stores };
}

const message = (text: string) => ({ message: textMessage(Role.ROLE_USER, text), tokenCount: 1 });
const textOf = (e: TranscriptEntry) => (e.entry?.$case === "message" ? messageText(e.entry.value) : `<${e.entry?.$case}>`);

/** The whole history of a session is one chain: seqs 1..n, each entry the child of the one before. */
function expectOneChain(entries: TranscriptEntry[]): void {
  expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
  expect(entries.map((e) => e.parentId)).toEqual(["", ...entries.slice(0, -1).map((e) => e.id)]);
}

/** Each writer's messages, in the order they appear in the history. */
function byWriter(entries: TranscriptEntry[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const t of entries.map(textOf)) {
    const w = t.split("-")[0];
    out.set(w, [...(out.get(w) ?? []), t]);
  }
  return out;
}

describe("PostgresStore across replicas (separate pools on one database)", () => {
  it("concurrent appends to one session keep contiguous seqs and every writer's order", async () => {
    const { stores } = await replicas(4);
    const ROUNDS = 30;
    await Promise.all(
      stores.map(async (store, w) => {
        for (let i = 0; i < ROUNDS; i++) {
          // Batches of 1–3 messages: a batch stays together and in order.
          const batch = Array.from({ length: 1 + ((i + w) % 3) }, (_, j) => message(`w${w}-${i}.${j}`));
          await store.appendMessages("shared", batch, LABELS);
        }
      }),
    );
    const entries = await stores[0].readEntries("shared", 0, 10_000);
    expectOneChain(entries);
    const expected = stores.map((_, w) =>
      Array.from({ length: ROUNDS }, (_, i) => Array.from({ length: 1 + ((i + w) % 3) }, (_, j) => `w${w}-${i}.${j}`)).flat(),
    );
    const seen = byWriter(entries);
    stores.forEach((_, w) => expect(seen.get(`w${w}`)).toEqual(expected[w]));
    // Batches are contiguous: no other writer's entry inside one.
    const texts = entries.map(textOf);
    for (let k = 1; k < texts.length; k++) {
      const [prev, cur] = [texts[k - 1], texts[k]];
      if (cur.endsWith(".1") || cur.endsWith(".2")) expect(prev.split(".")[0]).toBe(cur.split(".")[0]);
    }
    for (const s of stores) expect(await s.getSession("shared")).toMatchObject({ entryCount: texts.length, lastSeq: texts.length });
  });

  it("concurrent requests with one idempotency key through different replicas write once", async () => {
    const { stores } = await replicas(4);
    for (const sessionId of ["fresh", "existing"]) {
      if (sessionId === "existing") await stores[0].appendMessages(sessionId, [message("x-0")], LABELS);
      for (let k = 0; k < 5; k++) {
        const key = { key: `key-${k}`, requestHash: `hash-${k}` };
        const results: IdempotentAppend[] = await Promise.all(
          stores.map((s) => s.appendIdempotent(sessionId, [message(`k${k}-a`), message(`k${k}-b`)], LABELS, key)),
        );
        const writes = results.filter((r) => !r.replayed);
        expect(writes).toHaveLength(1);
        const ids = writes[0].replayed ? [] : writes[0].entries.map((e) => e.id);
        for (const r of results.filter((x) => x.replayed)) expect(r).toEqual({ replayed: true, entryIds: ids, tokenCounts: [1, 1] });
      }
      const entries = await stores[1].readEntries(sessionId, 0, 1000);
      expectOneChain(entries);
      expect(entries.map(textOf).filter((t) => t.startsWith("k"))).toEqual([0, 1, 2, 3, 4].flatMap((k) => [`k${k}-a`, `k${k}-b`]));
    }
  });

  it("connections killed under load: calls fail UNAVAILABLE or succeed, no acknowledged append is lost, none is duplicated", async () => {
    const { db, stores } = await replicas(3, 3);
    const WRITES = 40;
    let acked = 0;
    let kills = 0;
    let killing: Promise<unknown> = Promise.resolve();
    const admin = await db.client();
    cleanup.push(() => admin.end());
    // Every 12 acknowledged appends (an event, not a timer), every store connection is terminated
    // while the writers keep going — some in the middle of a transaction.
    const kill = () =>
      admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'contextd'", [db.name]).then(() => kills++);
    await Promise.all(
      stores.map(async (store, w) => {
        for (let i = 0; i < WRITES; i++) {
          const key = { key: `w${w}-${i}`, requestHash: "h" };
          // The runtime's retry: the same request with the same key until it is answered.
          for (;;) {
            try {
              await store.appendIdempotent("chaos", [message(`w${w}-${i}`)], LABELS, key);
              break;
            } catch (err) {
              // Most kills are absorbed (the store runs an uncommitted transaction again on a fresh
              // connection); one during COMMIT surfaces, and the retry is then answered once.
              if (!(err instanceof UnavailableError)) throw err;
            }
          }
          if (++acked % 12 === 0) killing = killing.then(kill);
        }
      }),
    );
    await killing;
    expect(kills).toBe(Math.floor((3 * WRITES) / 12));
    const entries = await stores[0].readEntries("chaos", 0, 10_000);
    expectOneChain(entries);
    expect(entries.length).toBe(3 * WRITES);
    const seen = byWriter(entries);
    for (let w = 0; w < 3; w++) expect(seen.get(`w${w}`)).toEqual(Array.from({ length: WRITES }, (_, i) => `w${w}-${i}`));
    // Every store still works normally afterwards.
    for (const s of stores) await s.ping();
  });
});
