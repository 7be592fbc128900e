/**
 * OpenClaw session files, with the real OpenClaw as the oracle: the published `openclaw` package
 * (pinned, under Node 24) reads every file with its own public SDK (`parseSessionEntries`,
 * `migrateSessionEntries`, `SessionManager.fromEntries(...).buildSessionContext()`, in
 * scripts/session-oracle.mjs) in one long-lived process, and a real contextd imports the same file.
 *
 * 1. Property: for random session files (scripts/session-files.ts) OpenClaw loads, the messages
 *    contextd assembles, mapped back with `fromContextdMessage`, deep-equal the messages OpenClaw
 *    builds, in order; contextd recognises exactly the rows OpenClaw recognises; the leaf agrees;
 *    and ExportTranscript gives back every line deep-equal. FC_SEED replays a run, FC_RUNS sizes it.
 * 2. What contextd refuses by design (an entry without an id, an id used twice, an empty user
 *    message, a child before its parent on the active branch) OpenClaw loads, and contextd answers
 *    INVALID_ARGUMENT naming the line.
 * 3. A session begun in contextd exports a file OpenClaw loads with every entry recognised, whose
 *    context is contextd's view.
 *
 * EXCLUDED from generation (the generator's header says how): a compaction's or reset's
 * `firstKeptEntryId` that names a row OpenClaw does not index — OpenClaw repairs it to a
 * neighbouring entry (`resolveOpaqueSessionFirstKeptEntryId`), which contextd deliberately does not
 * port (src/openclaw/session-tree.ts); a compaction-type `providerReplay` on an assistant message
 * kept before a boundary — OpenClaw drops it from the context only (`stripCompactionReplayCheckpoint`),
 * which needs the import to map an entry by its place in the view (src/host/import-transcript.ts);
 * a `tokensBefore` that is not a uint32 — contextd's summary message carries the proto's uint32;
 * and contextd's other validation refusals (a tool call or result without an id, a custom message
 * with an empty type or content, lines that are not JSON objects, a second header, ids over 256
 * characters), which OpenClaw loads.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import readline from "node:readline";
import type { Readable } from "node:stream";
import { status } from "@grpc/grpc-js";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role, type Message } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage, thinkingBlock, toolCallBlock, textBlock } from "../../src/contract/messages.js";
import { fromContextdMessage } from "../../src/openclaw/agent-message.js";
import type { JsonObject } from "../../src/openclaw/json.js";
import { isRecognizedEntry } from "../../src/openclaw/session-file.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { OpenClawHome } from "./helpers/openclaw-home.js";
import { ensureOpenClaw, type OpenClawInstall } from "./helpers/openclaw-install.js";
import { buildSessionFile, serialize, sessionFileSpec, type Row } from "./scripts/session-files.js";
import { refusal } from "../helpers/registry-client.js";

const seed = process.env.FC_SEED ? Number(process.env.FC_SEED) : Math.floor(Math.random() * 2 ** 31);
const numRuns = Number(process.env.FC_RUNS ?? 500);
const HUGE_BUDGET = 2_000_000_000;

interface OracleAnswer {
  ok: boolean;
  error?: string;
  messages: unknown[];
  branch: string[];
  leafId: string | null;
  entries: string[];
  opaque: (string | null)[];
  persisted: number;
}

/** OpenClaw's reader, one Node 24 process for the whole file; answers come on fd 3, in order. */
class Oracle {
  private readonly waiting = new Map<number, (a: OracleAnswer) => void>();
  private next = 0;
  private stderr = "";
  private exited: Error | undefined;
  readonly ready: Promise<{ version: string; node: string }>;

  private constructor(private readonly child: ChildProcess) {
    child.stderr!.setEncoding("utf8").on("data", (c: string) => (this.stderr = (this.stderr + c).slice(-20_000)));
    let onReady!: (v: { version: string; node: string }) => void;
    let onFail!: (e: Error) => void;
    this.ready = new Promise((resolve, reject) => ((onReady = resolve), (onFail = reject)));
    const lines = readline.createInterface({ input: child.stdio[3] as Readable, crlfDelay: Infinity });
    lines.on("line", (line) => {
      const a = JSON.parse(line) as OracleAnswer & { id?: number; ready?: boolean; version: string; node: string };
      if (a.ready) return onReady(a);
      this.waiting.get(a.id!)?.(a);
      this.waiting.delete(a.id!);
    });
    child.once("exit", (code, signal) => {
      const err = new Error(`OpenClaw's session reader exited (code ${code}, signal ${signal}): ${this.stderr}`);
      this.exited = err;
      onFail(err);
      for (const resolve of this.waiting.values()) resolve({ ok: false, error: err.message } as OracleAnswer);
      this.waiting.clear();
    });
  }

