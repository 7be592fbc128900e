/**
 * Deterministic, realistic coding-agent messages for the benchmarks (the test fixtures are not
 * importable from bench/): a user request, the assistant's reasoning with a tool call, the tool's
 * result (source code, test logs, grep hits), and a wrap-up — with identifiers, paths, numbers and
 * prose, so that the tokenizer and the extractive summarizer see the text they see in production.
 *
 *   const msgs = codingMessages({ count: 20, seed: 1 });             // mixed sizes, up to ~1.5k tokens
 *   const small = codingMessages({ count: 1000, seed: 2, size: "small" }); // tool results ~50–300 tokens
 */
import { Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { textBlock, textMessage, toolCallBlock } from "../../src/contract/messages.js";

export type Size = "small" | "normal";

export interface MessageOptions {
  count: number;
  seed?: number;
  /** "normal" (default): tool results of ~100–1500 tokens; "small": ~50–300. */
  size?: Size;
  /** First timestamp (ms); each message is 20 s after the previous one. */
  startMs?: number;
}

/** mulberry32: a small seeded PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  "the a of to and in is that for it with as was on be by this are or from at which but not have an " +
  "they you one all were we when there can more if out so what up about into than them only other new " +
  "function module request response handler session ledger invoice payment retry timeout cache queue " +
  "error failure test config value result record entry batch index schema migration deadline budget " +
  "token context summary compaction engine registry sidecar channel stream buffer parser encoder " +
  "check update return because should would could after before while still again instead already"
).split(" ");
const NOUNS = ["invoice", "ledger", "session", "account", "payment", "order", "report", "user", "token", "refund", "webhook", "cursor"];
const VERBS = ["reconcile", "validate", "load", "parse", "apply", "compute", "merge", "fetch", "render", "sync", "flush", "resolve"];
const DIRS = ["src/billing", "src/api", "src/core", "src/workers", "lib/util", "src/store", "test/integration", "src/payments"];
const ERRORS = [
  "TypeError: Cannot read properties of undefined (reading '%s')",
  "AssertionError: expected %d to equal %d",
  "Error: connect ECONNREFUSED 127.0.0.1:%d",
  "RangeError: Maximum call stack size exceeded in %s",
  "SyntaxError: Unexpected token '}' in %s at line %d",
];

type Rand = () => number;
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rand, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo + 1));
const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

const SYLLABLES = "ka lo mi ne ru sa te vo zu bra cle dri fen gor hal jin kur lem mor nax pel quo rin sel tov ul vex wy zor".split(" ");

/** A made-up word: real text is full of rare words and names the tokenizer's caches have not seen. */
function rareWord(r: Rand): string {
  let w = "";
  for (let i = int(r, 2, 4); i > 0; i--) w += pick(r, SYLLABLES);
  return w;
}

function camel(r: Rand): string {
  if (r() < 0.15) return pick(r, VERBS) + cap(rareWord(r));
  return pick(r, VERBS) + cap(pick(r, NOUNS)) + (r() < 0.5 ? cap(pick(r, NOUNS)) : "");
}
function filePath(r: Rand): string {
  const base = r() < 0.3 ? rareWord(r) : pick(r, NOUNS);
  return `${pick(r, DIRS)}/${base}_${pick(r, VERBS)}${r() < 0.3 ? ".test" : ""}.ts`;
}
function sentence(r: Rand, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    const x = r();
    out.push(
      x < 0.08
        ? camel(r)
        : x < 0.11
          ? String(int(r, 2, 99999))
          : x < 0.13
            ? filePath(r)
            : x < 0.17
              ? rareWord(r)
              : x < 0.175
                ? Math.floor(r() * 2 ** 48).toString(16)
                : pick(r, WORDS),
    );
  }
  return cap(out.join(" ")) + ".";
}
function prose(r: Rand, sentences: number): string {
  return Array.from({ length: sentences }, () => sentence(r, int(r, 6, 22))).join(" ");
}
function errorLine(r: Rand): string {
  let e = pick(r, ERRORS);
  e = e.replace("%s", r() < 0.5 ? camel(r) : filePath(r));
  while (e.includes("%d")) e = e.replace("%d", String(int(r, 1, 65000)));
  return e;
}

