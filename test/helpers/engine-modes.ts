/**
 * The misbehaving test engines' control protocol (test/engines/python/misbehaving_engine.py and
 * test/engines/ts/misbehaving-engine.ts): what the control file can tell each RPC to do, and how
 * each mode behaves. The engines are started by engine-launch.ts (through engine-process.ts).
 *
 * Control file (JSON, re-read by the engine on EVERY call, so flipping it needs no restart):
 * `{ assemble?: MODE, compact?: MODE, ingest?: MODE, bootstrap?: MODE, after_turn?: MODE,
 * maintain?: MODE, subagent?: MODE, get_info?: MODE, health?: HEALTH, leak_host_token_to?: "/path",
 * ignore_cancel_ms?: 30000, slow_ms?: 300, late_ms?: 200 }`; a missing key means "ok" / "SERVING" /
 * the default duration. `control(c)` REPLACES the whole file (atomically: write + rename), it does
 * not merge. `ingest` also governs IngestBatch; `subagent` governs PrepareSubagentSpawn,
 * RollbackSubagentSpawn and OnSubagentEnded.
 *
 * Optional RPCs: by default both engines advertise no capabilities (a correct host never calls
 * Bootstrap, IngestBatch, AfterTurn, Maintain or the subagent RPCs; the Python engine answers them
 * harmlessly, the TS one UNIMPLEMENTED). `capabilities: [...]` (or "all") starts the engine with
 * those RPCs implemented and advertised; they then follow their control key like the others. OK
 * answers: Bootstrap bootstrapped=true; IngestBatch ingested_count = messages; AfterTurn empty;
 * Maintain changed=false; PrepareSubagentSpawn rollback_handle "mb-<child session id>"; the other
 * subagent RPCs empty.
 *
 * Modes:
 * - "ok": Assemble returns the newest request.messages that fit token_budget (all without a
 *   budget), tool calls and their results kept together, never starting with a tool result,
 *   estimated_tokens = sum of token_count, prompt_authority ASSEMBLED. Compact: with
 *   `ownsCompaction`, compacted=true, summary "test summary", first_kept_entry_id = id of the last
 *   user message in request.messages (compacted=false when there is none); without, it delegates to
 *   the host (HostService.DelegateCompaction on request.host.endpoint with `authorization: Bearer
 *   <host.token>`, deadline no later than host.expires_at_ms and the call's own deadline) and returns
 *   the host's answer; a host error is returned with the host's status code. Ingest → ingested=true.
 * - "hang": waits until the call is cancelled or its deadline passes, logs a `cancelled` event.
 * - "ignore_cancel": sleeps `ignore_cancel_ms` (30 s) ignoring cancellation, then answers as "ok"
 *   would and logs `answered_late` (the call had ended; the answer goes nowhere) or `answered`.
 * - "crash": the process exits with code 3 mid-call.
 * - "crash_after" (TS engine only): does what "ok" does (a delegating Compact has the host commit its
 *   compaction), logs `{event:"crashing_after", op}`, then exits with code 3 before answering.
 * - "throw": INTERNAL "misbehaving engine: told to throw".
 * - "garbage": Assemble returns all request.messages plus a padding message (id "garbage-padding",
 *   token_count = budget + 1000) with estimated_tokens = that sum and prompt_authority ASSEMBLED;
 *   Compact returns ok, compacted=true with first_kept_entry_id "no-such-entry"; Ingest returns
 *   ingested=false.
 * - "slow": sleeps `slow_ms` (300 ms), honouring cancellation (then it logs `cancelled`), then
 *   answers as "ok" and logs `answered`.
 * - "late": ignores cancellation and answers as "ok" `late_ms` (200 ms) after the call's deadline
 *   (logs `answered_late`: the answer goes nowhere). Without a deadline it answers at once.
 * - "garbage_bytes": the answer on the wire is bytes no protobuf message decodes from (the caller
 *   sees INTERNAL "Response message parsing error"). Works for every RPC, GetInfo and health.
 * - "over_budget": Assemble as "garbage" (over the budget); other RPCs answer as "ok".
 * - "unknown_entry": Assemble puts a message of its own (id "no-such-entry", 5 tokens) before the
 *   newest messages that fit the budget minus 50 — which the contract allows; Compact as
 *   "garbage" (first_kept_entry_id "no-such-entry"); Maintain calls
 *   HostService.RewriteTranscriptEntries for entry "no-such-entry" and answers the host's error
 *   with the host's status; other RPCs answer as "ok".
 * - "by_reference" (TS engine only): Assemble answers by id (kept_entry_ids, through the SDK's
 *   `keepMessages`): a note of its own (6 tokens, no id) in `messages`, then the newest messages that
 *   fit the budget minus 50 as kept_entry_ids. "reference_unknown", "reference_twice" and
 *   "reference_order" break that answer: an id the view does not have appended, the last id named
 *   again, the ids reversed. Other RPCs answer as "ok".
 * - "huge" (TS engine only): Assemble answers "ok"'s messages and one more of `huge_bytes` (40 MB)
 *   of text; Compact answers compacted=true with a summary of `huge_bytes`. Others as "ok".
 * - "hostile_text" (TS engine only): text of `hostile_bytes` (1 MB) characters of terminal escapes,
 *   bells and right-to-left overrides — Assemble as the one kept_entry_id (unknown to the view),
 *   Compact as the reason of ok=false; every other RPC fails with it as its error text.
 * - "projection" (TS engine only): Assemble answers as "ok" with context_projection THREAD_BOOTSTRAP,
 *   epoch "epoch-1", fingerprint "fp-1"; "projection_bad" the same without the epoch (a contract
 *   violation). Other RPCs answer as "ok".
 * - `get_info` (GetInfo): "ok", "hang" (logs `cancelled` when the call ends), "throw", "crash",
 *   "garbage_bytes", "slow" / "ignore_cancel" / "late" (answer after the wait, logging `answered`
 *   or `answered_late`). GetInfo is logged (`call`) only when told to misbehave.
 * - `health` (grpc.health.v1 Check of "" and contextd.v1.ContextEngineService): "SERVING"
 *   (default), "NOT_SERVING", "hang" (never answers), "slow" (SERVING after `slow_ms`), "throw"
 *   (INTERNAL), "garbage_bytes", "crash" (logs `call` op "health", exits 3).
 * - `leak_host_token_to`: on every Assemble/Compact whose request carries a HostContext, the engine
 *   writes `{op, endpoint, token, expires_at_ms, session_id, session:{session_id, session_key,
 *   agent_id}}` as JSON to that path (atomically), before acting on the mode.
 * - Health Watch: UNIMPLEMENTED in Python, the SDK's own in TS, not control-driven.
 *
 * GetInfo: id = engineId, name "Misbehaving test engine", version "1.0.0", owns_compaction per the
 * option, protocol_versions [1], capabilities per `capabilities` (all false by default).
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs";

export type EngineMode =
  | "ok"
  | "hang"
  | "ignore_cancel"
  | "crash"
  | "crash_after"
  | "throw"
  | "garbage"
  | "garbage_bytes"
  | "slow"
  | "late"
  | "over_budget"
  | "unknown_entry"
  | "by_reference"
  | "reference_unknown"
  | "reference_twice"
  | "reference_order"
  | "huge"
  | "hostile_text"
  | "projection"
  | "projection_bad";

/** What the control file can make an RPC do (each key is read on every call of that RPC). */
export type EngineOp = "assemble" | "compact" | "ingest" | "bootstrap" | "after_turn" | "maintain" | "subagent" | "forget" | "get_info";