  static start(install: OpenClawInstall, env: NodeJS.ProcessEnv): Oracle {
    const script = path.join(import.meta.dirname, "scripts/session-oracle.mjs");
    return new Oracle(spawn(install.node, [script, install.packageDir], { env, stdio: ["pipe", "ignore", "pipe", "pipe"] }));
  }

  load(jsonl: string): Promise<OracleAnswer> {
    const id = this.next++;
    if (this.exited) return Promise.resolve({ ok: false, error: this.exited.message } as OracleAnswer);
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      // Node 24's readline also ends lines at U+2028/U+2029, which JSON.stringify leaves raw.
      this.child.stdin!.write(
        `${JSON.stringify({ id, jsonl })
          .replace(/\u2028/g, "\\u2028")
          .replace(/\u2029/g, "\\u2029")}\n`,
      );
    });
  }

  stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.child.stdin!.end();
    return exited;
  }
}

const lines = (text: string) =>
  text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Row);
const asJson = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown;

describe("OpenClaw 2026.9.6 session files: contextd shows the model what OpenClaw builds, and exports what it imported", () => {
  let install: OpenClawInstall;
  let home: OpenClawHome;
  let oracle: Oracle;
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  let sessions = 0;

  beforeAll(async () => {
    // No skip: without OpenClaw there is no oracle, and the test must say so by failing.
    install = await ensureOpenClaw();
    // Only for its clean environment (OpenClaw changes behaviour under VITEST / NODE_ENV=test).
    home = new OpenClawHome(install, { modelBaseUrl: "http://127.0.0.1:9/v1" });
    oracle = Oracle.start(install, home.env());
    contextd = await startContextd({ config: { compaction: { keep_recent_tokens: 200 } } });
    cx = new ContextdClient({ address: contextd.address });
    await oracle.ready;
  }, 900_000);
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
    await oracle?.stop();
    home?.cleanup();
  });

  /** Imports `text` into a new session; answers what contextd shows and exports. */
  async function throughContextd(text: string) {
    const session = { sessionId: `conformance-${++sessions}` };
    const imported = await cx.importTranscript({ session, jsonl: Buffer.from(text) });
    const assembled = await cx.assemble({ session, tokenBudget: HUGE_BUDGET });
    const exported = await cx.exportTranscript({ session });
    return { imported, messages: assembled.messages.map((m) => asJson(fromContextdMessage(m))), exported: lines(Buffer.from(exported.jsonl).toString("utf8")) };
  }

  it(`property: random session files → contextd's context deep-equals OpenClaw's, and export gives back every line (seed ${seed}, ${numRuns} files)`, async () => {
    const stats: Record<string, number> = {};
    await fc.assert(
      fc.asyncProperty(sessionFileSpec, async (spec) => {
        const { rows, text } = buildSessionFile(spec);
        const oc = await oracle.load(text);
        // The generator only writes files OpenClaw loads; anything else is a generator bug.
        if (!oc.ok) throw new Error(`OpenClaw cannot load the generated file: ${oc.error}\n${text}`);
        const lineOf = new Map(rows.slice(1).map((r, i) => [r.id as string, i + 2]));
        const branchLines = oc.branch.map((id) => lineOf.get(id) ?? 0);
        // Files that fall under contextd's refusals are not generated (the refusal tests cover them).
        expect(branchLines, "a child before its parent on the active branch").toEqual([...branchLines].sort((a, b) => a - b));

        const got = await throughContextd(text);
        const why = `\nfile:\n${text}`;
        const opaque = new Set(oc.opaque);
        expect(
          rows
            .slice(1)
            .filter((r) => isRecognizedEntry(r as JsonObject) === opaque.has(r.id as string))
            .map((r) => r.id),
          `rows contextd and OpenClaw classify differently${why}`,
        ).toEqual([]);
        expect(got.messages, `context${why}`).toEqual(oc.messages);
        expect(got.imported.leafEntryId, `leaf${why}`).toBe(oc.leafId ?? "");
        expect(got.imported.activeMessages).toBe(oc.messages.length);
        expect(got.exported, `export${why}`).toEqual(rows);

        tally(stats, rows, oc);
      }),
      { seed, numRuns, endOnFailure: false },
    );
    console.log(`session conformance (seed ${seed}): ${JSON.stringify(stats, null, 1)}`);
  });

  describe("contextd's documented refusals: OpenClaw loads these files; contextd answers INVALID_ARGUMENT naming the line", () => {
    const t = (n: number) => new Date(Date.UTC(2026, 8, 8, 9, 0, n)).toISOString();
    const header = { type: "session", version: 4, id: "refused", timestamp: t(0), cwd: "/w" };
    const user = (id: string, parentId: string | null, content: unknown, extra: Row = {}) => ({
      type: "message",
      id,
      parentId,
      timestamp: t(1),
      ...extra,
      message: { role: "user", content, timestamp: 1_780_000_000_000 },
    });
    const cases: [string, Row[], number, string][] = [
      [
        "an entry without an id",
        [header, user("a", null, "hi"), { type: "message", parentId: "a", timestamp: t(2), message: { role: "user", content: "no id", timestamp: 1 } }],
        3,
        'needs a non-empty string "id"',
      ],
      [
        "an unrecognised row without an id",
        [header, user("a", null, "hi"), { type: "x-note", parentId: "a" }, user("b", "a", "more")],
        3,
        'needs a non-empty string "id"',
      ],
      ["an id used twice", [header, user("a", null, "hi"), user("b", "a", "one"), user("b", "a", "two")], 4, 'entry id "b" is used on line 3 too'],
      ["an empty user message", [header, user("a", null, "hi"), user("b", "a", [])], 3, "message.content is empty"],
      // b's parent c comes later; c does not move the leaf (side), so the active branch is b → c → a.
      [
        "a child before its parent on the active branch",
        [header, user("a", null, "hi"), user("b", "c", "child"), user("c", "a", "parent", { appendMode: "side" })],
        3,
        'entry "b" comes before its parent',
      ],
    ];
    for (const [what, rows, line, reason] of cases) {
      it(what, async () => {
        const text = serialize(rows);
        const oc = await oracle.load(text);
        expect(oc.error).toBeUndefined();
        expect(oc.ok).toBe(true);
        if (what.includes("before its parent")) expect(oc.branch).toEqual(["a", "c", "b"]);
        const err = await refusal(cx.importTranscript({ session: { sessionId: `refused-${++sessions}` }, jsonl: Buffer.from(text) }));
        expect(err.code).toBe(status.INVALID_ARGUMENT);
        expect(err.details).toContain(`jsonl line ${line}: `);
        expect(err.details).toContain(reason);
      });
    }

    it("the same refusals for rows added to random files OpenClaw loads", async () => {
      const mutation = fc.constantFrom("noId", "duplicate", "emptyUser", "childFirst");
      await fc.assert(
        fc.asyncProperty(sessionFileSpec, mutation, fc.nat(), async (spec, kind, n) => {
          const rows = buildSessionFile(spec).rows;
          const tail = rows[rows.length - 1].id as string;
          const twin = rows[1 + (n % (rows.length - 1))].id as string;
          const [bad, reason]: [Row[], string] =
            kind === "noId"
              ? [[{ type: "custom", customType: "no-id", parentId: tail, timestamp: t(1) }], 'needs a non-empty string "id"']
              : kind === "duplicate"
                ? [[{ type: "custom", customType: "again", id: twin, parentId: tail, timestamp: t(1) }], `entry id "${twin}" is used on line`]
                : kind === "emptyUser"
                  ? [[user("empty", tail, [])], "message.content is empty"]
                  : [
                      [user("child", "late-parent", "child"), user("late-parent", tail, "parent", { appendMode: "side" })],
                      'entry "child" comes before its parent',
                    ];
          const text = serialize([...rows, ...bad]);
          const oc = await oracle.load(text);
          expect(oc.ok, oc.error).toBe(true);
          // After a reset OpenClaw re-parents the child onto the leaf: then nothing comes before its parent.
          if (kind === "childFirst" && !oc.branch.includes("late-parent")) return;
          const err = await refusal(cx.importTranscript({ session: { sessionId: `refused-${++sessions}` }, jsonl: Buffer.from(text) }));
          expect(err.code).toBe(status.INVALID_ARGUMENT);
          expect(err.details).toContain(`jsonl line ${rows.length + 1}: `);
          expect(err.details).toContain(reason);
        }),
        { seed, numRuns: 60 },
      );
    });
  });

  it("a session begun in contextd exports a file OpenClaw loads whole, whose context is contextd's view", async () => {
    const session = { sessionId: "native-conformance" };
    const long = (n: number, what: string) => `${what} ${n}: ` + "the invoice total is off by one cent when VAT is rounded per line; ".repeat(6);
    const turn = (n: number): Message[] => [
      textMessage(Role.ROLE_USER, long(n, "Please check")),
      {
        ...textMessage(Role.ROLE_ASSISTANT, long(n, "Looking")),
        content: [
          thinkingBlock(`plan ${n}`, `sig-${n}`),
          textBlock(long(n, "Looking")),
          toolCallBlock(`call_${n}`, "bash", JSON.stringify({ command: `grep -n total src/invoice${n}.ts` })),
        ],
      },
      textMessage(Role.ROLE_TOOL_RESULT, long(n, "src/invoice.ts:12"), { toolCallId: `call_${n}`, toolName: "bash" }),
      textMessage(Role.ROLE_ASSISTANT, long(n, "Fixed")),
    ];
    await cx.appendMessages({ session, messages: [textMessage(Role.ROLE_SYSTEM, "You are a careful billing engineer."), ...turn(1), ...turn(2), ...turn(3)] });
    const compacted = await cx.compact({ session, tokenBudget: 4_000, force: true });
    expect(compacted.compacted).toBe(true);
    await cx.appendMessages({ session, messages: [...turn(4), textMessage(Role.ROLE_SYSTEM, "Answer in English.")] });

    const text = Buffer.from((await cx.exportTranscript({ session })).jsonl).toString("utf8");
    const rows = lines(text);
    const oc = await oracle.load(text);
    expect(oc.ok, oc.error).toBe(true);
    // Every entry recognised and indexed; OpenClaw's own leaf is the file's last entry (it would add no leaf row).
    expect(oc.opaque).toEqual([]);
    expect(oc.entries).toEqual(rows.slice(1).map((r) => r.id));
    expect(oc.persisted).toBe(rows.length);
    expect(oc.leafId).toBe(rows.at(-1)!.id);

    const contextdView = (await cx.assemble({ session, tokenBudget: HUGE_BUDGET })).messages.map((m) => asJson(fromContextdMessage(m)) as Row);
    // contextd pins the system message from before the cut at the head of its view
    // (docs/pinned-messages.md); OpenClaw has no system role — the file carries it as a
    // `contextd.system` custom message — and, as its own compaction rules say, leaves out what
    // precedes the kept entries. Past that pinned head, the two contexts are the same.
    expect(contextdView[0]).toMatchObject({ role: "custom", customType: "contextd.system" });
    expect(textOf(contextdView[0])).toBe("You are a careful billing engineer.");
    const view = contextdView.slice(1);
    const shape = (m: Row) => ({ role: m.role, customType: m.customType, text: textOf(m) });
    expect((oc.messages as Row[]).map(shape)).toEqual(view.map(shape));
    expect(view[0]).toMatchObject({ role: "compactionSummary", summary: compacted.result!.summary });
    expect(view.filter((m) => m.role === "custom").map((m) => m.customType)).toContain("contextd.system");
    // Beyond roles and texts, the whole messages agree.
    expect(oc.messages).toEqual(view);
  });
});