/** Pseudo-TypeScript of about `lines` lines. */
function code(r: Rand, lines: number): string {
  const out: string[] = [`import { ${camel(r)}, ${camel(r)} } from "../${pick(r, NOUNS)}/${pick(r, VERBS)}.js";`, ""];
  while (out.length < lines) {
    const fn = camel(r);
    out.push(`export async function ${fn}(${pick(r, NOUNS)}Id: string, opts: { limit?: number } = {}): Promise<${cap(pick(r, NOUNS))}[]> {`);
    for (let i = int(r, 3, 9); i > 0; i--) {
      const x = r();
      if (x < 0.3) out.push(`  const ${pick(r, NOUNS)}s = await ${camel(r)}(${pick(r, NOUNS)}Id, { limit: opts.limit ?? ${int(r, 10, 500)} });`);
      else if (x < 0.5) out.push(`  if (!${pick(r, NOUNS)}) throw new Error("${sentence(r, int(r, 3, 8)).slice(0, -1)}");`);
      else if (x < 0.7) out.push(`  // ${sentence(r, int(r, 5, 14))}`);
      else out.push(`  for (const ${pick(r, NOUNS)} of ${pick(r, NOUNS)}s) total += ${pick(r, NOUNS)}.amountCents * ${int(r, 1, 100)};`);
    }
    out.push("  return result;", "}", "");
  }
  return out.join("\n");
}

/** A test-runner log of about `lines` lines. */
function testLog(r: Rand, lines: number): string {
  const out = [`> vitest run ${filePath(r)}`, ""];
  while (out.length < lines) {
    const ok = r() > 0.15;
    out.push(` ${ok ? "✓" : "×"} ${filePath(r)} > ${camel(r)} ${ok ? "" : "FAILED "}(${int(r, 1, 900)} ms)`);
    if (!ok) out.push(`   ${errorLine(r)}`, `    at ${camel(r)} (${filePath(r)}:${int(r, 1, 400)}:${int(r, 1, 80)})`);
  }
  out.push("", ` Tests  ${int(r, 1, 9)} failed | ${int(r, 20, 300)} passed`);
  return out.join("\n");
}

function grepHits(r: Rand, lines: number): string {
  return Array.from(
    { length: lines },
    () => `${filePath(r)}:${int(r, 1, 800)}:  ${r() < 0.5 ? `const x = ${camel(r)}(id);` : `// ${sentence(r, int(r, 4, 10))}`}`,
  ).join("\n");
}

const TOOLS = ["read_file", "run_tests", "grep", "bash"] as const;

function message(role: Role, text: string, ts: number, extra: Partial<Message> = {}): Message {
  return textMessage(role, text, { timestampMs: ts, ...extra });
}

/**
 * `count` messages of a coding session, in turns: user request → (assistant with a tool call →
 * tool result) × 1–3 → assistant wrap-up. A tool call and its result are always adjacent.
 */
export function codingMessages(opts: MessageOptions): Message[] {
  const r = prng(opts.seed ?? 1);
  const small = opts.size === "small";
  let ts = opts.startMs ?? Date.UTC(2025, 2, 3, 9, 0, 0);
  const out: Message[] = [];
  let call = 0;
  const push = (m: Message) => {
    out.push(m);
    ts += 20_000;
  };
  while (out.length < opts.count) {
    push(message(Role.ROLE_USER, `${prose(r, int(r, 1, 3))} The failing one is ${filePath(r)} (${errorLine(r)}). Ticket PAY-${int(r, 1000, 9999)}.`, ts));
    for (let steps = int(r, 1, 3); steps > 0 && out.length < opts.count; steps--) {
      const tool = pick(r, TOOLS);
      const id = `call_${opts.seed ?? 1}_${call++}`;
      const args = JSON.stringify(
        tool === "read_file" ? { path: filePath(r) } : tool === "grep" ? { pattern: camel(r) } : { command: `npm test -- ${filePath(r)}` },
      );
      push({
        ...message(Role.ROLE_ASSISTANT, prose(r, int(r, 1, 4)), ts),
        content: [textBlock(prose(r, int(r, 1, 4))), toolCallBlock(id, tool, args)],
      });
      if (out.length >= opts.count) break;
      const lines = small ? int(r, 4, 25) : int(r, 10, 120);
      const text = tool === "read_file" ? code(r, lines) : tool === "grep" ? grepHits(r, lines) : testLog(r, lines);
      push(message(Role.ROLE_TOOL_RESULT, text, ts, { toolCallId: id, toolName: tool, isError: text.includes("FAILED") && r() < 0.5 }));
    }
    if (out.length < opts.count) push(message(Role.ROLE_ASSISTANT, prose(r, int(r, 2, small ? 4 : 8)), ts));
  }
  return out;
}

/** Messages of `codingMessages` cut into consecutive chunks of `size` (for appends in batches). */
export function chunks<T>(xs: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += size) out.push(xs.slice(i, i + size));
  return out;
}
