/**
 * The engine fault matrix (issue 11, part 2): for every RPC contextd calls on a sidecar engine ×
 * every way an engine can fail, one cell. Each cell runs against real processes — two contextds
 * (one with `engines.on_failure: fallback`, one with `strict`) and a misbehaving test engine per
 * row (test/engines/ts, two rows with test/engines/python) — and checks that
 *
 *   - the runtime gets an answer from `legacy` (fallback) or a clear status (strict),
 *   - the transcript is intact (every appended message exactly once, in order; no compaction the
 *     faulty engine made, none naming an entry the session does not have),
 *   - the engine's state is right (quarantined or not, operation, reason, and the calls /
 *     failures / fallbacks / timeouts counters moved by exactly this call),
 *   - and it comes back by itself once it recovers (a passing health check after the ejection
 *     time releases it; the next call is served by it again).
 *
 * Rows run concurrently (each has its own engine and agent id, so its own routing); the cells of a
 * row run one after another on that row's engine. A cell that does not apply says why (`{ na }`,
 * reasons in NA); `CONTEXTD_PRINT_MATRIX=1` makes the last test print the whole table.
 */
import { randomUUID } from "node:crypto";
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { messageText } from "../../src/contract/messages.js";
import { EngineHealth, Refusal, type EngineStatus } from "../../src/contract/gen/contextd/v1/registry.js";
import { Mode, SubagentContextMode, SubagentEndReason, type SessionRef } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient, type CallOptions } from "../../src/sdk/runtime-client.js";
import { assistant, user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import {
  compileTsEngine,
  ensurePythonEngineStubs,
  pythonEnginesAvailable,
  startEngine,
  type EngineCapability,
  type EngineControl,
  type EngineOp,
  type EngineProcess,
} from "../helpers/engine-process.js";
import { registryClient } from "../helpers/registry-client.js";
import { watchEngines, type EngineWatch } from "./helpers/engine-watch.js";

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

const FAULTS = ["hang", "crash", "error", "garbage_bytes", "failing_health", "ignores_cancel", "late", "over_budget", "unknown_entry", "restart"] as const;
type Fault = (typeof FAULTS)[number];

/**
 * What a cell expects:
 * - timeout / error / contract: the call fails in that way: quarantine with a reason of that kind,
 *   fallback (or DEADLINE_EXCEEDED / UNAVAILABLE in strict mode), then recovery;
 * - accepted: not a fault by the contract — served by the engine, nothing counted against it;
 * - caller_cancel: the runtime cancels its call while the engine ignores cancellation: never held
 *   against the engine;
 * - restart: the engine is killed, calls fall back while it is down, and after it is restarted at
 *   the same address (without registering again) it is released and serves again.
 */
type Outcome = "timeout" | "error" | "contract" | "accepted" | "caller_cancel" | "restart";

const ROUTED_CELLS: Partial<Record<Fault, Outcome>> = {
  hang: "timeout",
  crash: "error",
  error: "error",
  garbage_bytes: "error",
  ignores_cancel: "caller_cancel",
  late: "timeout",
  restart: "restart",
};

/** Faults that make no sense for a row, and why. Printed with the matrix. */
const NA = {
  health: "health is its own row: a failing health check quarantines the engine for every RPC alike",
  noBudget: "the answer carries no budget the host could check",
  noEntries: "the answer names no transcript entries",
  tokensClaim: "a compaction result's tokens_after is the engine's claim; the host checks the entry it keeps instead",
  probe: "nobody cancels a health check but its own deadline (the hang and late cells)",
  admissionCaller: "the caller of admission is the engine itself; a probe it ignores is the hang / late cell",
};

type CellSpec = Outcome | { na: string };

type Ref = Pick<SessionRef, "sessionId" | "agentId">;
interface Session {
  ref: Ref;
  /** The texts of the messages appended, in order: the transcript must hold exactly these. */
  texts: string[];
  child?: Ref;
  /** Rollback handles of spawns made ahead (RollbackSubagentSpawn row), one per act. */
  handles?: string[];
  n: number;
}

interface Answer {
  engineId?: string;
  mode?: Mode;
  fallbackReason?: string;
}

interface Row {
  /** Engine id, agent id and row key. */
  id: string;
  title: string;
  /** The control-file key of the RPC (also the router's operation name). */
  op: EngineOp;
  kind: "ts" | "python";
  capabilities?: EngineCapability[];
  ownsCompaction?: boolean;
  /** Makes the session of a cell, with the engine healthy. */
  prepare(cd: Cd): Promise<Session>;
  /** The runtime call that makes contextd call `op` on the engine. */
  act(cd: Cd, s: Session, opts?: CallOptions): Promise<Answer>;
  /** The answer carries no engine id or mode (AppendMessages, RollbackSubagentSpawn). */
  quiet?: boolean;
  /** Answered even in strict mode: an append is durable before the engine hears of it. */
  durable?: boolean;
  cells: Record<Fault, CellSpec>;
}

// Short enough to keep the suite quick, long enough that an answering engine never misses it on a loaded machine.
const TIMEOUT = "750ms";
let seq = 0;
const uid = (prefix: string) => `${prefix}-${++seq}-${randomUUID().slice(0, 6)}`;

async function newSession(cd: Cd, row: Row, messages = 3): Promise<Session> {
  const s: Session = { ref: { sessionId: uid(row.id), agentId: row.id }, texts: [], n: 0 };
  const batch = [user(`${s.ref.sessionId}: fix the failing test`), assistant(`${s.ref.sessionId}: looking at it`), user(`${s.ref.sessionId}: thanks`)].slice(
    0,
    messages,
  );
  if (batch.length) {
    await cd.cx.appendMessages({ session: s.ref, messages: batch, idempotencyKey: randomUUID() });
    s.texts.push(...batch.map(messageText));
  }
  return s;
}

/** Appends `count` messages in one AppendMessages (the engine hears of them through Ingest/IngestBatch). */
async function append(cd: Cd, s: Session, count: number, opts?: CallOptions, key = randomUUID()): Promise<Answer> {
  const messages = Array.from({ length: count }, () => user(`${s.ref.sessionId}: message ${++s.n}`));
  // Stored before the engine hears of it: expected in the transcript even when the call fails.
  s.texts.push(...messages.map(messageText));
  await cd.cx.appendMessages({ session: s.ref, messages, idempotencyKey: key }, opts);
  return {};
}

const routed = (over: Partial<Record<Fault, CellSpec>> = {}): Record<Fault, CellSpec> => ({
  ...(ROUTED_CELLS as Record<Fault, CellSpec>),
  failing_health: { na: NA.health },
  over_budget: { na: NA.noBudget },
  unknown_entry: { na: NA.noEntries },
  ...over,
});

const assembleRow = (kind: "ts" | "python"): Row => ({
  id: `f-assemble-${kind}`,
  title: `Assemble (${kind})`,
  op: "assemble",
  kind,
  prepare: (cd) => newSession(cd, ROWS_BY_ID[`f-assemble-${kind}`]!),
  act: (cd, s, opts) => cd.cx.assemble({ session: s.ref, tokenBudget: 4_000 }, opts),
  cells: routed({
    over_budget: "contract",
    // An engine may add messages of its own (recalled memory, summaries) under ids the session
    // does not have; the host counts them with its own tokenizer, so within budget they are fine.
    unknown_entry: "accepted",
  }),
});

const ingestBatchRow = (kind: "ts" | "python"): Row => ({
  id: `f-ingest-batch-${kind}`,
  title: `IngestBatch (${kind})`,
  op: "ingest",
  kind,
  capabilities: ["ingest_batch"],
  quiet: true,
  durable: true,
  prepare: (cd) => newSession(cd, ROWS_BY_ID[`f-ingest-batch-${kind}`]!),
  act: (cd, s, opts) => append(cd, s, 2, opts),
  cells: routed(),
});

// The Python rows always run: without Debian's python3 and grpc this throws and the file fails.
pythonEnginesAvailable();
const ROWS: Row[] = [
  assembleRow("ts"),
  {
    id: "f-compact",
    title: "Compact (owns compaction)",
    op: "compact",
    kind: "ts",
    ownsCompaction: true,
    prepare: (cd) => newSession(cd, ROWS_BY_ID["f-compact"]!),
    act: (cd, s, opts) => cd.cx.compact({ session: s.ref, tokenBudget: 4_000, force: true }, opts),
    cells: routed({ over_budget: { na: NA.tokensClaim }, unknown_entry: "contract" }),
  },
  {
    id: "f-ingest",
    title: "Ingest",
    op: "ingest",
    kind: "ts",
    quiet: true,
    durable: true,
    prepare: (cd) => newSession(cd, ROWS_BY_ID["f-ingest"]!),
    act: (cd, s, opts) => append(cd, s, 1, opts),
    cells: routed(),
  },
  ingestBatchRow("ts"),
  {
    id: "f-after-turn",
    title: "AfterTurn",
    op: "after_turn",
    kind: "ts",
    capabilities: ["after_turn"],
    prepare: (cd) => newSession(cd, ROWS_BY_ID["f-after-turn"]!),
    act: (cd, s, opts) => cd.cx.afterTurn({ session: s.ref, prePromptMessageCount: 1, tokenBudget: 4_000 }, opts),
    cells: routed(),
  },
  {
    id: "f-maintain",
    title: "Maintain",
    op: "maintain",
    kind: "ts",
    capabilities: ["maintain"],
    prepare: (cd) => newSession(cd, ROWS_BY_ID["f-maintain"]!),
    act: (cd, s, opts) => cd.cx.maintain({ session: s.ref }, opts),
    // The engine asks HostService to rewrite an entry the session does not have; the host refuses
    // (NOT_FOUND), nothing is rewritten, and the engine's error is its failure.
    cells: routed({ unknown_entry: "error" }),
  },
  {
    id: "f-bootstrap",
    title: "Bootstrap (first call of a session)",
    op: "bootstrap",
    kind: "ts",
    capabilities: ["bootstrap"],
    quiet: true,
    durable: true,
    // Bootstrap comes with a session's first routed call: the session starts with the act.
    prepare: async (_cd) => ({ ref: { sessionId: uid("f-bootstrap"), agentId: "f-bootstrap" }, texts: [], n: 0 }),
    act: (cd, s, opts) => append(cd, s, 1, opts),
    cells: routed(),
  },
  {
    id: "f-subagent-spawn",
    title: "PrepareSubagentSpawn",
    op: "subagent",
    kind: "ts",
    capabilities: ["subagents"],
    prepare: (cd) => newSession(cd, ROWS_BY_ID["f-subagent-spawn"]!),
    act: async (cd, s, opts) => {
      s.child = { sessionId: `${s.ref.sessionId}-child-${++s.n}`, agentId: s.ref.agentId };
      return cd.cx.prepareSubagentSpawn({ parent: s.ref, child: s.child, contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED }, opts);
    },
    cells: routed(),
  },
  {
    id: "f-subagent-rollback",
    title: "RollbackSubagentSpawn",
    op: "subagent",
    kind: "ts",
    capabilities: ["subagents"],
    // The spawns are made while the engine behaves (the same control key governs all subagent RPCs).
    prepare: async (cd) => {
      const s = await newSession(cd, ROWS_BY_ID["f-subagent-rollback"]!);
      s.handles = [];
      for (let i = 0; i < 3; i++) {
        const child = { sessionId: `${s.ref.sessionId}-child-${i}`, agentId: s.ref.agentId };
        s.handles.push(
          (await cd.cx.prepareSubagentSpawn({ parent: s.ref, child, contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_ISOLATED })).rollbackHandle,
        );
      }
      return s;
    },
    act: async (cd, s, opts) => {
      await cd.cx.rollbackSubagentSpawn({ rollbackHandle: s.handles!.shift()! }, opts);
      return {}; // the answer says only whether the child was removed
    },
    quiet: true,
    cells: routed(),
  },
  {
    id: "f-subagent-end",
    title: "OnSubagentEnded (EndSubagent)",
    op: "subagent",
    kind: "ts",
    capabilities: ["subagents"],
    prepare: async (cd) => {
      const s = await newSession(cd, ROWS_BY_ID["f-subagent-end"]!);
      s.child = { sessionId: `${s.ref.sessionId}-child`, agentId: s.ref.agentId };
      await cd.cx.prepareSubagentSpawn({ parent: s.ref, child: s.child, contextMode: SubagentContextMode.SUBAGENT_CONTEXT_MODE_FORK });
      return s;
    },
    act: (cd, s, opts) => cd.cx.endSubagent({ child: s.child, reason: SubagentEndReason.SUBAGENT_END_REASON_COMPLETED }, opts),
    cells: routed(),
  },
  assembleRow("python"),
  ingestBatchRow("python"),
];
const ROWS_BY_ID: Record<string, Row> = Object.fromEntries(ROWS.map((r) => [r.id, r]));

/** GetInfo at admission and grpc.health.v1 have their own rows (no runtime call is involved). */
const GET_INFO_ROW = "f-get-info";
const HEALTH_ROW = "f-health";
type Special = "timeout" | "unreachable" | "contract_invalid" | "quarantined" | "restart";
const GET_INFO_CELLS: Record<Fault, Special | { na: string }> = {
  hang: "unreachable",
  crash: "unreachable",
  error: "contract_invalid",
  garbage_bytes: "contract_invalid",
  failing_health: "unreachable",
  ignores_cancel: { na: NA.admissionCaller },
  late: "unreachable",
  over_budget: { na: NA.noBudget },
  unknown_entry: { na: NA.noEntries },
  restart: "restart",
};
const HEALTH_CELLS: Record<Fault, Special | { na: string }> = {
  hang: "quarantined",
  crash: "quarantined",
  error: "quarantined",
  garbage_bytes: "quarantined",
  failing_health: "quarantined",
  ignores_cancel: { na: NA.probe },
  // Slow health: every check answers, but after its deadline.
  late: "quarantined",
  over_budget: { na: NA.noBudget },
  unknown_entry: { na: NA.noEntries },
  restart: "restart",
};

/** Strict mode: the statuses a runtime sees. Ingest-side rows still answer (the append is durable). */
const STRICT_FAULTS: Partial<Record<Fault, status>> = {
  hang: status.DEADLINE_EXCEEDED,
  error: status.UNAVAILABLE,
  garbage_bytes: status.UNAVAILABLE,
  late: status.DEADLINE_EXCEEDED,
  over_budget: status.UNAVAILABLE,
  unknown_entry: status.UNAVAILABLE,
};

function controlFor(op: EngineOp, fault: Fault): EngineControl {
  switch (fault) {
    case "hang":
    case "crash":
    case "garbage_bytes":
    case "late":
    case "over_budget":
    case "unknown_entry":
      return { [op]: fault, late_ms: 100 };
    case "error":
      return { [op]: "throw" };
    case "ignores_cancel":
      // Long enough that the cancellation surely reaches the engine first, also on a loaded machine.
      return { [op]: "ignore_cancel", ignore_cancel_ms: 1_500 };
    default:
      return {};
  }
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

interface Cd {
  name: "fallback" | "strict";
  proc: ContextdProcess;
  cx: ContextdClient;
  reg: ReturnType<typeof registryClient>;
  watch: EngineWatch;
}

const ALL_ROW_IDS = [...ROWS.map((r) => r.id), GET_INFO_ROW, HEALTH_ROW];
const config = (onFailure: "fallback" | "strict") => ({
  log_level: "debug",
  slots: { context_engine: "legacy", agents: Object.fromEntries(ALL_ROW_IDS.map((id) => [id, id])) },
  engines: {
    timeouts: { ingest: TIMEOUT, assemble: TIMEOUT, compact: TIMEOUT, after_turn: TIMEOUT, maintain: TIMEOUT, bootstrap: TIMEOUT, subagent: TIMEOUT },
    // A generous check deadline and three failures in a row: with 14 engines and two contextds on a
    // loaded 2-core machine (CI runs other suites beside this one), checks of healthy engines
    // sometimes take hundreds of ms, and a spurious quarantine would fail an unrelated cell.
    health: { interval: "500ms", timeout: "500ms", unhealthy_threshold: 3 },
    // Long enough that "while quarantined" holds on a loaded 2-core machine, short enough to recover fast.
    quarantine: { base_ejection: "2s", max_ejection: "2s" },
    on_failure: onFailure,
  },
});

let fallback: Cd;
let strict: Cd;
const engines = new Map<string, EngineProcess>();
const rowSpec = new Map<string, { kind: "ts" | "python"; capabilities?: EngineCapability[]; ownsCompaction?: boolean; cds: Cd[] }>();

async function startCd(name: Cd["name"]): Promise<Cd> {
  const proc = await startContextd({ config: config(name) });
  return {
    name,
    proc,
    cx: new ContextdClient({ address: proc.address, timeoutMs: 15_000 }),
    reg: registryClient(proc.address),
    watch: await watchEngines(proc.address),
  };
}

async function register(cd: Cd, id: string): Promise<void> {
  const res = await cd.reg.register({ engineId: id, owner: "team", endpoint: engines.get(id)!.address, allowSameOwnerRefresh: true });
  if (!res.ok) throw new Error(`registering ${id} with the ${cd.name} contextd: ${res.message}`);
}

/** Starts (or restarts, at the same address) the engine of a row. */
async function startRowEngine(id: string): Promise<EngineProcess> {
  const spec = rowSpec.get(id)!;
  const previous = engines.get(id);
  const engine = await startEngine(spec.kind, {
    engineId: id,
    listen: previous?.address ?? "127.0.0.1:0",
    capabilities: spec.capabilities,
    ownsCompaction: spec.ownsCompaction,
  });
  engines.set(id, engine);
  return engine;
}

/** A row's cells run one after another (they share its engine); rows run concurrently. */
const rowLocks = new Map<string, Promise<unknown>>();
function inRow<T>(id: string, fn: () => Promise<T>): Promise<T> {
  const run = (rowLocks.get(id) ?? Promise.resolve()).then(fn, fn);
  rowLocks.set(
    id,
    run.catch(() => undefined),
  );
  return run;
}

/** Before a cell: the engine runs, behaves, and is not quarantined anywhere (an earlier cell may have failed). */
async function ready(id: string): Promise<EngineProcess> {
  let engine = engines.get(id)!;
  if (engine.exitCode() !== undefined) engine = await startRowEngine(id);
  engine.control({});
  for (const cd of rowSpec.get(id)!.cds) {
    if ((await cd.reg.get(id)).quarantine) await cd.reg.clear(id);
  }
  return engine;
}

const failedChecks = (cd: Cd, id: string) => cd.proc.logLines().filter((l) => l.msg === "health check failed" && l.engineId === id).length;

/** Waits (for log lines, not time) until `cd` has failed `n` more health checks of `id`. */
async function moreFailedChecks(cd: Cd, id: string, n: number): Promise<void> {
  const target = failedChecks(cd, id) + n;
  await cd.proc.waitForLog(() => failedChecks(cd, id) >= target, 10_000);
}

// Every cell starts at once and waits for its row's lock, so rows run side by side.
vi.setConfig({ maxConcurrency: 1_000 });

beforeAll(async () => {
  ensurePythonEngineStubs();
  await compileTsEngine();
  [fallback, strict] = await Promise.all([startCd("fallback"), startCd("strict")]);
  for (const row of ROWS) rowSpec.set(row.id, { kind: row.kind, capabilities: row.capabilities, ownsCompaction: row.ownsCompaction, cds: [fallback, strict] });
  rowSpec.set(GET_INFO_ROW, { kind: "ts", cds: [fallback] });
  rowSpec.set(HEALTH_ROW, { kind: "ts", cds: [fallback] });
  await Promise.all(
    ALL_ROW_IDS.map(async (id) => {
      await startRowEngine(id);
      for (const cd of rowSpec.get(id)!.cds) await register(cd, id);
    }),
  );
}, 180_000);

afterAll(async () => {
  for (const cd of [fallback, strict]) {
    cd?.watch.close();
    cd?.cx.close();
    cd?.reg.close();
  }
  await Promise.all([...engines.values()].map((e) => e.kill9()));
  await Promise.all([fallback?.proc.cleanup(), strict?.proc.cleanup()]);
});

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

type Counters = Pick<EngineStatus, "calls" | "failures" | "fallbacks" | "timeouts">;
const counters = (s: EngineStatus): Counters => ({ calls: s.calls, failures: s.failures, fallbacks: s.fallbacks, timeouts: s.timeouts });
function delta(before: EngineStatus, after: EngineStatus): Counters {
  return {
    calls: after.calls - before.calls,
    failures: after.failures - before.failures,
    fallbacks: after.fallbacks - before.fallbacks,
    timeouts: after.timeouts - before.timeouts,
  };
}

/** Every appended message exactly once, in order; no compaction by the faulty engine or naming unknown entries. */
async function expectIntact(cd: Cd, row: Row, s: Session): Promise<void> {
  const entries = [];
  for await (const e of cd.cx.transcript(s.ref.sessionId)) entries.push(e);
  const messages = entries.flatMap((e) => (e.entry?.$case === "message" ? [e] : []));
  expect(messages.map((e) => (e.entry?.$case === "message" ? messageText(e.entry.value) : ""))).toEqual(s.texts);
  const ids = new Set(messages.map((e) => e.id));
  for (const e of entries) {
    if (e.entry?.$case !== "compaction") continue;
    expect(e.entry.value.engineId, "a compaction by the faulty engine was committed").not.toBe(row.id);
    expect(ids.has(e.entry.value.firstKeptEntryId) || e.entry.value.firstKeptEntryId === "").toBe(true);
  }
}

function expectServedBy(row: Row, ans: Answer): void {
  if (row.quiet) return;
  expect(ans.fallbackReason ?? "").toBe("");
  expect(ans).toMatchObject({ engineId: row.id, mode: Mode.MODE_NORMAL });
}

async function expectFellBack(row: Row, ans: Answer, why: string): Promise<void> {
  if (row.quiet) return;
  expect(ans).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
  // Subagent answers carry no fallback_reason.
  if (ans.fallbackReason !== undefined) expect(ans.fallbackReason).toContain(why);
}

/** Waits for the engine's release in `cd` and checks the next call is served by it again. */
async function expectRecovers(cd: Cd, row: Row, s: Session, mark: number): Promise<void> {
  await cd.watch.next(mark, "RELEASED", row.id, 10_000);
  const before = await cd.reg.get(row.id);
  const again = await row.act(cd, s);
  expectServedBy(row, again);
  const after = await cd.reg.get(row.id);
  expect(after.quarantine).toBeUndefined();
  expect(after.calls).toBeGreaterThan(before.calls);
  expect(after.failures).toBe(before.failures);
}

async function rejection(p: Promise<unknown>): Promise<ServiceError> {
  try {
    await p;
  } catch (err) {
    return err as ServiceError;
  }
  throw new Error("expected the call to fail");
}

// ---------------------------------------------------------------------------------------------
// Cells
// ---------------------------------------------------------------------------------------------

async function faultCell(row: Row, fault: Fault, outcome: "timeout" | "error" | "contract"): Promise<void> {
  const cd = fallback;
  const engine = await ready(row.id);
  const s = await row.prepare(cd);
  const before = await cd.reg.get(row.id);
  const mark = cd.watch.mark();
  const n = engine.events().length;
  engine.control(controlFor(row.op, fault));

  const ans = await row.act(cd, s);
  await expectFellBack(row, ans, `"${row.id}" failed on ${row.op}`);
  const quarantined = await cd.watch.next(mark, "QUARANTINED", row.id);
  const after = await cd.reg.get(row.id);
  expect(after.quarantine).toMatchObject({ operation: row.op, manual: false });
  expect(after.quarantine!.ejections).toBeGreaterThanOrEqual(1);
  expect(after.quarantine!.reason.startsWith(`${outcome}:`), after.quarantine!.reason).toBe(true);
  expect(quarantined.message).toContain(row.op);
  // A Bootstrap comes first in its request: the rest of that request (the append's Ingest) goes to
  // legacy too, as the engine is quarantined by then — a second fallback.
  const sameRequest = row.op === "bootstrap" ? 1 : 0;
  expect(delta(before, after)).toEqual({ calls: 1, failures: 1, fallbacks: 1 + sameRequest, timeouts: outcome === "timeout" ? 1 : 0 });
  // The engine was told the time was up (hang), or its answer came after it (late) and changed nothing.
  // (contextd cancels the call at its own deadline, a moment before the transport deadline it sent.)
  // While quarantined, the runtime is answered by legacy without the engine being called. Asked at
  // once: the ejection lasts engines.quarantine.base_ejection, and a loaded machine can spend that
  // much on the checks below.
  const next = await row.act(cd, s);
  await expectFellBack(row, next, "quarantined");
  // Not called, so no call or failure counted; the call legacy answered instead is a fallback of its own.
  const whileQuarantined = await cd.reg.get(row.id);
  expect(counters(whileQuarantined)).toEqual({ ...counters(after), fallbacks: after.fallbacks + 1 });
  expect(whileQuarantined.fallbacksByReason.quarantined ?? 0).toBe((after.fallbacksByReason.quarantined ?? 0) + 1);
  if (fault === "hang")
    expect(["cancelled", "deadline"]).toContain((await engine.waitForEvent((e, i) => i >= n && e.event === "cancelled" && e.op === row.op)).reason);
  if (fault === "late") await engine.waitForEvent((e, i) => i >= n && e.event === "answered_late" && e.op === row.op);
  await expectIntact(cd, row, s);

  const recovering = cd.watch.mark();
  if (fault === "crash") {
    expect(await engine.exited).toBe(3);
    await startRowEngine(row.id); // at the same address, without registering again
  } else {
    engine.control({});
  }
  await expectRecovers(cd, row, s, recovering);
}

async function acceptedCell(row: Row, fault: Fault): Promise<void> {
  const cd = fallback;
  const engine = await ready(row.id);
  const s = await row.prepare(cd);
  const before = await cd.reg.get(row.id);
  engine.control(controlFor(row.op, fault));
  const ans = await row.act(cd, s);
  expectServedBy(row, ans);
  const after = await cd.reg.get(row.id);
  expect(after.quarantine).toBeUndefined();
  expect(delta(before, after)).toEqual({ calls: 1, failures: 0, fallbacks: 0, timeouts: 0 });
  await expectIntact(cd, row, s);
}

async function callerCancelCell(row: Row, fault: Fault): Promise<void> {
  const cd = fallback;
  const engine = await ready(row.id);
  const s = await row.prepare(cd);
  const before = await cd.reg.get(row.id);
  engine.control(controlFor(row.op, fault));
  const n = engine.events().length;
  const abort = new AbortController();
  const key = randomUUID();
  const call = row.durable ? append(cd, s, 1, { signal: abort.signal }, key) : row.act(cd, s, { signal: abort.signal });
  await engine.waitForEvent((e, i) => i >= n && e.event === "call" && e.op === row.op);
  abort.abort();
  expect((await rejection(call)).code).toBe(status.CANCELLED);
  // The engine ignores the cancellation; its answer comes once contextd has already dropped the call.
  await engine.waitForEvent((e, i) => i >= n && e.event === "answered_late" && e.op === row.op, 5_000);

  const after = await cd.reg.get(row.id);
  expect(after.quarantine).toBeUndefined();
  expect(delta(before, after)).toEqual({ calls: 1, failures: 0, fallbacks: 0, timeouts: 0 });
  if (row.durable) {
    // The append was durable before the engine heard of it: a retry with the same key replays it.
    engine.control({});
    const replay = await cd.cx.appendMessages({ session: s.ref, messages: [user(`${s.ref.sessionId}: message ${s.n}`)], idempotencyKey: key });
    expect(replay.replayed).toBe(true);
  }
  if (row.op === "subagent" && row.id === "f-subagent-spawn") {
    // A spawn the runtime gave up on leaves no child behind.
    expect((await rejection(cd.cx.getSession({ session: s.child }))).code).toBe(status.NOT_FOUND);
  }
  await expectIntact(cd, row, s);
  engine.control({});
  expectServedBy(row, await row.act(cd, s));
}

async function restartCell(row: Row): Promise<void> {
  const cd = fallback;
  const engine = await ready(row.id);
  const s = await row.prepare(cd);
  const registeredAt = (await cd.reg.get(row.id)).registeredAtMs;
  const mark = cd.watch.mark();
  await engine.kill9();
  await cd.watch.next(mark, "QUARANTINED", row.id);
  await moreFailedChecks(cd, row.id, 3); // the reconnect backoff grows meanwhile

  const down = await row.act(cd, s);
  await expectFellBack(row, down, "quarantined");
  await expectIntact(cd, row, s);

  const recovering = cd.watch.mark();
  await startRowEngine(row.id);
  await expectRecovers(cd, row, s, recovering);
  expect((await cd.reg.get(row.id)).registeredAtMs).toBe(registeredAt);
}

async function strictCell(row: Row, fault: Fault, code: status): Promise<void> {
  const cd = strict;
  const engine = await ready(row.id);
  const s = await row.prepare(cd);
  const before = await cd.reg.get(row.id);
  const mark = cd.watch.mark();
  engine.control(controlFor(row.op, fault));
  if (row.durable) {
    // The transcript is the host's: the append is answered, the engine is quarantined.
    await row.act(cd, s);
  } else {
    const err = await rejection(row.act(cd, s));
    expect(err.code).toBe(code);
    expect(err.details).toContain("on_failure: strict");
    expect(err.details).toContain(`"${row.id}" failed on ${row.op}`);
  }
  await cd.watch.next(mark, "QUARANTINED", row.id);
  const after = await cd.reg.get(row.id);
  expect(after.quarantine).toMatchObject({ operation: row.op });
  expect(delta(before, after)).toEqual({ calls: 1, failures: 1, fallbacks: 0, timeouts: code === status.DEADLINE_EXCEEDED ? 1 : 0 });
  // While quarantined, nothing answers for the engine: a clear UNAVAILABLE naming the quarantine.
  const err = await rejection(cd.cx.assemble({ session: s.ref, tokenBudget: 4_000 }));
  expect(err.code).toBe(status.UNAVAILABLE);
  expect(err.details).toContain("quarantined");
  await expectIntact(cd, row, s);
  if (row.id === "f-subagent-spawn") expect((await rejection(cd.cx.getSession({ session: s.child }))).code).toBe(status.NOT_FOUND);
  if (row.id === "f-compact") {
    // No fallback compaction either: strict means nobody else compacts.
    const compactions = [];
    for await (const e of cd.cx.transcript(s.ref.sessionId)) if (e.entry?.$case === "compaction") compactions.push(e);
    expect(compactions).toEqual([]);
  }
  const recovering = cd.watch.mark();
  engine.control({});
  await expectRecovers(cd, row, s, recovering);
}

// ---- GetInfo at admission --------------------------------------------------------------------

async function getInfoCell(fault: Fault, expected: Special): Promise<void> {
  const cd = fallback;
  const id = GET_INFO_ROW;
  let engine = await ready(id);
  const before = await cd.reg.get(id);
  const refresh = () => cd.reg.register({ engineId: id, owner: "team", endpoint: engine.address, allowSameOwnerRefresh: true });

  if (expected === "restart") {
    const mark = cd.watch.mark();
    await engine.kill9();
    await cd.watch.next(mark, "QUARANTINED", id);
    await moreFailedChecks(cd, id, 3);
    engine = await startRowEngine(id);
    // Registering again right away is admitted at once (issue 11: it was refused UNREACHABLE).
    const res = await refresh();
    expect(res.message).toBe("registered");
    const after = await cd.reg.get(id);
    expect(after.quarantine).toBeUndefined();
    expect(after.health).toBe(EngineHealth.ENGINE_HEALTH_SERVING);
    return;
  }

  engine.control(fault === "failing_health" ? { health: "NOT_SERVING" } : controlFor("get_info", fault));
  const res = await refresh();
  expect(res.ok).toBe(false);
  expect(res.refusal).toBe(expected === "contract_invalid" ? Refusal.REFUSAL_CONTRACT_INVALID : Refusal.REFUSAL_UNREACHABLE);
  expect(res.message).toMatch(
    {
      hang: /deadline/,
      late: /deadline/,
      crash: /not reachable within the admission deadline/,
      error: /INTERNAL/,
      garbage_bytes: /parsing/,
      failing_health: /NOT_SERVING/,
    }[fault as string] ?? /./,
  );
  // A refused refresh leaves the registration as it was.
  const after = await cd.reg.get(id);
  expect(after.registeredAtMs).toBe(before.registeredAtMs);
  expect(after.endpoint).toBe(before.endpoint);
  expect(counters(after)).toEqual(counters(before));

  // Recovered, it registers again (a crashed one after its restart at the same address).
  if (fault === "crash") {
    expect(await engine.exited).toBe(3);
    engine = await startRowEngine(id);
  } else {
    engine.control({});
  }
  const again = await refresh();
  expect(again.message).toBe("registered");
  const registered = await cd.reg.get(id);
  expect(registered.registeredAtMs).toBeGreaterThan(before.registeredAtMs);
  expect(registered.quarantine).toBeUndefined();
}

// ---- grpc.health.v1 --------------------------------------------------------------------------

async function healthCell(fault: Fault, expected: Special): Promise<void> {
  const cd = fallback;
  const id = HEALTH_ROW;
  let engine = await ready(id);
  const s = await newSession(cd, { id } as Row);
  const before = await cd.reg.get(id);
  const mark = cd.watch.mark();
  const control: Partial<Record<Fault, EngineControl>> = {
    hang: { health: "hang" },
    crash: { health: "crash" },
    error: { health: "throw" },
    garbage_bytes: { health: "garbage_bytes" },
    failing_health: { health: "NOT_SERVING" },
    late: { health: "slow", slow_ms: 900 },
  };
  if (expected === "restart") await engine.kill9();
  else engine.control(control[fault]!);

  const q = await cd.watch.next(mark, "QUARANTINED", id);
  expect(q.engine?.quarantine).toMatchObject({ operation: "health", manual: false });
  expect(q.engine?.quarantine?.reason).toMatch(fault === "failing_health" ? /3 times in a row \(NOT_SERVING\)/ : /3 times in a row \(UNREACHABLE\)/);
  const status_ = await cd.reg.get(id);
  expect(status_.health).toBe(fault === "failing_health" ? EngineHealth.ENGINE_HEALTH_NOT_SERVING : EngineHealth.ENGINE_HEALTH_UNKNOWN);
  // Health is not a call: no call or failure counted. Sessions are answered by legacy meanwhile,
  // each such call a fallback, counted by its reason.
  const ans = await cd.cx.assemble({ session: s.ref, tokenBudget: 4_000 });
  expect(ans).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
  expect(ans.fallbackReason).toContain("quarantined (health:");
  const whileQuarantined = await cd.reg.get(id);
  expect(counters(whileQuarantined)).toEqual({ ...counters(before), fallbacks: before.fallbacks + 1 });
  expect(whileQuarantined.fallbacksByReason.quarantined ?? 0).toBe((before.fallbacksByReason.quarantined ?? 0) + 1);

  const recovering = cd.watch.mark();
  if (fault === "crash" || expected === "restart") {
    if (fault === "crash") expect(await engine.exited).toBe(3);
    else await moreFailedChecks(cd, id, 3);
    engine = await startRowEngine(id);
  } else {
    engine.control({});
  }
  const released = await cd.watch.next(recovering, "RELEASED", id, 10_000);
  expect(released.engine?.health).toBe(EngineHealth.ENGINE_HEALTH_SERVING); // released by a passing check
  const back = await cd.cx.assemble({ session: s.ref, tokenBudget: 4_000 });
  expect(back).toMatchObject({ engineId: id, mode: Mode.MODE_NORMAL });
}

// ---------------------------------------------------------------------------------------------
// The suite: one test per applicable cell
// ---------------------------------------------------------------------------------------------

const cellName = (title: string, fault: Fault, what: string) => `${title} × ${fault}: ${what}`;

describe.concurrent("engine fault matrix (fallback mode)", () => {
  for (const row of ROWS) {
    for (const fault of FAULTS) {
      const spec = row.cells[fault];
      if (typeof spec !== "string") continue;
      const name = cellName(
        row.title,
        fault,
        spec === "accepted"
          ? "accepted, served by the engine"
          : spec === "caller_cancel"
            ? "the runtime's cancellation is not held against it"
            : spec === "restart"
              ? "falls back while down, back without re-registering"
              : `${spec} → quarantined, answered by legacy, recovers`,
      );
      it(name, () =>
        inRow(row.id, () => {
          switch (spec) {
            case "accepted":
              return acceptedCell(row, fault);
            case "caller_cancel":
              return callerCancelCell(row, fault);
            case "restart":
              return restartCell(row);
            default:
              return faultCell(row, fault, spec);
          }
        }),
      );
    }
  }
  for (const fault of FAULTS) {
    const spec = GET_INFO_CELLS[fault];
    if (typeof spec === "string") it(cellName("GetInfo at admission", fault, spec), () => inRow(GET_INFO_ROW, () => getInfoCell(fault, spec)));
  }
  for (const fault of FAULTS) {
    const spec = HEALTH_CELLS[fault];
    if (typeof spec === "string") it(cellName("health", fault, spec), () => inRow(HEALTH_ROW, () => healthCell(fault, spec)));
  }
});

describe.concurrent("engine fault matrix (strict mode)", () => {
  for (const row of ROWS) {
    for (const fault of FAULTS) {
      const code = STRICT_FAULTS[fault];
      const spec = row.cells[fault];
      if (code === undefined || (spec !== "timeout" && spec !== "error" && spec !== "contract")) continue;
      const expectedCode = spec === "timeout" ? status.DEADLINE_EXCEEDED : status.UNAVAILABLE;
      it(cellName(row.title, fault, row.durable ? "append answered, engine quarantined" : status[expectedCode]), () =>
        inRow(row.id, () => strictCell(row, fault, expectedCode)),
      );
    }
  }
});

describe("the matrix", () => {
  it("covers every RPC × fault, and says why a cell does not apply", () => {
    const lines = [`| RPC | ${FAULTS.join(" | ")} |`, `|---|${FAULTS.map(() => "---").join("|")}|`];
    const render = (spec: string | { na: string }) => (typeof spec === "string" ? spec : "n/a");
    for (const row of ROWS) lines.push(`| ${row.title} | ${FAULTS.map((f) => render(row.cells[f])).join(" | ")} |`);
    lines.push(`| GetInfo at admission | ${FAULTS.map((f) => render(GET_INFO_CELLS[f])).join(" | ")} |`);
    lines.push(`| health | ${FAULTS.map((f) => render(HEALTH_CELLS[f])).join(" | ")} |`);
    const reasons = new Set<string>();
    for (const cells of [...ROWS.map((r) => r.cells), GET_INFO_CELLS, HEALTH_CELLS]) {
      for (const f of FAULTS) {
        const spec = cells[f];
        if (typeof spec !== "string") {
          expect(spec.na.length).toBeGreaterThan(10);
          reasons.add(`${f}: ${spec.na}`);
        }
      }
    }
    if (process.env.CONTEXTD_PRINT_MATRIX) console.log([...lines, "", ...reasons].join("\n"));
    expect(ROWS.map((r) => r.op)).toEqual(expect.arrayContaining(["assemble", "compact", "ingest", "after_turn", "maintain", "bootstrap", "subagent"]));
  });
});
