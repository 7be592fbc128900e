/**
 * Random OpenClaw 2026.9.x session JSONL files for test/openclaw/session-conformance.test.ts.
 *
 * A file is generated as a list of operations (fast-check shrinks the list) that a builder turns
 * into rows the way OpenClaw's SessionManager and its readers see them: a header (version 3 or 4),
 * then messages of every stored role, every entry type, `leaf` rows, `appendMode: "side"` rows,
 * branches (a parent picked among earlier rows), entries without `parentId`, and rows OpenClaw
 * keeps without recognising them. Every file is one OpenClaw itself loads; the test checks that.
 *
 * Left out on purpose, each for a reason the test file names (EXCLUDED there):
 * - a compaction's or reset's `firstKeptEntryId` that names a row OpenClaw does not index (an
 *   unrecognised row, a `leaf` row, a label of an unknown entry): the builder only names indexed
 *   entries, missing ids and the entry itself;
 * - what contextd refuses by design (ids missing or used twice, empty user/custom content, a child
 *   before its parent on the active branch — parents are always earlier rows —, tool calls or
 *   results without an id, a custom message with an empty type, lines that are not objects);
 * - a compaction-type `providerReplay` on an assistant message with block content (only legacy
 *   string content, which OpenClaw's reader strips it from everywhere, carries one), and a
 *   `tokensBefore` that is not a uint32.
 */
import fc from "fast-check";

export type Row = Record<string, unknown>;

const T0 = Date.UTC(2026, 8, 8, 9, 12, 3, 114);
/** A reset reason String() throws on (`z.coerce.string()` then fails the row). */
const UNCOERCIBLE_REASON = { toString: false };
const coerces = (v: unknown): boolean => {
  try {
    String(v);
    return true;
  } catch {
    return false;
  }
};
const MISSING_RESULT = "[openclaw] missing tool result in session history; inserted synthetic error result for transcript repair.";

type ParentMode = "tail" | "earlier" | "null" | "absent" | "unknown" | "self";
type TsMode = "iso" | "noMs" | "offset" | "absent";
type KeptMode = "ancestor" | "any" | "missing" | "self" | "none";

const parentMode = fc.oneof(
  { weight: 20, arbitrary: fc.constant<ParentMode>("tail") },
  { weight: 3, arbitrary: fc.constant<ParentMode>("earlier") },
  { weight: 1, arbitrary: fc.constantFrom<ParentMode>("null", "absent", "unknown", "self") },
);
const tsMode = fc.constantFrom<TsMode>("iso", "iso", "iso", "iso", "iso", "iso", "noMs", "offset", "absent");
const text = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ maxLength: 16, unit: "grapheme" }) },
  { weight: 1, arbitrary: fc.constantFrom("", " ", "😀 日本語", "<summary>x</summary>", "line\nbreak", '{"a":1}', "\\u0000") },
);
const nonEmpty = fc.string({ minLength: 1, maxLength: 12 }).filter((s) => s.length > 0);
const json = fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<unknown>;
const ms = fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 });
const count = fc.nat({ max: 200_000 });
const money = fc.double({ min: 0, max: 5, noNaN: true, noDefaultInfinity: true });
const base64 = fc.uint8Array({ minLength: 1, maxLength: 12 }).map((b) => Buffer.from(b).toString("base64"));
/** Present one time in `oneIn` (and shrinking to absent). */
const opt = <T>(a: fc.Arbitrary<T>, oneIn = 3) => fc.oneof({ weight: oneIn - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: a });
/** Absent one time in `oneIn`. */
const usually = <T>(a: fc.Arbitrary<T>, oneIn = 4) => fc.option(a, { nil: undefined, freq: oneIn });

