/**
 * The lossless engine as a real sidecar process next to a real contextd: a long coding session at
 * a 32k budget, an explicit compaction the host commits, a graceful restart (nothing lost), a
 * kill -9 (legacy serves the host's transcript in FALLBACK mode) and the way back.
 *
 * Needs the compiled engine: `npm run build` first (the `pretest` script does it). Set
 * LOSSLESS_TEST_DEBUG=1 to print the last engine process's and contextd's logs at the end.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mode, Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import type { AssembleResponse } from "../../src/contract/gen/contextd/v1/session.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { codingSession, moreTurns } from "../fixtures/coding-session.js";
import { textOf } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { contextText, toolPairViolations } from "../helpers/invariants.js";
import { eventually, registryClient } from "../helpers/registry-client.js";
import { startLossless, type LosslessProcess } from "./lossless-process.js";

const BUDGET = 32_000;
const SESSION = { sessionId: "lossless-long" };

describe("lossless engine with a real contextd", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;
  let registry: ReturnType<typeof registryClient>;
  let engine: LosslessProcess | undefined;
  let dbDir: string;
  let dbPath: string;
  const session = codingSession({ turns: 40, seed: 7 });
  /** What the runtime has appended so far, in order. */
  const appended: Message[] = [];
  let nextTurn = session.nextTurn;

  const startEngine = async (): Promise<LosslessProcess> => {
    const p = await startLossless({
      CONTEXTD_REGISTRY: cd.address,
      CONTEXTD_OWNER: "team",
      CONTEXTD_ENGINE_LISTEN: "127.0.0.1:0",
      CONTEXTD_LOG_LEVEL: "info",
      LOSSLESS_DB: dbPath,
    });
    // Registered, at this process's endpoint, and not quarantined.
    await eventually(
      async () => {
        const status = await registry.get("lossless").catch(() => undefined);
        return status && status.endpoint === p.address && !status.quarantine ? status : undefined;
      },
      20_000,
      100,
    );
    return p;
  };

  const append = async (messages: Message[]) => {
    await cx.appendMessages({ session: SESSION, messages });
    appended.push(...messages);
  };
  const assemble = () => cx.assemble({ session: SESSION, tokenBudget: BUDGET });
  const latestUser = () => [...appended].reverse().find((m) => m.role === Role.ROLE_USER)!;

  /** The invariants every answer keeps, whichever engine served it. */
  const checkContext = (res: AssembleResponse) => {
    expect(res.estimatedTokens).toBeLessThanOrEqual(BUDGET);
    expect(res.messages.reduce((n, m) => n + m.tokenCount, 0)).toBeLessThanOrEqual(BUDGET);
    expect(toolPairViolations(res.messages)).toEqual([]);
    const last = res.messages[res.messages.length - 1];
    expect(last.role).toBe(Role.ROLE_USER);
    expect(textOf(last)).toBe(textOf(latestUser()));
  };
  const expectPlantedFacts = (res: AssembleResponse) => {
    const text = contextText(res.messages);
    for (const [fact, value] of Object.entries(session.planted)) expect(text, `planted ${fact}`).toContain(value);
  };
  const storedCount = () => {
    const db = new Database(dbPath, { readonly: true, fileMustExist: true });
    try {
      return (db.prepare("SELECT COUNT(*) AS n FROM messages WHERE session_id = ?").get(SESSION.sessionId) as { n: number }).n;
    } finally {
      db.close();
    }
  };
  const hostMessageCount = async () => {
    let n = 0;
    for await (const e of cx.transcript(SESSION.sessionId)) if (e.entry?.$case === "message") n++;
    return n;
  };
  const summaryIds = () => {
    const db = new Database(dbPath, { readonly: true, fileMustExist: true });
    try {
      return (db.prepare("SELECT summary_id FROM summaries WHERE session_id = ?").all(SESSION.sessionId) as Array<{ summary_id: string }>).map(
        (r) => r.summary_id,
      );
    } finally {
      db.close();
    }
  };

  beforeAll(async () => {
    dbDir = fs.mkdtempSync(path.join(os.tmpdir(), "lossless-it-"));
    dbPath = path.join(dbDir, "lossless.db");
    cd = await startContextd({ config: { slots: { context_engine: "lossless" } } });
    cx = new ContextdClient({ address: cd.address });
    registry = registryClient(cd.address);
    engine = await startEngine();
  });

  afterAll(async () => {
    if (process.env.LOSSLESS_TEST_DEBUG) console.log(engine?.logs(), cd?.logs());
    await engine?.stop().catch(() => undefined);
    cx?.close();
    registry?.close();
    await cd?.cleanup();
    fs.rmSync(dbDir, { recursive: true, force: true });
  });

  it("serves a long coding session within a 32k budget, keeping the first turns' facts", async () => {
    expect(session.messages.length).toBeGreaterThanOrEqual(150);
    const starts = session.turnStarts;
    for (let t = 0; t + 1 < starts.length; t++) {
      // A turn's messages plus the next request (the first chunk also holds turn 0's request).
      const from = t === 0 ? 0 : starts[t] + 1;
      const chunk = session.messages.slice(from, starts[t + 1] + 1);
      await append(chunk);
      const res = await assemble();
      expect(res.engineId).toBe("lossless");
      expect(res.mode).toBe(Mode.MODE_NORMAL);
      checkContext(res);
    }
    expect(appended.length).toBe(session.messages.length);
    const info = (await cx.getSession({ session: SESSION })).info!;
    expect(info.totalTokens).toBeGreaterThanOrEqual(120_000);
    const res = await assemble();
    expectPlantedFacts(res);
    // The oldest history is there as summaries, each saying what it covers.
    expect(textOf(res.messages[0])).toMatch(/^\[lossless summary S\d+ · depth \d+ · covers messages \S+ \(\d+ messages, \d+ tokens\)\]/);
    expect(storedCount()).toBe(session.messages.length);
  });

  it("answers an explicit Compact with a result the host commits", async () => {
    const res = await cx.compact({ session: SESSION, tokenBudget: BUDGET, force: false });
    expect(res.engineId).toBe("lossless");
    expect(res.compacted).toBe(true);
    const details = res.result!.details as Record<string, unknown>;
    expect(details.engine).toBe("lossless");
    expect(Number(details.depth)).toBeGreaterThanOrEqual(1);
    expect(Number(details.top_level_summaries)).toBeLessThanOrEqual(12);
    expect(res.result!.summary).toContain("[lossless summary S");
    expect(res.result!.tokensAfter).toBeLessThan(res.result!.tokensBefore);
    // The host committed it: the transcript has a compaction entry whose first kept entry exists.
    const entries = [];
    for await (const e of cx.transcript(SESSION.sessionId)) entries.push(e);
    const compaction = entries.filter((e) => e.entry?.$case === "compaction").pop();
    expect(compaction?.entry?.$case === "compaction" && compaction.entry.value.engineId).toBe("lossless");
    const firstKept = compaction?.entry?.$case === "compaction" ? compaction.entry.value.firstKeptEntryId : "";
    expect(entries.some((e) => e.id === firstKept && e.entry?.$case === "message")).toBe(true);
    const after = await assemble();
    expect(after.engineId).toBe("lossless");
    checkContext(after);
    expectPlantedFacts(after);
  });

  it("survives its own restart: nothing lost, messages appended meanwhile caught up", async () => {
    const summariesBefore = summaryIds();
    expect(summariesBefore.length).toBeGreaterThan(0);
    expect(await engine!.stop()).toBe(0);

    // While it is down the host serves the session with legacy.
    await append(moreTurns(nextTurn, 3, 7));
    nextTurn += 3;
    const down = await assemble();
    expect(down.engineId).toBe("legacy");
    expect(down.mode).toBe(Mode.MODE_FALLBACK);
    checkContext(down);

    engine = await startEngine();
    const res = await assemble();
    expect(res.engineId).toBe("lossless");
    expect(res.mode).toBe(Mode.MODE_NORMAL);
    checkContext(res);
    expectPlantedFacts(res);
    expect(storedCount()).toBe(await hostMessageCount());
    expect(summaryIds()).toEqual(expect.arrayContaining(summariesBefore));

    await append(moreTurns(nextTurn, 2, 7));
    nextTurn += 2;
    const more = await assemble();
    expect(more.engineId).toBe("lossless");
    checkContext(more);
    expect(storedCount()).toBe(await hostMessageCount());
  });

  it("after kill -9 legacy serves the host's transcript in FALLBACK, and lossless takes over again", async () => {
    await engine!.kill9();
    await append(moreTurns(nextTurn, 2, 7));
    nextTurn += 2;
    const fallback = await assemble();
    expect(fallback.engineId).toBe("legacy");
    expect(fallback.mode).toBe(Mode.MODE_FALLBACK);
    expect(fallback.fallbackReason).not.toBe("");
    checkContext(fallback);

    engine = await startEngine();
    const back = await eventually(
      async () => {
        const res = await assemble();
        return res.engineId === "lossless" ? res : undefined;
      },
      15_000,
      200,
    );
    expect(back.mode).toBe(Mode.MODE_NORMAL);
    checkContext(back);
    expectPlantedFacts(back);
    expect(storedCount()).toBe(await hostMessageCount());

    // And it can still commit a compaction over a view legacy compacted meanwhile.
    await append(moreTurns(nextTurn, 2, 7));
    nextTurn += 2;
    const compacted = await cx.compact({ session: SESSION, tokenBudget: BUDGET, force: true });
    expect(compacted.engineId).toBe("lossless");
    expect(compacted.ok).toBe(true);
    checkContext(await assemble());
  });
});
