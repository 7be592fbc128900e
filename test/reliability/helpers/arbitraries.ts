/**
 * Bad input for the fuzz tests (test/reliability/fuzz-*.test.ts): fast-check arbitraries of
 * adversarial strings and numbers, of contextd.v1 messages that are wrong in every way a client can
 * make them (roles out of range, blocks unset, tool results for unknown calls, sizes over the
 * limits, JSON fields that are not JSON, 64-bit counts past 2^53), and the one assertion every
 * refused call must pass: a status that is not INTERNAL/UNKNOWN (nor UNAVAILABLE: the stores these
 * tests use are never away, so it means the server died) and says why.
 *
 * Runs are reproducible: `fuzzRuns` uses a fixed seed unless FC_SEED says otherwise, and prints it;
 * FC_RUNS changes the number of runs.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import fc from "fast-check";
import { expect } from "vitest";
import {
  CompactionTarget,
  Message as MessageType,
  Role,
  SubagentContextMode,
  SubagentEndReason,
  type ContentBlock,
  type Message,
} from "../../../src/contract/gen/contextd/v1/types.js";

/** The seed when FC_SEED is unset: a fixed one, so that a run in CI can be replayed locally. */
const DEFAULT_SEED = 20_260_611;

/** fast-check parameters for one property: the seed (printed), the number of runs. */
export function fuzzRuns(name: string, defaultRuns: number): fc.Parameters<unknown> {
  const seed = process.env.FC_SEED ? Number(process.env.FC_SEED) : DEFAULT_SEED;
  const numRuns = process.env.FC_RUNS ? Number(process.env.FC_RUNS) : defaultRuns;
  console.info(`[fuzz] ${name}: seed ${seed}, ${numRuns} runs (replay with FC_SEED=${seed}; FC_RUNS changes the runs)`);
  return { seed, numRuns };
}

// ---------------------------------------------------------------------------------------------
// Strings
// ---------------------------------------------------------------------------------------------

const char = (min: number, max: number) => fc.integer({ min, max }).map((c) => String.fromCharCode(c));
/** C0 controls, DEL, NEL and the Unicode line/paragraph separators. */
const controlChar = fc.oneof(char(0, 0x1f), fc.constantFrom("\u007f", "\u0085", "\u2028", "\u2029"));
/** UTF-16 halves on their own: the client's UTF-8 encoder turns them into U+FFFD on the wire. */
const surrogate = char(0xd800, 0xdfff);

/** Strings that broke something somewhere once: path tricks, SQL, format strings, RTL, BOM, ZWJ... */
export const NASTY = [
  "",
  " ",
  "\t",
  "\u0000",
  "\n\n",
  "legacy",
  " legacy ",
  "LEGACY",
  "core",
  "null",
  "undefined",
  "NaN",
  "-1",
  "0x7fffffff",
  "../../etc/passwd",
  "'; DROP TABLE sessions; --",
  "%s%s%n",
  "${process.exit()}",
  "__proto__",
  "constructor",
  "\u202egnp.exe",
  "\uFEFF",
  "\u200B",
  "\uFFFD",
  "\uFFFF",
  "👩‍👩‍👧‍👦",
  "🏳️‍🌈",
  "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
  "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
  "a\u0000b",
  "{}",
  "[]",
  '{"a":',
  "v1:",
  "djE6",
  "<|endoftext|>",
  "\r\n",
  "unix:",
  "dns:///",
];

/** A string of `length` code units built from one repeated unit (cut at the end, maybe mid-surrogate). */
export function repeated(length: number): fc.Arbitrary<string> {
  return fc.constantFrom("x", "é", "😀", "\u0000", "ab ", "日本").map((u) => u.repeat(Math.ceil(length / u.length)).slice(0, length));
}