const textBlock = fc.record({ type: fc.constant("text"), text, textSignature: opt(text, 2) });
const imageBlock = fc.record({ type: fc.constant("image"), data: base64, mimeType: fc.constantFrom("image/png", "image/jpeg") });
const thinkingBlock = fc.record({ type: fc.constant("thinking"), thinking: text, thinkingSignature: opt(text, 2), redacted: opt(fc.constant(true), 4) });
const userContent = fc.oneof(text, fc.array(fc.oneof(textBlock, imageBlock), { minLength: 1, maxLength: 3 }));
const usage = fc.record({
  input: count,
  output: count,
  cacheRead: count,
  cacheWrite: count,
  totalTokens: count,
  cost: fc.record({ input: money, output: money, cacheRead: money, cacheWrite: money, total: money }),
});
/** Fields real transcripts carry beyond the types (OpenClaw's metadata), kept verbatim by both. */
const extras = fc.record({ __openclaw: opt(fc.record({ runId: nonEmpty }), 4), idempotencyKey: opt(nonEmpty, 5) });

/** A message, minus what the builder decides (tool call ids, tool result pairing). */
const message = fc.oneof(
  fc.record({ kind: fc.constant("user" as const), content: userContent, runtimeContextCarrier: opt(fc.boolean(), 6) }),
  fc.record({
    kind: fc.constant("assistant" as const),
    blocks: fc.array(
      fc.oneof(
        textBlock,
        thinkingBlock,
        fc.record({
          type: fc.constantFrom("toolCall", "toolCall", "toolCall", "toolUse", "functionCall"),
          name: nonEmpty,
          arguments: fc.dictionary(nonEmpty, json, { maxKeys: 2 }),
          thoughtSignature: opt(text, 2),
        }),
      ),
      { maxLength: 4 },
    ),
    legacyText: opt(text, 8),
    api: fc.constantFrom("anthropic-messages", "openai-responses", "google-generative-ai"),
    provider: fc.constantFrom("anthropic", "openai", "google"),
    model: nonEmpty,
    usage,
    stopReason: fc.constantFrom("stop", "toolUse", "length", "error", "aborted"),
    responseId: opt(nonEmpty),
    errorMessage: opt(text, 5),
    // Compaction-type checkpoints only on legacy string content, which OpenClaw's reader drops them
    // from wherever the message is (see the test file's EXCLUDED note for the rest).
    providerReplay: opt(
      fc.record({
        type: fc.constantFrom("openai-responses-reasoning", "anthropic-thinking", "anthropic-compaction", "openai-responses-compaction"),
        data: nonEmpty,
      }),
      6,
    ),
    duplicateCall: fc.nat({ max: 9 }),
  }),
  fc.record({
    kind: fc.constant("toolResult" as const),
    pairing: fc.constantFrom("latest", "latest", "latest", "older", "late", "late", "unknown", "padded", "noId", "synthetic"),
    pick: fc.nat(),
    // Legacy readers' shapes too: a string, or one block that is not in a list.
    content: fc.oneof(
      fc.array(fc.oneof(textBlock, imageBlock), { maxLength: 2 }),
      text.map((t) => ({ legacy: t })),
      textBlock.map((b) => ({ single: b })),
    ),
    details: opt(json),
    isError: fc.boolean(),
    altId: opt(fc.record({ key: fc.constantFrom("toolUseId", "tool_call_id", "tool_use_id", "callId", "call_id"), own: fc.boolean() }), 6),
  }),
  fc.record({
    kind: fc.constant("custom" as const),
    customType: usually(nonEmpty, 10).map((t) => t ?? null),
    content: userContent,
    display: fc.boolean(),
    details: opt(json),
  }),
  fc.record({
    kind: fc.constant("bashExecution" as const),
    command: text,
    output: text,
    exitCode: usually(fc.integer({ min: 0, max: 255 })),
    cancelled: fc.boolean(),
    truncated: fc.boolean(),
    fullOutputPath: opt(nonEmpty, 4),
  }),
);