/** grpc.health.v1 Check: an answer, or a misbehaviour. */
export type HealthMode = "SERVING" | "NOT_SERVING" | "hang" | "slow" | "throw" | "garbage_bytes" | "crash";

/** The optional RPCs an engine can be started with (`capabilities`). */
export type EngineCapability = "bootstrap" | "ingest_batch" | "after_turn" | "maintain" | "subagents" | "forget";

export type EngineControl = Partial<Record<EngineOp, EngineMode>> & {
  health?: HealthMode;
  /** Write the HostContext of every Assemble/Compact to this file (see the module comment). */
  leak_host_token_to?: string;
  /** How long "ignore_cancel" sleeps before answering (default 30000). */
  ignore_cancel_ms?: number;
  /** How long "slow" sleeps before answering (default 300). */
  slow_ms?: number;
  /** How long after the call's deadline "late" answers (default 200). */
  late_ms?: number;
  /** The size of "huge"'s extra message or summary (default 40 000 000). */
  huge_bytes?: number;
  /** The length of "hostile_text"'s text (default 1 000 000). */
  hostile_bytes?: number;
};

/** Replaces the control file atomically (write + rename): the engine never reads half a file. */
export function writeControl(file: string, c: EngineControl): void {
  const tmp = `${file}.tmp-${randomBytes(4).toString("hex")}`;
  fs.writeFileSync(tmp, JSON.stringify(c));
  fs.renameSync(tmp, file);
}
