/**
 * Deletion that reaches every engine (ContextEngineService.ForgetSession), all REAL processes:
 * contextd with the `recall` (Python) and `lossless` (TypeScript) sample engines as managed
 * sidecars, each with its SQLite file in the test's data dir.
 *
 * A unique string is planted in a session served first by recall, then (after a restart with the
 * slot moved) by lossless, and in its subagent child; a control session holds another unique
 * string. DeleteSession records a forget delivery for each engine that served each deleted session
 * — both engines, not only the one routed to now — and contextd delivers them. Then, with every
 * process stopped and every SQLite file checkpointed and vacuumed, the planted string is in no file
 * of the data dir (contextd's store, its search index, both engines' files), while the control
 * string still is: the search would have found it.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SubagentContextMode } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { assistant, user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { PYTHON, requirePythonGrpc } from "../helpers/python.js";
import { LOSSLESS_MAIN } from "../engines-lossless/lossless-process.js";

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

/** Checkpoints every SQLite database file under `dir` (its WAL into it, then truncated) and vacuums it. */
function checkpointAndVacuum(dir: string): string[] {
  const dbs = filesUnder(dir).filter((f) => {
    const head = Buffer.alloc(16);
    const fd = fs.openSync(f, "r");
    try {
      fs.readSync(fd, head, 0, 16, 0);
    } finally {
      fs.closeSync(fd);
    }
    return head.toString("latin1") === "SQLite format 3\u0000";
  });
  for (const f of dbs) {
    const db = new Database(f);
    try {
      db.pragma("busy_timeout = 5000");
      db.pragma("wal_checkpoint(TRUNCATE)");
      db.exec("VACUUM");
      db.pragma("wal_checkpoint(TRUNCATE)");
    } finally {
      db.close();
    }
  }
  return dbs;
}

/** The files under `dir` whose bytes hold `text`. */
function filesHolding(dir: string, text: string): string[] {
  const needle = Buffer.from(text, "utf8");
  return filesUnder(dir).filter((f) => fs.readFileSync(f).includes(needle));
}

describe("DeleteSession reaches every engine that served the session", () => {
  const planted = `plantedsecret${randomBytes(6).toString("hex")}`;
  const control = `keptsecret${randomBytes(6).toString("hex")}`;
  let dataDir: string;
  let contextd: ContextdProcess | undefined;

  function start(slot: string): Promise<ContextdProcess> {
    return startContextd({
      dataDir,
      config: {
        slots: { context_engine: slot },
        forget: { poll_interval: "200ms", backoff: { initial: "100ms", max: "1s" } },
        engines: {
          managed: [
            { id: "recall", command: [PYTHON, "engines/recall/main.py"], env: { RECALL_DB: path.join(dataDir, "recall", "recall.db") } },
            { id: "lossless", command: [process.execPath, LOSSLESS_MAIN], env: { LOSSLESS_DB: path.join(dataDir, "lossless", "lossless.db") } },
          ],
        },
      },
    });
  }

  async function bothRegistered(cd: ContextdProcess): Promise<void> {
    for (const id of ["recall", "lossless"]) await cd.waitForLog((l) => l.sidecar === id && l.msg === "registered with the registry", 60_000);
  }

  beforeAll(() => {
    requirePythonGrpc();
    if (!fs.existsSync(LOSSLESS_MAIN)) throw new Error(`${LOSSLESS_MAIN} is missing: run \`npm run build\` first`);
    dataDir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? "/tmp", "session-deletion-"));
  });
  afterAll(async () => {
    await contextd?.cleanup();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("the planted string is in no file of contextd's store or either engine's after the delete; the control session's string still is", async () => {
    const session = { sessionId: "doomed", agentId: "coder" };
    const child = { sessionId: "doomed-child", agentId: "coder" };
    const keep = { sessionId: "kept", agentId: "coder" };

    // Served by recall: the session, its subagent child, and the control session.
    contextd = await start("recall");
    await bothRegistered(contextd);
    let cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    await cx.appendMessages({ session, messages: [user(`remember the code word ${planted} for later`), assistant(`noted: ${planted}`)] });
    await cx.appendMessages({ session: keep, messages: [user(`remember the code word ${control} for later`), assistant(`noted: ${control}`)] });
    await cx.prepareSubagentSpawn({ parent: session, child, contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK });
    await cx.appendMessages({ session: child, messages: [user(`the child also knows ${planted}`)] });
    for (const s of [session, child]) await cx.assemble({ session: s, tokenBudget: 50_000, prompt: `what was the code word ${planted}?` });
    await cx.assemble({ session: keep, tokenBudget: 50_000, prompt: `what was the code word ${control}?` });
    cx.close();
    await contextd.stop();

    // The slot moves to lossless: the same sessions are served by it now (it imports their transcripts).
    contextd = await start("lossless");
    await bothRegistered(contextd);
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
    await cx.appendMessages({ session, messages: [user(`once more: ${planted}`)] });
    await cx.appendMessages({ session: keep, messages: [user(`once more: ${control}`)] });
    for (const s of [session, keep]) {
      await cx.assemble({ session: s, tokenBudget: 50_000 });
      await cx.compact({ session: s, tokenBudget: 50_000, force: true });
    }
    expect(filesHolding(path.join(dataDir, "lossless"), planted).length).toBeGreaterThan(0);
    expect(filesHolding(path.join(dataDir, "recall"), planted).length).toBeGreaterThan(0);

    const deleted = await cx.deleteSession({ session });
    // The session by both engines, the child by recall (it was never served after the move).
    expect(deleted).toMatchObject({ deleted: true, deletedSubagents: 1, forgetDeliveries: 3 });
    const forgotten = async (engineId: string, sessionId: string) =>
      contextd!.waitForLog((l) => l.msg === "engine forgot the deleted session" && l.engineId === engineId && l.sessionId === sessionId, 30_000);
    await Promise.all([forgotten("recall", "doomed"), forgotten("lossless", "doomed"), forgotten("recall", "doomed-child")]);
    const metrics = await (await fetch(`http://${contextd.metricsAddress}/metrics`)).text();
    expect(metrics).toMatch(/^contextd_forget_deliveries_pending 0$/m);
    expect(metrics).toMatch(/^contextd_forget_deliveries_total\{engine="recall",outcome="delivered"\} 2$/m);
    expect(metrics).toMatch(/^contextd_forget_deliveries_total\{engine="lossless",outcome="delivered"\} 1$/m);
    expect(metrics).toMatch(/^contextd_sessions_deleted_total\{reason="deleted"\} 2$/m);
    await expect(cx.getSession({ session: child })).rejects.toMatchObject({ code: 5 });
    cx.close();
    expect(await contextd.stop()).toBe(0);

    const dbs = checkpointAndVacuum(dataDir);
    expect(dbs.map((f) => path.relative(dataDir, f)).sort()).toEqual(
      expect.arrayContaining(["contextd.db", "contextd.db-search", "lossless/lossless.db", "recall/recall.db"]),
    );
    expect(filesHolding(dataDir, planted)).toEqual([]);
    // The search works: the control session's string is still where it was stored.
    expect(
      filesHolding(dataDir, control)
        .map((f) => path.relative(dataDir, f))
        .sort(),
    ).toEqual(expect.arrayContaining(["contextd.db", "lossless/lossless.db", "recall/recall.db"]));
  }, 180_000);
});
