/**
 * Bad input fuzzing of SessionService (issue 11, part 5): fast-check requests against one real
 * contextd — adversarial strings, roles and enum values out of range, missing fields, sizes over
 * the limits, zero/huge/max numbers, 64-bit counts past 2^53, tool results for unknown calls, ids
 * set on input, reused idempotency keys with other content — and for every call:
 *
 *   - the answer is OK, or a status that is not INTERNAL/UNKNOWN and says why;
 *   - a refused AppendMessages wrote nothing (the session's transcript is as before);
 *   - an OK AppendMessages stored every message as sent (what the server assigns aside: id,
 *     token_count, a missing timestamp), in order, with the entry ids it answered;
 *   - an idempotency key keeps its contract (docs/concepts.md, "Appending safely"): the same request again is `replayed` with the
 *     first answer's ids and writes nothing; other messages under the key are ALREADY_EXISTS;
 *   - after any call, the sessions it touched still answer GetSession, GetTranscript,
 *     ExportTranscript and Assemble.
 *
 * FC_SEED / FC_RUNS replay or widen a run (helpers/arbitraries.ts).
 */
import { status } from "@grpc/grpc-js";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as S from "../../src/contract/gen/contextd/v1/session.js";
import { Message, Role, type TranscriptEntry } from "../../src/contract/gen/contextd/v1/types.js";
import { appendDigest } from "../../src/host/append-digest.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { agentMessage } from "../fixtures/openclaw-messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { healthCheck } from "../helpers/health.js";
import * as A from "./helpers/arbitraries.js";

const LIMITS = { max_message_bytes: 32 * 1024, max_messages_per_append: 20, max_session_entries: 40 };
/** Long texts reach past max_message_bytes (one code unit is 1 to 3 UTF-8 bytes). */
const LONG = 40_000;

/** What the server receives for a string: the client's UTF-8 encoding, then session ids are trimmed. */
const wireText = (s: string) => Buffer.from(s, "utf8").toString("utf8");
const wireId = (s: string) => wireText(s).trim();
const wireMessage = (m: Partial<Message>) => Message.decode(Message.encode(Message.fromPartial(m)).finish());
/** The message as the server decodes it; undefined when a 64-bit count is past 2^53 (it cannot). */
const decodable = (m: Partial<Message>) => {
  try {
    return wireMessage(m);
  } catch {
    return undefined;
  }
};
const userText = (text: string) =>
  wireMessage({ role: Role.ROLE_USER, content: [{ block: { $case: "text", value: { text, signature: "", extraJson: "" } } }] });

/**
 * What a request with a definite fault must be refused naming, in the order the server checks
 * (decoding, the session, the key, the batch, then each message): a field, or for a message with
 * a bad role the index it may be refused at (the server may find an earlier message's fault first).
 * Undefined when none is predicted (the request may still be refused for reasons not modelled).
 */
function firstFault(req: S.AppendMessagesRequest): { names: string } | { messageAtMost: number } | undefined {
  const id = wireId(req.session?.sessionId ?? "");
  const key = wireText(req.idempotencyKey);
  if (req.messages.some((m) => !decodable(m))) return { names: "2^53" };
  // Ids and keys: at most 256 characters, no control characters, no U+FFFD (invalid UTF-8).
  const unfit = (text: string) => text.length > 256 || /[\u0000-\u001f\u007f\ufffd]/.test(text);
  if (!id || unfit(id)) return { names: "session.session_id" };
  if (unfit(wireText(req.session?.sessionKey ?? ""))) return { names: "session.session_key" };
  if (unfit(wireText(req.session?.agentId ?? ""))) return { names: "session.agent_id" };
  if (unfit(key)) return { names: "idempotency_key" };
  if (req.messages.length === 0) return { names: "messages is empty" };
  if (req.messages.length > LIMITS.max_messages_per_append) return { names: "limits.max_messages_per_append" };
  const bad = req.messages.findIndex((m) => !Role[m.role] || m.role === Role.ROLE_UNSPECIFIED);
  return bad >= 0 ? { messageAtMost: bad } : undefined;
}

function namesFault(details: string, fault: NonNullable<ReturnType<typeof firstFault>>): boolean {
  if ("names" in fault) return details.includes(fault.names);
  const at = /^messages\[(\d+)\]/.exec(details);
  return at !== null && Number(at[1]) <= fault.messageAtMost;
}