/** Adversarial text: any code point, graphemes, controls, lone surrogates, the NASTY list, and now and then long. */
export function adversarialString(opts: { maxLength?: number; long?: number } = {}): fc.Arbitrary<string> {
  const maxLength = opts.maxLength ?? 40;
  const parts: Array<fc.WeightedArbitrary<string>> = [
    { arbitrary: fc.string({ maxLength }), weight: 3 },
    { arbitrary: fc.string({ unit: "binary", maxLength }), weight: 3 },
    { arbitrary: fc.string({ unit: "grapheme", maxLength }), weight: 2 },
    { arbitrary: fc.string({ unit: controlChar, minLength: 1, maxLength: 6 }), weight: 1 },
    { arbitrary: fc.string({ unit: fc.oneof(surrogate, char(0x20, 0x7e)), minLength: 1, maxLength: 8 }), weight: 1 },
    { arbitrary: fc.constantFrom(...NASTY), weight: 3 },
    {
      arbitrary: fc.tuple(fc.constantFrom(...NASTY), fc.string({ unit: controlChar, maxLength: 2 }), fc.string({ maxLength: 8 })).map((p) => p.join("")),
      weight: 1,
    },
  ];
  if (opts.long) parts.push({ arbitrary: fc.integer({ min: 257, max: opts.long }).chain(repeated), weight: 1 });
  return fc.oneof(...parts);
}

/** What a JSON-carrying string field may hold: JSON, not-quite-JSON, or anything. */
export const jsonish = fc.oneof(
  fc.constant(""),
  fc.json({ maxDepth: 2 }),
  fc.constantFrom("{", "[1,", "null", "{}", "[]", '"x"', "1e999", '{"__proto__":{"polluted":1}}', "NaN", "\u0000"),
  adversarialString({ maxLength: 12 }),
);

// ---------------------------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------------------------

export const U32_MAX = 2 ** 32 - 1;
/** uint32 fields: zero, one, the int32/uint32 boundaries, and anything between. */
export const u32 = fc.oneof(fc.constantFrom(0, 1, 2 ** 31 - 1, 2 ** 31, U32_MAX), fc.integer({ min: 1, max: 200_000 }), fc.nat({ max: U32_MAX }));
/** uint64 fields a JavaScript number holds exactly. */
export const u64Safe = fc.oneof(fc.constantFrom(0, 1, 2 ** 32, 9_000_000_000_000, 9_000_000_000_001, Number.MAX_SAFE_INTEGER), fc.nat());
/** uint64 values past 2^53: valid protobuf that a number-typed decoder cannot hold. */
export const u64Unsafe = fc.constantFrom(2 ** 53 + 2, 2 ** 60, 2 ** 63, 2 ** 64 - 2048);
/** int64 timestamps: 0 (unset), negative, the safe-integer ends. */
export const i64 = fc.oneof(fc.constantFrom(0, -1, 1, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 1_767_225_600_000), fc.integer());
/** An enum field: mostly a real value, else out of range (negative, past the last, int32 ends). */
export function enumValue(values: number[]): fc.Arbitrary<number> {
  return fc.oneof(
    { arbitrary: fc.constantFrom(...values), weight: 4 },
    { arbitrary: fc.constantFrom(-1, 99, -(2 ** 31), 2 ** 31 - 1, Math.max(...values) + 1), weight: 1 },
  );
}
const valuesOf = (e: Record<string, string | number>) => Object.values(e).filter((v): v is number => typeof v === "number" && v >= 0);
export const roleValue = enumValue(valuesOf(Role));
export const contextModeValue = enumValue(valuesOf(SubagentContextMode));
export const endReasonValue = enumValue(valuesOf(SubagentEndReason));
export const compactionTargetValue = enumValue(valuesOf(CompactionTarget));
/** Doubles of a Cost: NaN, infinities, -0, tiny and huge. */
const cost = fc.oneof(fc.double(), fc.constantFrom(Number.NaN, Infinity, -Infinity, -0, Number.MIN_VALUE, Number.MAX_VALUE));

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

/** Tool call ids: ones calls in the same batch use, unknown ones, empty, adversarial. */
export const toolCallId = fc.oneof(fc.constantFrom("call_1", "call_2", "call_unknown", ""), adversarialString({ maxLength: 12 }));

/** Text of a block: usually short, now and then near or over a size limit of `long` characters. */
function blockText(long: number) {
  return fc.oneof(
    { arbitrary: adversarialString({ maxLength: 60 }), weight: 20 },
    { arbitrary: fc.integer({ min: Math.floor(long * 0.8), max: long }).chain(repeated), weight: 1 },
  );
}

