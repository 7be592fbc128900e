/**
 * The SQLite store's search index is written after the append (src/store/sqlite/search-index.ts):
 * an append logs its entries in its own transaction and an indexer thread applies the log to an
 * index file of its own. This kills contextd with SIGKILL again and again while runtimes append
 * batches, right after an append is answered (so the index is usually behind, and checked to have
 * been behind at least once), restarts it on the same files, and then checks the guarantee
 * search.proto states: every stored message is found, exactly once, and every acknowledged append
 * is stored.
 */
import path from "node:path";

import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";

import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { SearchScope } from "../../src/contract/gen/contextd/v1/search.js";
import { textMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { getFreePort } from "../helpers/free-port.js";
import { messageTexts, readEntries } from "../helpers/runtime-load.js";

const KILLS = 4;
const WRITERS = 3;
const BATCH = 300;
const AGENT = "crash-agent";

const cleanup: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => undefined);
});

/** Log rows written and applied, read from the files of a stopped contextd. */
function indexLag(dataDir: string): number {
  const store = new Database(path.join(dataDir, "contextd.db"));
  const index = new Database(path.join(dataDir, "contextd.db-search"));
  try {
    const logged = (store.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'search_log'").get() as { seq: number } | undefined)?.seq ?? 0;
    const applied = (index.prepare("SELECT applied_op FROM search_state").get() as { applied_op: number } | undefined)?.applied_op ?? 0;
    return logged - applied;
  } finally {
    store.close();
    index.close();
  }
}

describe("the SQLite search index across SIGKILLs", () => {
  it("finds every stored message exactly once after restarts, the acknowledged ones included, though the index was behind when contextd died", async () => {
    const address = `127.0.0.1:${await getFreePort()}`;
    let cd: ContextdProcess = await startContextd({ config: { listen: address } });
    const processes = [cd];
    cleanup.push(async () => {
      for (const p of processes.reverse()) await p.cleanup();
    });
    const client = new ContextdClient({ address });
    cleanup.push(async () => client.close());

    const acked: string[] = [];
    let ackedBatches = 0;
    let stop = false;
    let wake: (() => void) | undefined;
    const writers = Array.from({ length: WRITERS }, async (_, w) => {
      for (let b = 0; !stop; b++) {
        const messages = Array.from({ length: BATCH }, (_, i) => textMessage(Role.ROLE_USER, `crashword w${w}b${b}m${i} of the run`));
        try {
          await client.appendMessages({ session: { sessionId: `crash-${w}`, agentId: AGENT }, messages });
          acked.push(...messages.map((m) => (m.content[0].block as { value: { text: string } }).value.text));
          ackedBatches++;
          wake?.();
        } catch {
          // Killed mid-call: stored or not, the check below reads what is.
        }
      }
    });
    const lags: number[] = [];
    for (let k = 0; k < KILLS; k++) {
      const target = ackedBatches + 2 + Math.floor(Math.random() * 4);
      while (ackedBatches < target) await new Promise<void>((resolve) => (wake = resolve));
      await cd.kill9();
      lags.push(indexLag(cd.dataDir));
      cd = await cd.restart();
      processes.push(cd);
    }
    const target = ackedBatches + 2;
    while (ackedBatches < target) await new Promise<void>((resolve) => (wake = resolve));
    stop = true;
    await Promise.all(writers);
    expect(
      lags.some((l) => l > 0),
      `the index was behind at some kill (log rows not applied at each: ${lags.join(", ")})`,
    ).toBe(true);

    const stored = new Map<string, string>();
    for (let w = 0; w < WRITERS; w++) {
      const entries = await readEntries(client, `crash-${w}`);
      const texts = messageTexts(entries);
      entries.forEach((e, i) => stored.set(`crash-${w}/${e.seq}`, texts[i]));
    }
    const storedTexts = new Set(stored.values());
    expect(acked.filter((t) => !storedTexts.has(t))).toEqual([]);

    // Every stored message, once: the agent's sessions paged through by a word every message holds.
    const hits: string[] = [];
    for (let pageToken = ""; ;) {
      const page = await client.searchTranscript({
        session: { sessionId: "crash-0", agentId: AGENT },
        query: "crashword",
        scope: SearchScope.SEARCH_SCOPE_AGENT,
        pageSize: 100,
        pageToken,
      });
      hits.push(...page.hits.map((h) => `${h.sessionId}/${h.seq}`));
      if (!page.nextPageToken) break;
      pageToken = page.nextPageToken;
    }
    expect(new Set(hits).size).toBe(hits.length);
    expect(hits.sort()).toEqual([...stored.keys()].sort());
    // And one message by its own words, just appended.
    const last = acked[acked.length - 1];
    const own = await client.searchTranscript({
      session: { sessionId: "crash-0", agentId: AGENT },
      query: last.split(" ")[1],
      scope: SearchScope.SEARCH_SCOPE_AGENT,
    });
    expect(own.hits).toHaveLength(1);
    console.info(
      `[search-index-crash] ${KILLS} kills, log rows behind at each: ${lags.join(", ")}; ${stored.size} messages stored, ${acked.length} acknowledged`,
    );
  });
});