describe("SessionService under bad input", () => {
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  /** The last seq seen of each session (by its id on the server), to read only what an append adds. */
  const lastSeq = new Map<string, number>();

  beforeAll(async () => {
    contextd = await startContextd({ config: { limits: LIMITS } });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
  });

  async function entriesAfter(sessionId: string, afterSeq: number): Promise<TranscriptEntry[]> {
    const out: TranscriptEntry[] = [];
    // Page tokens are sealed by the server (page-token.ts): read from the start, keep those after afterSeq.
    let pageToken = "";
    do {
      const page = await cx.getTranscript({ session: { sessionId }, pageSize: 5000, pageToken });
      out.push(...page.entries.filter((e) => e.seq > afterSeq));
      pageToken = page.nextPageToken;
    } while (pageToken);
    return out;
  }

  /** The session as the server has it: refused id, absent, or its entry count and last seq. */
  async function snapshot(sessionId: string): Promise<{ kind: "invalid" | "absent" } | { kind: "exists"; entryCount: number; lastSeq: number }> {
    const info = await A.settle(cx.getSession({ session: { sessionId } }));
    if (!info.ok) {
      A.expectNamedRefusal(info.err, `GetSession ${JSON.stringify(sessionId)}`);
      expect([status.INVALID_ARGUMENT, status.NOT_FOUND]).toContain(info.err.code);
      return { kind: info.err.code === status.INVALID_ARGUMENT ? "invalid" : "absent" };
    }
    const id = wireId(sessionId);
    const newer = await entriesAfter(sessionId, lastSeq.get(id) ?? 0);
    if (newer.length) lastSeq.set(id, Number(newer[newer.length - 1]!.seq));
    return { kind: "exists", entryCount: info.value.info!.entryCount, lastSeq: lastSeq.get(id) ?? 0 };
  }

  describe("AppendMessages", () => {
    /** (session, key) → the first answered request's digest and answer. */
    const keys = new Map<string, { digest: string; entryIds: string[]; tokenCounts: number[] }>();
    /** Answered requests with a key, to repeat (as they were, or changed). */
    const keyed: S.AppendMessagesRequest[] = [];

    const sessionId = fc.oneof(
      { arbitrary: fc.constantFrom("fuzz-1", "fuzz-2", " fuzz-1 ", "fuzz-3\t", "\u00a0fuzz-2"), weight: 4 },
      { arbitrary: A.adversarialString({ long: 400 }), weight: 2 },
    );
    const request = fc
      .record({
        session: fc.record({ sessionId, sessionKey: A.adversarialString(), agentId: fc.oneof(fc.constant(""), A.adversarialString()) }),
        messages: fc.oneof(
          { arbitrary: fc.array(A.message(LONG), { maxLength: 6 }), weight: 8 },
          { arbitrary: fc.array(A.validMessage, { minLength: 1, maxLength: 4 }), weight: 4 },
          { arbitrary: fc.array(A.validMessage, { minLength: 21, maxLength: 24 }), weight: 1 },
        ),
        isHeartbeat: fc.boolean(),
        idempotencyKey: fc.oneof(
          { arbitrary: fc.constant(""), weight: 3 },
          { arbitrary: fc.constantFrom("k1", "k2", "turn-1"), weight: 3 },
          { arbitrary: A.adversarialString({ long: 300 }), weight: 1 },
        ),
      })
      .map((r) => S.AppendMessagesRequest.fromPartial(r));
    const step = fc.oneof(
      { arbitrary: request.map((req) => ({ kind: "fresh" as const, req })), weight: 4 },
      {
        arbitrary: fc.record({ kind: fc.constant("repeat" as const), pick: fc.nat(), change: fc.constantFrom("none", "none", "heartbeat", "messages") }),
        weight: 2,
      },
    );

    /** How the appends were answered: each outcome must have been seen for the run to mean anything. */
    const seen = { stored: 0, refused: 0, replayed: 0, alreadyExists: 0, sessionFull: 0 };

    /** `repeat`: the request repeats an answered one, as it was ("same") or with other messages. */
    async function append(req: S.AppendMessagesRequest, repeat?: "same" | "changed"): Promise<void> {
      const what = `AppendMessages ${A.describeRequest(req)}`;
      const sid = wireId(req.session!.sessionId);
      const sent = req.messages.map((m) => decodable(m) ?? m);
      const digest = appendDigest(sent, req.isHeartbeat);
      const before = await snapshot(req.session!.sessionId);
      const recorded = req.idempotencyKey ? keys.get(`${sid}\u0000${wireText(req.idempotencyKey)}`) : undefined;
      const predicted = firstFault(req);
      const res = await A.settle(cx.appendMessages(req));
      const after = await snapshot(req.session!.sessionId);

      if (repeat) expect(res.ok ? "replayed" : res.err.code, `${what}: a ${repeat} repeat`).toBe(repeat === "same" ? "replayed" : status.ALREADY_EXISTS);
      if (!res.ok) {
        seen[res.err.code === status.ALREADY_EXISTS ? "alreadyExists" : res.err.details.includes("max_session_entries") ? "sessionFull" : "refused"]++;
        A.expectNamedRefusal(res.err, what);
        expect(after, `${what}: a refused append wrote nothing`).toEqual(before);
        if (predicted) expect(namesFault(res.err.details, predicted), `${what}: refused naming ${JSON.stringify(predicted)}: ${res.err.details}`).toBe(true);
        expect(recorded?.digest === digest && !predicted, `${what}: a repeat of an answered request must be replayed, not ${res.err.details}`).toBe(false);
        if (recorded && res.err.code === status.ALREADY_EXISTS) expect(res.err.details).toContain("idempotency_key");
        return;
      }
      expect(predicted, `${what}: accepted despite a fault`).toBeUndefined();
      expect(before.kind, what).not.toBe("invalid");
      if (res.value.replayed || recorded) {
        expect(recorded, `${what}: replayed a key never answered`).toBeDefined();
        expect(recorded!.digest, `${what}: other messages under a used key must be ALREADY_EXISTS`).toBe(digest);
        expect(res.value, what).toEqual({ entryIds: recorded!.entryIds, tokenCounts: recorded!.tokenCounts, replayed: true, heldIndexes: [] });
        expect(after, `${what}: a replay writes nothing`).toEqual(before);
        seen.replayed++;
        return;
      }
      const added = await entriesAfter(req.session!.sessionId, before.kind === "exists" ? before.lastSeq : 0);
      expect(
        added.map((e) => e.id),
        what,
      ).toEqual(res.value.entryIds);
      expect(new Set(res.value.entryIds).size, `${what}: entry ids are unique`).toBe(sent.length);
      expect(after.kind === "exists" && after.entryCount, what).toBe((before.kind === "exists" ? before.entryCount : 0) + sent.length);
      added.forEach((entry, i) => {
        expect(entry.entry?.$case, what).toBe("message");
        const stored = entry.entry!.$case === "message" ? entry.entry!.value : undefined;
        const expected = { ...sent[i]!, id: entry.id, tokenCount: res.value.tokenCounts[i], timestampMs: sent[i]!.timestampMs || entry.timestampMs };
        expect(stored, `${what}: message ${i} read back as sent`).toEqual(expected);
      });
      seen.stored++;
      if (req.idempotencyKey) {
        keys.set(`${sid}\u0000${wireText(req.idempotencyKey)}`, { digest, entryIds: res.value.entryIds, tokenCounts: res.value.tokenCounts });
        keyed.push(req);
      }
    }

    it("answers OK and stores losslessly, or refuses with a named status and writes nothing", async () => {
      const runs = A.fuzzRuns("AppendMessages", 400);
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 3 }), async (steps) => {
          for (const s of steps) {
            if (s.kind === "fresh") await append(s.req);
            else if (keyed.length) {
              const original = keyed[s.pick % keyed.length]!;
              const changed = { ...original };
              if (s.change === "heartbeat") changed.isHeartbeat = !original.isHeartbeat;
              if (s.change === "messages") changed.messages = [userText(`changed ${keyed.length}`)];
              await append(changed, s.change === "none" ? "same" : "changed");
            }
          }
        }),
        runs,
      );
      console.info(`[fuzz] appends: ${JSON.stringify(seen)}`);
      // Fewer runs (FC_RUNS) may not reach every outcome.
      if (runs.numRuns! >= 100)
        for (const [outcome, n] of Object.entries(seen)) expect(n, `no append was ${outcome}: the fuzz did not reach it`).toBeGreaterThan(0);
    });
  });

  describe("every other RPC", () => {
    const pool = ["fuzz-1", "fuzz-2", "other-1", "other-2", "child-1", "imp-1"];
    const handles: string[] = [];
    const compactionIds: string[] = [];
    /** Per RPC, how many calls were answered OK: every RPC must have been exercised for real. */
    const answered = new Map<string, number>();
    const named = fc.oneof({ arbitrary: fc.constantFrom(...pool), weight: 6 }, { arbitrary: A.adversarialString({ long: 300 }), weight: 1 });
    const ref = named.map((sessionId) => ({ sessionId }));
    /** Names a session that may not exist yet: for calls that create one. */
    const fresh = fc.oneof(
      ref,
      fc.nat({ max: 60 }).map((n) => ({ sessionId: `new-${n}` })),
    );
    const pageToken = fc.oneof(
      fc.constant(""),
      A.adversarialString(),
      fc.oneof(A.adversarialString(), fc.integer().map(String)).map((p) => Buffer.from(`v1:${p}`).toString("base64url")),
    );
    const jsonl = fc.oneof(
      { arbitrary: A.sessionFile(agentMessage), weight: 4 },
      { arbitrary: A.sessionFile(fc.json({ maxDepth: 2 }).map((j) => JSON.parse(j) as unknown)), weight: 1 },
      { arbitrary: fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)), weight: 1 },
      { arbitrary: A.adversarialString({ long: 2000 }).map((t) => Buffer.from(t)), weight: 1 },
      // Astral characters that are no JSON: V8's error quotes one UTF-16 unit of the first, half a pair.
      { arbitrary: fc.constant(Buffer.from("\u{3a3a7}\u{7dce2}")), weight: 1 },
    );
    const handle = fc.oneof(
      fc.nat().map((i) => handles[i % Math.max(1, handles.length)] ?? ""),
      A.adversarialString(),
      fc.record({ c: named, e: A.adversarialString() }).map((h) => Buffer.from(JSON.stringify(h)).toString("base64url")),
    );
    const call = <R extends string, T>(rpc: R, req: fc.Arbitrary<T>, weight = 2) => ({ arbitrary: fc.record({ rpc: fc.constant(rpc), req }), weight });
    const op = fc.oneof(
      call("appendMessages", fc.record({ session: fresh, messages: A.conversation }), 6),
      call("appendMessages", fc.record({ session: ref, messages: fc.array(A.message(2000), { minLength: 1, maxLength: 4 }) })),
      call(
        "assemble",
        fc.record({
          session: ref,
          tokenBudget: A.u32,
          prompt: A.adversarialString(),
          availableTools: fc.array(A.adversarialString(), { maxLength: 3 }),
          model: A.adversarialString(),
          autoCompact: fc.option(fc.boolean(), { nil: undefined }),
        }),
        3,
      ),
      call(
        "compact",
        fc.record({
          session: ref,
          tokenBudget: A.u32,
          force: fc.boolean(),
          compactionTarget: A.compactionTargetValue,
          customInstructions: A.adversarialString({ long: 3000 }),
          currentTokenCount: A.u32,
        }),
        3,
      ),
      call("afterTurn", fc.record({ session: ref, prePromptMessageCount: A.u32, autoCompactionSummary: A.adversarialString(), tokenBudget: A.u32 })),
      call("maintain", fc.record({ session: ref })),
      call(
        "prepareSubagentSpawn",
        fc.record({
          parent: ref,
          child: fresh,
          contextMode: A.contextModeValue,
          ttlMs: fc.oneof({ arbitrary: A.u64Safe, weight: 8 }, { arbitrary: A.u64Unsafe, weight: 1 }),
        }),
        3,
      ),
      call("rollbackSubagentSpawn", fc.record({ rollbackHandle: handle })),
      call("endSubagent", fc.record({ child: fresh, reason: A.endReasonValue })),
      call("getSession", fc.record({ session: ref }), 1),
      call("listSessions", fc.record({ pageSize: A.u32, pageToken }), 1),
      call("getTranscript", fc.record({ session: ref, pageSize: A.u32, pageToken }), 1),
      call("importTranscript", fc.record({ session: fresh, jsonl }), 3),
      call("exportTranscript", fc.record({ session: ref }), 1),
      call("deleteSession", fc.record({ session: fresh }), 1),
      call(
        "searchTranscript",
        fc.record({
          session: ref,
          query: fc.oneof(fc.string({ maxLength: 40 }), A.adversarialString(), fc.constantFrom('"', '"a OR', "*", "NEAR(x", "-x", "body:*", "m1")),
          scope: fc.integer({ min: -1, max: 3 }),
          order: fc.integer({ min: -1, max: 3 }),
          pageSize: A.u32,
          pageToken,
        }),
        1,
      ),
      call(
        "expandCompaction",
        fc.record({
          session: ref,
          compactionEntryId: fc.oneof(
            { arbitrary: fc.nat().map((i) => compactionIds[i % Math.max(1, compactionIds.length)] ?? ""), weight: 3 },
            { arbitrary: A.adversarialString(), weight: 1 },
          ),
          pageSize: A.u32,
          pageToken,
        }),
        2,
      ),
    );

    const refsOf = (req: Record<string, unknown>) => [req.session, req.parent, req.child].filter((r): r is { sessionId: string } => Boolean(r));
    /** Entry counts of the sessions a request names (undefined: absent or refused id). */
    const counts = (req: Record<string, unknown>) =>
      Promise.all(
        refsOf(req).map(async (r) => {
          const info = await A.settle(cx.getSession({ session: r }));
          return info.ok ? info.value.info!.entryCount : undefined;
        }),
      );

    /** Every read a runtime makes still answers for the sessions a call touched. */
    async function stillReadable(req: Record<string, unknown>, what: string): Promise<void> {
      for (const r of refsOf(req)) {
        if (!(await A.settle(cx.getSession({ session: r }))).ok) continue;
        const reads = {
          GetTranscript: () => cx.getTranscript({ session: r, pageSize: 50 }),
          ExportTranscript: () => cx.exportTranscript({ session: r }),
          Assemble: () => cx.assemble({ session: r, tokenBudget: 200_000 }),
        };
        for (const [name, read] of Object.entries(reads)) {
          const res = await A.settle<unknown>(read());
          if (!res.ok) A.expectNamedRefusal(res.err, `${what}, then ${name} of ${JSON.stringify(r.sessionId)}`);
        }
      }
    }

    it("answers OK or a named refusal; a refusal leaves the sessions it names as they were", async () => {
      const runs = A.fuzzRuns("other SessionService RPCs", 300);
      await fc.assert(
        fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 4 }), async (ops) => {
          for (const { rpc, req } of ops) {
            const what = `${rpc} ${A.describeRequest(req)}`;
            const before = await counts(req);
            // eslint-disable-next-line @typescript-eslint/no-explicit-any
            const res = await A.settle((cx[rpc] as (r: any) => Promise<unknown>).call(cx, req));
            if (!res.ok) {
              A.expectNamedRefusal(res.err, what);
              expect(await counts(req), `${what}: refused, so nothing changed`).toEqual(before);
            } else {
              answered.set(rpc, (answered.get(rpc) ?? 0) + 1);
              if (rpc === "prepareSubagentSpawn") handles.push((res.value as S.PrepareSubagentSpawnResponse).rollbackHandle);
              // ExpandCompaction needs the id of a compaction entry: the ones a compaction just committed.
              if (rpc === "compact" && (res.value as S.CompactResponse).compacted) {
                const entries = (await cx.getTranscript({ session: (req as { session: { sessionId: string } }).session, pageSize: 5000 })).entries;
                compactionIds.push(...entries.filter((e) => e.entry?.$case === "compaction").map((e) => e.id));
              }
            }
            await stillReadable(req, what);
          }
        }),
        runs,
      );
      console.info(`[fuzz] answered OK: ${JSON.stringify(Object.fromEntries(answered))}`);
      if (runs.numRuns! >= 100)
        for (const rpc of Object.keys(S.SessionServiceService))
          expect(answered.get(rpc) ?? 0, `${rpc} was never answered OK: the fuzz did not reach it`).toBeGreaterThan(0);
      expect(await healthCheck(contextd.address)).toBe("SERVING");
      expect(contextd.exitCode()).toBeUndefined();
    });
  });
});