export function contentBlock(long: number): fc.Arbitrary<ContentBlock> {
  const s = adversarialString({ maxLength: 16 });
  return fc.oneof(
    {
      arbitrary: fc.record({ text: blockText(long), signature: s, extraJson: jsonish }).map((value) => ({ block: { $case: "text" as const, value } })),
      weight: 6,
    },
    {
      arbitrary: fc
        .record({ mimeType: s, data: fc.uint8Array({ maxLength: 64 }), uri: s, extraJson: jsonish })
        .map((value) => ({ block: { $case: "image" as const, value } })),
      weight: 1,
    },
    {
      arbitrary: fc
        .record({ thinking: blockText(long), signature: s, redacted: fc.boolean(), extraJson: jsonish })
        .map((value) => ({ block: { $case: "thinking" as const, value } })),
      weight: 1,
    },
    {
      arbitrary: fc
        .record({ id: toolCallId, name: s, argumentsJson: jsonish, signature: s, extraJson: jsonish })
        .map((value) => ({ block: { $case: "toolCall" as const, value } })),
      weight: 2,
    },
    // A ContentBlock with no block set (what an old client, or a bug, sends).
    { arbitrary: fc.constant({ block: undefined }), weight: 1 },
  ) as fc.Arbitrary<ContentBlock>;
}

/**
 * A message as a client may send it: any role (or none, or out of range), content that may be
 * empty, tool results for unknown calls, ids set on input (the host assigns them), metadata with
 * adversarial keys, usage with huge counts and NaN costs, JSON fields that are not JSON.
 * `long` is how long the occasional long text gets (choose it around the server's message limit).
 */
export function message(long: number): fc.Arbitrary<Partial<Message>> {
  const s = adversarialString({ maxLength: 16 });
  const usage = fc.record({
    input: fc.oneof({ arbitrary: u64Safe, weight: 12 }, { arbitrary: u64Unsafe, weight: 1 }),
    output: u64Safe,
    cacheRead: u64Safe,
    cacheWrite: u64Safe,
    total: u64Safe,
    cost: fc.option(fc.record({ input: cost, output: cost, cacheRead: cost, cacheWrite: cost, total: cost }), { nil: undefined }),
  });
  return fc.record(
    {
      id: fc.oneof(fc.constant(""), fc.constant("dup"), s),
      role: roleValue,
      content: fc.array(contentBlock(long), { maxLength: 4 }),
      timestampMs: i64,
      toolCallId,
      toolName: s,
      isError: fc.boolean(),
      usage,
      customType: s,
      metadata: fc.dictionary(adversarialString({ maxLength: 12 }), adversarialString({ maxLength: 24 }), { maxKeys: 4 }),
      tokenCount: u32,
      api: s,
      provider: s,
      model: s,
      stopReason: s,
      responseId: s,
      errorMessage: s,
      detailsJson: jsonish,
      contentIsText: fc.boolean(),
      excludeFromContext: fc.boolean(),
      extraJson: jsonish,
    },
    { requiredKeys: ["role", "content"] },
  );
}

/** A message the server must accept: a role, text content, a tool result with a call id. */
export const validMessage: fc.Arbitrary<Partial<Message>> = fc
  .record({ role: fc.constantFrom(Role.ROLE_USER, Role.ROLE_ASSISTANT, Role.ROLE_SYSTEM), text: adversarialString({ maxLength: 40 }) })
  .map(({ role, text }) => ({ role, content: [{ block: { $case: "text" as const, value: { text, signature: "", extraJson: "" } } }] }));

/**
 * A conversation the server must accept, with what makes compaction and pairing hard: tool calls
 * whose ids repeat across turns, results for calls that were never made, long tool output.
 */