const entry = fc.oneof(
  {
    weight: 24,
    arbitrary: fc.record({
      type: fc.constant("message" as const),
      message,
      extras,
      excluded: fc.nat({ max: 9 }),
      timestamp: opt(ms, 4),
      untimed: fc.nat({ max: 11 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant("custom_message" as const),
      customType: nonEmpty,
      content: userContent,
      display: fc.boolean(),
      details: opt(json),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant("branch_summary" as const),
      summary: fc.oneof(fc.constant(""), text),
      fromRoot: fc.nat({ max: 4 }),
      details: opt(json),
      fromHook: opt(fc.boolean()),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant("compaction" as const),
      summary: text,
      kept: fc.constantFrom<KeptMode>("ancestor", "ancestor", "ancestor", "any", "missing", "self"),
      pick: fc.nat(),
      tokensBefore: fc.nat({ max: 2 ** 32 - 1 }),
      tokensAfter: opt(count, 2),
      details: opt(fc.record({ readFiles: fc.array(nonEmpty, { maxLength: 2 }), modifiedFiles: fc.array(nonEmpty, { maxLength: 2 }) })),
      fromHook: opt(fc.boolean()),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      type: fc.constant("reset" as const),
      // OpenClaw coerces the reason to a string: ["daily"] is a daily reset; String() throws on
      // UNCOERCIBLE_REASON, a row OpenClaw then does not recognise (nor index).
      reason: fc.constantFrom<unknown>("new", "reset", "idle", "daily", "cron-stale", "new", ["daily"], UNCOERCIBLE_REASON),
      kept: fc.constantFrom<KeptMode>("ancestor", "ancestor", "any", "missing", "none", "none"),
      pick: fc.nat(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ type: fc.constant("label" as const), known: fc.nat({ max: 3 }), pick: fc.nat(), label: usually(nonEmpty) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant("session_info" as const), name: usually(text) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant("model_change" as const), provider: nonEmpty, modelId: nonEmpty }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant("thinking_level_change" as const), thinkingLevel: fc.constantFrom("off", "low", "high") }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant("custom" as const), customType: nonEmpty, data: opt(json) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant("leaf" as const),
      target: fc.constantFrom("known", "known", "known", "opaque", "unknown", "null"),
      append: fc.constantFrom("absent", "absent", "known", "null", "unknown"),
      pick: fc.nat(),
      pick2: fc.nat(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant("opaque" as const),
      shape: fc.constantFrom(
        "unknownType",
        "noParent",
        "noType",
        "storedSummary",
        "numericTimestamp",
        "emptyProvider",
        "noDisplay",
        "badLeaf",
        "badLeafMode",
        "badReason",
      ),
      data: opt(json),
    }),
  },
);

/** A user turn: results come in any order, one may be missing or repeated. */
const turn = fc.record({
  type: fc.constant("turn" as const),
  user: userContent,
  calls: fc.array(
    fc.record({
      type: fc.constantFrom("toolCall", "toolCall", "toolUse"),
      name: fc.constantFrom("bash", "read", "edit"),
      arguments: fc.dictionary(nonEmpty, json, { maxKeys: 2 }),
    }),
    { maxLength: 3 },
  ),
  rotate: fc.nat(),
  /** 4: the first call gets no result in this turn. */
  drop: fc.nat({ max: 4 }),
  /** 3: the turn ends with the result of a call an earlier turn left open (an async tool). */
  late: fc.nat({ max: 3 }),
  repeat: fc.nat({ max: 5 }),
  /** 4: a synthetic "missing tool result" comes first, then the real one (OpenClaw's repair). */
  repair: fc.nat({ max: 4 }),
  /** Results that name their call under another key (toolCallId blank). */
  altKey: opt(fc.constantFrom("toolUseId", "tool_call_id", "call_id", "blank"), 4),
  answer: text,
  usage,
});

/** Entry-level fields OpenClaw does not read (an entry's `excludeFromContext` is not its message's). */
const entryExtras = opt(fc.record({ excludeFromContext: opt(fc.constant(true), 2), __openclaw: opt(fc.record({ runId: nonEmpty }), 2) }), 8);
const op = fc.record({
  entry: fc.oneof({ weight: 5, arbitrary: entry }, { weight: 1, arbitrary: turn }),
  parent: parentMode,
  pick: fc.nat(),
  side: fc.nat({ max: 11 }),
  ts: tsMode,
  extra: entryExtras,
});
export type Op = typeof op extends fc.Arbitrary<infer T> ? T : never;
type RowOp = Op & { entry: Exclude<Op["entry"], { type: "turn" }> };
type MessageSpec = Extract<Op["entry"], { type: "message" }>["message"];
type TurnSpec = Extract<Op["entry"], { type: "turn" }>;

function turnRows(t: TurnSpec): RowOp["entry"][] {
  const message = (m: MessageSpec): RowOp["entry"] => ({
    type: "message",
    message: m,
    extras: { __openclaw: undefined, idempotencyKey: undefined },
    excluded: 0,
    timestamp: undefined,
    untimed: 0,
  });
  const assistant = (blocks: Extract<MessageSpec, { kind: "assistant" }>["blocks"], stopReason: "stop" | "toolUse") =>
    message({
      kind: "assistant",
      blocks,
      legacyText: undefined,
      api: "anthropic-messages",
      provider: "anthropic",
      model: "claude",
      usage: t.usage,
      stopReason,
      responseId: undefined,
      errorMessage: undefined,
      providerReplay: undefined,
      duplicateCall: 1,
    });
  const result = (k: number, pairing: "latest" | "synthetic" | "noId") =>
    message({
      kind: "toolResult",
      pairing,
      pick: k,
      content: [{ type: "text", text: `result ${k}`, textSignature: undefined }],
      details: undefined,
      isError: false,
      altId: t.altKey && t.altKey !== "blank" ? { key: t.altKey, own: true } : undefined,
    });
  const results = t.calls.map((_, k) => k).filter((k) => t.drop !== 4 || k !== 0);
  if (t.repeat === 5 && results.length) results.push(results[0]);
  const order = results.map((_, k) => results[(k + t.rotate) % results.length]);
  return [
    message({ kind: "user", content: t.user, runtimeContextCarrier: undefined }),
    assistant(
      [{ type: "text", text: "On it.", textSignature: undefined }, ...t.calls.map((c) => ({ ...c, thoughtSignature: undefined }))],
      t.calls.length ? "toolUse" : "stop",
    ),
    ...(t.repair === 4 && order.length ? [result(order[0], "synthetic")] : []),
    ...order.map((k) => result(k, t.altKey ? "noId" : "latest")),
    ...(t.late === 3
      ? [
          message({
            kind: "toolResult",
            pairing: "late",
            pick: 0,
            content: [{ type: "text", text: "late result", textSignature: undefined }],
            details: undefined,
            isError: false,
            altId: undefined,
          }),
        ]
      : []),
    ...(t.calls.length ? [assistant([{ type: "text", text: t.answer, textSignature: undefined }], "stop")] : []),
  ];
}

export const sessionFileSpec = fc.record({
  version: fc.constantFrom(3, 4),
  parentSession: opt(nonEmpty),
  ops: fc.array(op, { minLength: 1, maxLength: 40, size: "medium" }),
});
export type SessionFileSpec = typeof sessionFileSpec extends fc.Arbitrary<infer T> ? T : never;

/** The file a spec describes: its rows (header first) and text. */
export function buildSessionFile(spec: SessionFileSpec): { rows: Row[]; text: string } {
  const b = new Builder();
  const header: Row = { type: "session", version: spec.version, id: "sess-1", timestamp: iso(T0, "iso"), cwd: "/home/ana/src/billing-api" };
  if (spec.parentSession) header.parentSession = spec.parentSession;
  spec.ops.forEach((o, i) => b.add(o, i));
  const rows = [header, ...b.rows];
  return { rows, text: `${rows.map((r) => JSON.stringify(r)).join("\n")}\n` };
}

export function serialize(rows: Row[]): string {
  return `${rows.map((r) => JSON.stringify(r)).join("\n")}\n`;
}

function iso(at: number, mode: TsMode): string | undefined {
  const s = new Date(at).toISOString();
  if (mode === "noMs") return s.replace(/\.\d{3}Z$/, "Z");
  if (mode === "offset") return new Date(at + 2 * 3_600_000).toISOString().replace("Z", "+02:00");
  return mode === "absent" ? undefined : s;
}

/** Drops undefined members (JSON.stringify would). */
function clean(o: Row): Row {
  return JSON.parse(JSON.stringify(o)) as Row;
}

class Builder {
  readonly rows: Row[] = [];
  /** Ids OpenClaw indexes as entries (recognised, and not a label of an unknown entry). */
  private readonly indexed: string[] = [];
  /** Ids of rows OpenClaw keeps without indexing them (what a firstKeptEntryId must not name). */
  private readonly unindexed: string[] = [];
  private readonly parents = new Map<string, string | null>();
  /** The tool calls of the latest assistant message that made any, and of all of them. */
  private calls: { id: string; name: string }[] = [];
  private allCalls: { id: string; name: string }[] = [];
  private readonly answered = new Set<string>();

  add(o: Op, i: number): void {
    const at = T0 + (i + 1) * 1_000;
    if (o.entry.type !== "turn") return this.addRow(o as RowOp, `e${i}-${(o.pick % 4096).toString(36)}`, at);
    // A whole turn as OpenClaw's runner writes it: user, assistant with calls, results, answer.
    turnRows(o.entry).forEach((entry, k) => this.addRow({ ...o, entry, ...(k === 0 ? {} : { parent: "tail", side: 0, ts: "iso" }) }, `t${i}-${k}`, at + k));
  }

  private addRow(o: RowOp, id: string, at: number): void {
    const e = o.entry;
    const all = [...this.indexed, ...this.unindexed];
    const pickFrom = (list: string[], n: number) => (list.length ? list[n % list.length] : undefined);
    const tail = this.rows.length ? (this.rows[this.rows.length - 1].id as string) : null;
    let parentId: string | null | undefined = tail;
    if (o.parent === "earlier") parentId = pickFrom(all, o.pick) ?? null;
    else if (o.parent === "null") parentId = null;
    else if (o.parent === "absent") parentId = undefined;
    else if (o.parent === "unknown") parentId = `nowhere-${o.pick % 7}`;
    else if (o.parent === "self") parentId = id;
    // The types whose timestamp becomes a message's must have one OpenClaw can parse.
    const needsTime = e.type === "custom_message" || e.type === "branch_summary" || e.type === "compaction";
    const timestamp = iso(at, needsTime && o.ts === "absent" ? "iso" : o.ts);
    const head: Row = { id, ...(parentId === undefined ? {} : { parentId }), timestamp };
    const side = o.side === 11 ? { appendMode: "side" } : {};
    let row: Row;
    let indexed = true;
    switch (e.type) {
      case "message": {
        const m = this.message(e.message, at, e.untimed === 11 ? null : e.timestamp);
        if (e.excluded === 9) m.excludeFromContext = true;
        row = { type: "message", ...head, ...side, message: { ...clean(e.extras), ...m } };
        break;
      }
      case "custom_message":
        row = { type: "custom_message", customType: e.customType, content: e.content, display: e.display, details: e.details, ...head, ...side };
        break;
      case "branch_summary":
        row = {
          type: "branch_summary",
          ...head,
          ...side,
          fromId: e.fromRoot === 4 ? "root" : (parentId ?? "root"),
          summary: e.summary,
          details: e.details,
          fromHook: e.fromHook,
        };
        break;
      case "compaction":
        row = {
          type: "compaction",
          ...head,
          ...side,
          summary: e.summary,
          firstKeptEntryId: this.kept(e.kept, e.pick, parentId, id) ?? id,
          tokensBefore: e.tokensBefore,
          tokensAfter: e.tokensAfter,
          details: e.details,
          fromHook: e.fromHook,
        };
        break;
      case "reset": {
        const kept = this.kept(e.kept, e.pick, parentId, id);
        row = { type: "reset", ...head, ...side, reason: e.reason, ...(kept ? { firstKeptEntryId: kept } : {}) };
        indexed = coerces(e.reason);
        break;
      }
      case "label": {
        const known = e.known < 3 ? pickFrom(this.indexed, e.pick) : undefined;
        row = { type: "label", ...head, ...side, targetId: known ?? pickFrom(this.unindexed, e.pick) ?? `nowhere-${e.pick % 5}`, label: e.label };
        indexed = known !== undefined;
        break;
      }
      case "session_info":
        row = { type: "session_info", ...head, ...side, name: e.name };
        break;
      case "model_change":
        row = { type: "model_change", provider: e.provider, modelId: e.modelId, ...head, ...side };
        break;
      case "thinking_level_change":
        row = { type: "thinking_level_change", thinkingLevel: e.thinkingLevel, ...head, ...side };
        break;
      case "custom":
        row = { type: "custom", customType: e.customType, data: e.data, ...head, ...side };
        break;
      case "leaf": {
        const ref = (mode: string, n: number) =>
          mode === "known"
            ? (pickFrom(this.indexed, n) ?? null)
            : mode === "opaque"
              ? (pickFrom(this.unindexed, n) ?? null)
              : mode === "null"
                ? null
                : `nowhere-${n % 3}`;
        // OpenClaw writes a leaf row's parentId as the raw tail of the file.
        row = {
          type: "leaf",
          id,
          parentId: tail,
          timestamp: iso(at, "iso"),
          targetId: ref(e.target, e.pick),
          ...(e.append === "absent" ? {} : { appendParentId: ref(e.append, e.pick2) }),
          ...side,
        };
        indexed = false;
        break;
      }
      case "opaque":
        row = this.opaque(e.shape, head, at, e.data);
        indexed = false;
        break;
    }
    row = clean(e.type === "leaf" || !o.extra ? row : { ...row, ...o.extra });
    this.rows.push(row);
    (indexed ? this.indexed : this.unindexed).push(id);
    this.parents.set(id, parentId ?? null);
  }

  /** A firstKeptEntryId: an ancestor (often on the active path), any indexed entry, a missing id, the entry's own id. */
  private kept(mode: KeptMode, n: number, parentId: string | null | undefined, self: string): string | undefined {
    if (mode === "none") return undefined;
    if (mode === "missing") return `gone-${n % 9}`;
    if (mode === "self") return self;
    const indexed = new Set(this.indexed);
    if (mode === "any") return this.indexed.length ? this.indexed[n % this.indexed.length] : self;
    const ancestors: string[] = [];
    const seen = new Set<string>();
    for (let at = parentId ?? null; at && !seen.has(at); at = this.parents.get(at) ?? null) {
      seen.add(at);
      if (indexed.has(at)) ancestors.push(at);
    }
    // Half the time one of the oldest ancestors, so that the kept window holds whole turns.
    const at = n % 2 === 0 ? ancestors.length - 1 - ((n >> 1) % Math.min(3, ancestors.length || 1)) : n % (ancestors.length || 1);
    return ancestors.length ? ancestors[at] : `gone-${n % 9}`;
  }

  /** `timestamp` null: the message has none (OpenClaw does not require one). */
  private message(m: MessageSpec, at: number, timestamp: number | null | undefined): Row {
    const ts = timestamp === null ? undefined : (timestamp ?? at);
    switch (m.kind) {
      case "user":
        return { role: "user", content: m.content, runtimeContextCarrier: m.runtimeContextCarrier, timestamp: ts };
      case "assistant": {
        const calls: { id: string; name: string }[] = [];
        const content = m.blocks.map((b, j) => {
          if (b.type !== "toolCall" && b.type !== "toolUse" && b.type !== "functionCall") return b;
          // Now and then a provider reuses a call id of an earlier turn.
          const reused = m.duplicateCall === 9 && this.allCalls.length ? this.allCalls[j % this.allCalls.length].id : undefined;
          const id = reused ?? `call_${this.allCalls.length + calls.length}_${j}`;
          calls.push({ id, name: b.name });
          // OpenClaw's pairing counts foreign transcripts' toolUse / functionCall blocks as calls too.
          if (b.type !== "toolCall") return { type: b.type, id, name: b.name, input: b.arguments };
          return { type: "toolCall", id, name: b.name, arguments: b.arguments, thoughtSignature: b.thoughtSignature };
        });
        if (calls.length) this.calls = calls;
        this.allCalls.push(...calls);
        return {
          role: "assistant",
          // A legacy file's assistant text is a string; OpenClaw's reader turns it into a block.
          content: m.legacyText !== undefined && calls.length === 0 ? m.legacyText : content,
          api: m.api,
          provider: m.provider,
          model: m.model,
          usage: m.usage,
          stopReason: m.stopReason,
          responseId: m.responseId,
          errorMessage: m.errorMessage,
          providerReplay:
            m.providerReplay && (/compaction/.test(m.providerReplay.type) ? m.legacyText !== undefined && calls.length === 0 : true)
              ? m.providerReplay
              : undefined,
          timestamp: ts,
        };
      }
      case "toolResult": {
        const latest = this.calls.length ? this.calls[m.pick % this.calls.length] : undefined;
        const older = this.allCalls.length ? this.allCalls[m.pick % this.allCalls.length] : undefined;
        // A late result: for a call still unanswered, preferably of an earlier frame.
        const open = this.allCalls.filter((c) => !this.answered.has(c.id));
        const late = open.find((c) => !this.calls.includes(c)) ?? open[m.pick % Math.max(open.length, 1)];
        const call = m.pairing === "older" ? older : m.pairing === "late" ? (late ?? older) : m.pairing === "unknown" ? undefined : (latest ?? older);
        if (call && m.pairing !== "synthetic") this.answered.add(call.id);
        const id = m.pairing === "unknown" ? `call_nobody_${m.pick % 5}` : m.pairing === "padded" && call ? ` ${call.id} ` : (call?.id ?? "call_none");
        const synthetic = m.pairing === "synthetic";
        return {
          role: "toolResult",
          // A result without an id pairs with the only call of its frame (OpenClaw's legacy repair).
          toolCallId: m.pairing === "noId" ? " " : id,
          toolName: call && m.pick % 3 !== 0 ? call.name : "bash",
          // OpenClaw's repair marks a synthetic result by its details, or by its text alone.
          content:
            synthetic && m.pick % 2 === 1 ? MISSING_RESULT : "legacy" in m.content ? m.content.legacy : "single" in m.content ? m.content.single : m.content,
          details: synthetic && m.pick % 2 === 0 ? { openclawSyntheticMissingToolResult: true, reason: "missing_tool_result" } : m.details,
          isError: synthetic ? true : m.isError,
          // Foreign transcripts name the call under other keys; OpenClaw's pairing reads them too.
          ...(m.altId ? { [m.altId.key]: m.altId.own && call ? call.id : `call_other_${m.pick % 3}` } : {}),
          timestamp: ts,
        };
      }
      case "custom":
        return {
          role: "custom",
          ...(m.customType === null ? {} : { customType: m.customType }),
          content: m.content,
          display: m.display,
          details: m.details,
          timestamp: ts,
        };
      case "bashExecution":
        return {
          role: "bashExecution",
          command: m.command,
          output: m.output,
          exitCode: m.exitCode,
          cancelled: m.cancelled,
          truncated: m.truncated,
          fullOutputPath: m.fullOutputPath,
          timestamp: ts,
        };
    }
  }

  /** Rows OpenClaw keeps but does not recognise as entries (they still link by id/parentId). */
  private opaque(shape: string, head: Row, at: number, data: unknown): Row {
    const user = { role: "user", content: "kept, not recognised", timestamp: at };
    switch (shape) {
      case "unknownType":
        return { type: "x-telemetry", ...head, data };
      case "noParent":
        return { type: "x-orphan", id: head.id, timestamp: head.timestamp, data };
      case "noType":
        return { ...head, note: data ?? "no type" };
      case "storedSummary":
        return { type: "message", ...head, message: { role: "compactionSummary", summary: "stored", tokensBefore: 1, timestamp: at } };
      case "numericTimestamp":
        return { type: "message", ...head, timestamp: at, message: user };
      case "emptyProvider":
        return { type: "model_change", provider: "", modelId: "m", ...head };
      case "noDisplay":
        return { type: "custom_message", customType: "x", content: "no display flag", ...head };
      case "badLeaf":
        return { type: "leaf", ...head, parentId: head.parentId ?? null };
      case "badLeafMode":
        return { type: "leaf", ...head, parentId: head.parentId ?? null, targetId: null, appendMode: "main" };
      default:
        return { type: "reset", ...head, reason: "later" };
    }
  }
}