/** What the generated files exercised, counted by file (messages: in all contexts), for the log. */
function tally(stats: Record<string, number>, rows: Row[], oc: OracleAnswer): void {
  const add = (key: string, n = 1) => (stats[key] = (stats[key] ?? 0) + n);
  const onBranch = rows.filter((r) => oc.branch.includes(r.id as string));
  const at = (id: unknown) => oc.branch.indexOf(id as string);
  const boundaries = onBranch.filter((r) => r.type === "compaction" || r.type === "reset");
  const last = boundaries.at(-1);
  const roles = (oc.messages as Row[]).map((m) => m.role as string);
  add("files");
  add("messages", roles.length);
  for (const role of new Set(roles)) add(`context with ${role}`);
  if (oc.entries.length > oc.branch.length) add("abandoned branches");
  if (boundaries.length > 1) add("several boundaries on the path");
  if (last?.type === "compaction")
    add(at(last.firstKeptEntryId) >= 0 && at(last.firstKeptEntryId) < at(last.id) ? "compaction keeping entries" : "compaction keeping nothing");
  if (last?.type === "reset")
    add(at(last.firstKeptEntryId) >= 0 && at(last.firstKeptEntryId) < at(last.id) ? "reset keeping entries" : "reset keeping nothing");
  if (rows.some((r) => r.type === "leaf" && oc.branch.includes(r.targetId as string))) add("a leaf row moving the leaf");
  if (oc.leafId === null) add("no leaf");
  if (onBranch.some((r) => r.appendMode === "side")) add("side rows on the path");
  if (onBranch.some((r) => !Object.hasOwn(r, "parentId"))) add("entries without parentId on the path");
  if (onBranch.some((r) => (r.message as Row | undefined)?.excludeFromContext === true)) add("excluded messages on the path");
  add("unrecognised rows", oc.opaque.length);
}

/** The text an OpenClaw message carries: its string content or text-like blocks, or its summary. */
function textOf(m: Row): string {
  if (typeof m.summary === "string") return m.summary;
  if (typeof m.content === "string") return m.content;
  if (!Array.isArray(m.content)) return "";
  return (m.content as Row[])
    .map((b) =>
      b.type === "text" ? b.text : b.type === "thinking" ? b.thinking : b.type === "toolCall" ? `${String(b.name)}(${JSON.stringify(b.arguments)})` : "",
    )
    .join("\n");
}