export const conversation: fc.Arbitrary<Message[]> = fc
  .array(
    fc.record({
      ask: adversarialString({ maxLength: 60 }),
      answer: adversarialString({ maxLength: 60 }),
      calls: fc.array(
        fc.record({
          id: fc.oneof(fc.constantFrom("call_1", "call_2"), fc.string({ minLength: 1, maxLength: 8 })),
          answeredAs: fc.option(
            toolCallId.filter((id) => id !== ""),
            { nil: undefined },
          ),
          output: blockText(3000),
        }),
        { maxLength: 3 },
      ),
    }),
    { minLength: 1, maxLength: 4 },
  )
  .map((turns) =>
    turns.flatMap(({ ask, answer, calls }) => {
      const text = (t: string): ContentBlock => ({ block: { $case: "text", value: { text: t, signature: "", extraJson: "" } } });
      const call = (id: string): ContentBlock => ({
        block: { $case: "toolCall", value: { id, name: "bash", argumentsJson: '{"cmd":"ls"}', signature: "", extraJson: "" } },
      });
      return [
        MessageType.fromPartial({ role: Role.ROLE_USER, content: [text(ask || "?")] }),
        MessageType.fromPartial({ role: Role.ROLE_ASSISTANT, content: [text(answer), ...calls.map((c) => call(c.id))] }),
        ...calls.map((c) =>
          MessageType.fromPartial({ role: Role.ROLE_TOOL_RESULT, toolCallId: c.answeredAs ?? c.id, toolName: "bash", content: [text(c.output)] }),
        ),
      ];
    }),
  );

/**
 * An OpenClaw session JSONL file (version 3 or 4) of `messages` chained by parent ids, now and then
 * broken: a line replaced by garbage, a parent that does not exist, a duplicate id, no header.
 */
export function sessionFile(messages: fc.Arbitrary<unknown>): fc.Arbitrary<Buffer> {
  return fc
    .record({
      version: fc.constantFrom(3, 4),
      id: adversarialString({ maxLength: 12 }),
      messages: fc.array(messages, { minLength: 1, maxLength: 5 }),
      breakage: fc.oneof(
        { arbitrary: fc.constant("none"), weight: 3 },
        { arbitrary: fc.constantFrom("garbage", "orphan", "duplicate", "headless"), weight: 2 },
      ),
      at: fc.nat(),
      garbage: adversarialString({ maxLength: 20 }),
    })
    .map(({ version, id, messages: ms, breakage, at, garbage }) => {
      const lines: unknown[] = [{ type: "session", version, id, timestamp: "2026-01-02T03:04:05.678Z", cwd: "/tmp" }];
      ms.forEach((message, i) =>
        lines.push({ type: "message", id: `e${i}`, parentId: i ? `e${i - 1}` : null, timestamp: "2026-01-02T03:04:06.000Z", message }),
      );
      const text = lines.map((l) => JSON.stringify(l));
      const k = 1 + (at % ms.length);
      if (breakage === "garbage") text[k] = garbage;
      if (breakage === "orphan") text[k] = JSON.stringify({ ...(lines[k] as object), parentId: "nowhere" });
      if (breakage === "duplicate") text.push(text[k]!);
      if (breakage === "headless") text.shift();
      return Buffer.from(text.join("\n"));
    });
}

// ---------------------------------------------------------------------------------------------
// Outcomes
// ---------------------------------------------------------------------------------------------

export type Outcome<T> = { ok: true; value: T } | { ok: false; err: ServiceError };

/** The call's answer or its gRPC error, never a throw. */
export async function settle<T>(p: Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await p };
  } catch (err) {
    return { ok: false, err: err as ServiceError };
  }
}

/**
 * A refusal as every client may rely on: a gRPC status (not a transport failure), not INTERNAL or
 * UNKNOWN (those are bugs of the server), with details that say what was wrong.
 */
export function expectNamedRefusal(err: ServiceError, what: string): void {
  const where = `${what} → ${status[err.code] ?? err.code}: ${err.details}`;
  expect(typeof err.code, where).toBe("number");
  // UNAVAILABLE is what the client reports when the connection failed: here, the server died.
  expect([status.INTERNAL, status.UNKNOWN, status.UNAVAILABLE], where).not.toContain(err.code);
  expect(err.code, where).not.toBe(status.OK);
  expect(err.details?.trim().length ?? 0, where).toBeGreaterThan(0);
}

/** A short description of a request for assertion messages (long strings cut). */
export function describeRequest(req: unknown): string {
  const text = JSON.stringify(req, (_k, v: unknown) =>
    typeof v === "string" && v.length > 80 ? `${v.slice(0, 80)}…(${v.length})` : v instanceof Uint8Array ? `<${v.length} bytes>` : v,
  );
  return text.length > 1500 ? `${text.slice(0, 1500)}…` : text;
}
