import fc from "fast-check";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { describe, expect, it } from "vitest";
import { Role, type Message } from "../../../../src/contract/gen/contextd/v1/types.js";
import { imageBlock, summaryMessage } from "../../../../src/contract/messages.js";
import { createExtractiveSummarizer, summarizeExtractive } from "../../../../src/compaction/summarizer/extractive.js";
import type { SummarizeInput } from "../../../../src/compaction/summarizer/summarizer.js";
import { assistant, system, toolCall, toolResult, user } from "../../../fixtures/messages.js";

const summarizer = createExtractiveSummarizer();
const summarize = (input: Partial<SummarizeInput> & { messages: Message[] }): Promise<string> =>
  summarizer.summarize({ previousSummary: "", maxChars: 16_000, ...input });

/** Lines of one section of a summary ("## Heading" up to the next heading). */
function section(summary: string, heading: string): string[] {
  const lines = summary.split("\n");
  const start = lines.indexOf(`## ${heading}`);
  if (start < 0) return [];
  const out: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith("## ")) break;
    if (line.trim()) out.push(line);
  }
  return out;
}

function lastUserText(messages: Message[]): string {
  const last = messages.filter((m) => m.role === Role.ROLE_USER).pop();
  const block = last?.content[0]?.block;
  return block?.$case === "text" ? block.value.text : "";
}

// The facts planted in the first turns; every one must survive every later compaction.
const PLANTED = {
  path: "src/billing/invoice-renderer.ts",
  error: "TypeError: Cannot read properties of undefined (reading 'currency')",
  fn: "renderInvoiceLine()",
  url: "https://tracker.example.com/browse/BILL-4821",
  ticket: "BILL-4821",
  constraint: "Never change the public signature of renderInvoice, other teams call it.",
};

function firstTurns(): Message[] {
  return [
    user(
      `We are fixing ${PLANTED.ticket}: invoices crash when a line item has no price. ` +
        `The renderer lives in ${PLANTED.path} and the report is at ${PLANTED.url}. ${PLANTED.constraint}`,
    ),
    assistant("Let me look at the renderer first.", [toolCall("c1", "read_file", { path: PLANTED.path })]),
    toolResult(
      "c1",
      "read_file",
      "export function renderInvoice(inv: Invoice) {\n  return inv.lines.map(renderInvoiceLine);\n}\n// UNIQUE_BULK_SENTINEL_7781\n",
    ),
    assistant("Running the billing tests.", [toolCall("c2", "bash", { command: "npx vitest run test/billing" })]),
    toolResult(
      "c2",
      "bash",
      ` FAIL test/billing/invoice.test.ts > renders lines without price\n${PLANTED.error}\n    at renderInvoiceLine (${PLANTED.path}:88:31)\n Tests  1 failed | 12 passed`,
      true,
    ),
    assistant(
      `The root cause is that ${PLANTED.fn} reads price.currency without a guard. ` +
        "I'll default a missing price to zero in the caller instead of changing the signature.",
    ),
  ];
}

/** A long stretch of unrelated work: many paths, errors, decisions and tool calls of its own. */
function unrelatedTurns(round: number, turns: number): Message[] {
  const out: Message[] = [];
  for (let i = 0; i < turns; i++) {
    const tag = `r${round}t${i}`;
    const file = `packages/search/src/index-${tag}/query-planner-${tag}.ts`;
    out.push(user(`Next, look at ${file} and the handler in lib/${tag}/router.go; tracked as SRCH-${round * 1000 + i}.`));
    out.push(assistant(`I'll open ${file} and check planQuery_${tag}() before touching the cache layer.`, [toolCall(`x${tag}`, "read_file", { path: file })]));
    out.push(toolResult(`x${tag}`, "read_file", `// ${file}\n${"export const filler = 'lorem ipsum dolor sit amet';\n".repeat(40)}`));
    out.push(assistant("Running its tests.", [toolCall(`y${tag}`, "bash", { command: `go test ./lib/${tag}/...` })]));
    out.push(toolResult(`y${tag}`, "bash", `--- FAIL: TestPlanner_${tag}\nRangeError: index ${i} out of bounds in planner ${tag}\nFAIL lib/${tag}`, true));
  }
  return out;
}

describe("extractive summarizer", () => {
  it("has kind 'extractive'", () => {
    expect(summarizer.kind).toBe("extractive");
  });

  it("keeps planted identifiers, the error and the constraint through one compaction", async () => {
    const out = await summarize({ messages: firstTurns() });
    expect(section(out, "Identifiers")).toEqual(
      expect.arrayContaining([
        `- file: ${PLANTED.path}`,
        `- function: ${PLANTED.fn}`,
        `- url: ${PLANTED.url}`,
        `- ticket: ${PLANTED.ticket}`,
        `- error: ${PLANTED.error}`,
      ]),
    );
    expect(section(out, "Goals and constraints").join("\n")).toContain(PLANTED.constraint);
    expect(section(out, "Errors")).toContain(`- [bash] ${PLANTED.error}`);
    expect(section(out, "Decisions").join("\n")).toContain("I'll default a missing price to zero in the caller");
    // Tool calls are logged by name and path; bulk file content is not copied.
    expect(section(out, "Tool activity")).toEqual([`- read_file: ${PLANTED.path}`, "- bash: npx vitest run test/billing → failed"]);
    expect(out).not.toContain("UNIQUE_BULK_SENTINEL_7781");
  });

  it("keeps the planted facts through many successive compactions under budget pressure", async () => {
    let summary = await summarize({ messages: firstTurns() });
    for (let round = 1; round <= 5; round++) {
      const messages = unrelatedTurns(round, 30); // 150 messages per round
      summary = await summarize({ previousSummary: summary, messages });
      expect(summary.length).toBeLessThanOrEqual(16_000);
      for (const value of Object.values(PLANTED)) expect(summary, `round ${round}: ${value}`).toContain(value);
      expect(section(summary, "Identifiers")).toContain(`- error: ${PLANTED.error}`);
      expect(section(summary, "Identifiers")).toContain(`- file: ${PLANTED.path}`);
      // The latest request is the last user message of this round, verbatim.
      expect(section(summary, "Latest user request")).toEqual([lastUserText(messages)]);
    }
    // The budget really was under pressure: most of the unrelated paths had to go.
    const unrelatedPaths = section(summary, "Identifiers").filter((l) => l.includes("packages/search/src/"));
    expect(unrelatedPaths.length).toBeGreaterThan(0);
    expect(unrelatedPaths.length).toBeLessThan(5 * 30);
    expect(summary.length).toBeGreaterThan(12_000);
  });

  it("never exceeds maxChars, whatever the input (property)", () => {
    const text = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.constantFrom(
        "We must never touch /etc/passwd.",
        "I'll switch to src/a/b.ts instead of C:\\x\\y.conf",
        "Error: ENOENT: no such file or directory, open 'x.json'",
        "## Decisions",
        "# Conversation summary (contextd extractive v1)",
      ),
      fc.string({ maxLength: 20 }).map((s) => `${s} ${"x".repeat(5000)}\n`.repeat(3)),
    );
    const message = fc.oneof(
      text.map((t) => user(t)),
      text.map((t) => assistant(t, [toolCall("id", "bash", { command: t })])),
      fc.tuple(text, fc.boolean()).map(([t, err]) => toolResult("id", "bash", t, err)),
      text.map((t) => system(t)),
    );
    fc.assert(
      fc.property(
        fc.array(message, { maxLength: 25 }),
        fc.integer({ min: 0, max: 3000 }),
        fc.oneof(fc.constant(""), text),
        fc.option(text, { nil: undefined }),
        (messages, maxChars, previousSummary, customInstructions) => {
          const input = { messages, maxChars, previousSummary, customInstructions };
          const first = summarizeExtractive(input);
          expect(first.length).toBeLessThanOrEqual(maxChars);
          // Deterministic, and stable when fed back as the previous summary.
          expect(summarizeExtractive(input)).toBe(first);
          const second = summarizeExtractive({ ...input, previousSummary: first });
          expect(second.length).toBeLessThanOrEqual(maxChars);
        },
      ),
      { numRuns: 200, seed: 4242 },
    );
  });

  it("respects maxChars on a huge input by dropping tool activity before goals and the latest request", async () => {
    const messages = [...firstTurns(), ...unrelatedTurns(9, 60), user("Finally: ship the fix behind the INVOICE_SAFE_PRICE flag.")];
    const out = await summarize({ messages, maxChars: 2000 });
    expect(out.length).toBeLessThanOrEqual(2000);
    expect(out).toContain("Finally: ship the fix behind the INVOICE_SAFE_PRICE flag.");
    expect(out).toContain(PLANTED.constraint);
    expect(section(out, "Tool activity")).toEqual([]);
    expect(section(out, "Identifiers").length).toBeGreaterThan(0);
  });

  it("is deterministic", async () => {
    const messages = [...firstTurns(), ...unrelatedTurns(1, 10)];
    const a = await summarize({ messages, customInstructions: "focus on billing" });
    const b = await summarize({ messages: structuredClone(messages), customInstructions: "focus on billing" });
    expect(a).toBe(b);
  });

  it("keeps the latest user request verbatim, multi-line, and caps a huge one at head and tail", async () => {
    const request = "Please now:\n1. rename `fooBar()` to `fooBaz()`\n2. update docs/api.md\n\n```ts\nconst x = fooBaz(1);\n```";
    const out = await summarize({ messages: [...firstTurns(), user(request)] });
    expect(section(out, "Latest user request").join("\n")).toBe(
      request
        .split("\n")
        .filter((l) => l.trim())
        .join("\n"),
    );
    expect(out).toContain(request);

    const huge = `HEAD_MARK ${"word ".repeat(40_000)} TAIL_MARK`;
    const capped = await summarize({ messages: [user(huge)], maxChars: 8000 });
    expect(capped.length).toBeLessThanOrEqual(8000);
    expect(capped).toContain("HEAD_MARK");
    expect(capped).toContain("TAIL_MARK");
  });

  it("moves the previous latest request to earlier requests when a new one arrives", async () => {
    const first = await summarize({ messages: [user("Add CSV export to the reports page.")] });
    const second = await summarize({ previousSummary: first, messages: [user("Also add PDF export.")] });
    expect(section(second, "Latest user request")).toEqual(["Also add PDF export."]);
    expect(section(second, "Earlier user requests")).toEqual(["- Add CSV export to the reports page."]);
    expect(section(second, "Goals and constraints")).toEqual(["- Task: Add CSV export to the reports page."]);
  });

  it("is a fixed point when re-summarizing its own output with no new messages", async () => {
    const out = await summarize({ messages: [...firstTurns(), ...unrelatedTurns(2, 5)] });
    expect(await summarize({ previousSummary: out, messages: [] })).toBe(out);
  });

  it("keeps a foreign previous summary as 'Earlier summary', truncated, across compactions", async () => {
    const foreign = "The user is migrating the payments service to Postgres 16.\nOpen question: keep the MySQL read replica until Q3?";
    const out = await summarize({ previousSummary: foreign, messages: [user("Continue with the schema diff.")] });
    expect(section(out, "Earlier summary")).toEqual(foreign.split("\n"));
    const again = await summarize({ previousSummary: out, messages: [user("Now the data backfill.")] });
    expect(section(again, "Earlier summary")).toEqual(foreign.split("\n"));

    const hugeForeign = Array.from({ length: 2000 }, (_, i) => `fact ${i}: something the other engine noted`).join("\n");
    const truncated = await summarize({ previousSummary: hugeForeign, messages: [user("go on")], maxChars: 4000 });
    expect(truncated.length).toBeLessThanOrEqual(4000);
    expect(truncated).toContain("fact 0: something the other engine noted");
    expect(truncated).not.toContain("fact 1999");
  });

  it("uses a summary message found among the messages when no previous summary is given", async () => {
    const earlier = await summarize({ messages: firstTurns() });
    const out = await summarize({ messages: [summaryMessage(earlier), user("What is next?")] });
    expect(out).toContain(PLANTED.constraint);
    expect(out).not.toContain("<summary>");
  });

  it("adds a Focus line and lets focus-matching decisions outlive others under a tight budget", async () => {
    const messages: Message[] = [user("Refactor the services.")];
    for (let i = 0; i < 40; i++) messages.push(assistant(`I'll restructure module ${i} of the notification service next.`));
    messages.push(assistant("I'll run the database migration in two phases with a backfill in between."));
    for (let i = 0; i < 40; i++) messages.push(assistant(`I'll tidy the logging in worker ${i} afterwards.`));
    const out = await summarize({ messages, maxChars: 900, customInstructions: "Focus on the database migration" });
    expect(section(out, "Focus")).toEqual(["Focus on the database migration"]);
    expect(out.length).toBeLessThanOrEqual(900);
    expect(section(out, "Decisions")).toContain("- I'll run the database migration in two phases with a backfill in between.");
    const unfocused = await summarize({ messages, maxChars: 900 });
    expect(unfocused).not.toContain("run the database migration in two phases");
  });

  it("under a tight budget keeps firm decisions over plain plans, and drops tool activity first", async () => {
    const messages: Message[] = [user("Speed up the importer.")];
    messages.push(assistant("The root cause is the N+1 query in loadRows(); we chose batching instead of caching."));
    for (let i = 0; i < 40; i++) {
      messages.push(assistant(`I'll look at chunk ${i} of the importer next.`, [toolCall(`t${i}`, "read_file", { path: `src/importer/chunk${i}.ts` })]));
    }
    const out = await summarize({ messages, maxChars: 1200 });
    expect(out.length).toBeLessThanOrEqual(1200);
    expect(section(out, "Decisions")[0]).toBe("- The root cause is the N+1 query in loadRows(); we chose batching instead of caching.");
    expect(section(out, "Decisions").length).toBeLessThan(41);
    expect(section(out, "Tool activity")).toEqual([]);
    expect(section(out, "Identifiers")).toContain("- function: loadRows()");
  });

  it("records error lines exactly, and the first line of a failed tool result without a known pattern", async () => {
    const out = await summarize({
      messages: [
        assistant("", [toolCall("a", "deploy", { target: "staging" }), toolCall("b", "bash", { command: "python manage.py migrate" })]),
        toolResult("a", "deploy", "quota for project acme-prod is exhausted\nretry later", true),
        toolResult(
          "b",
          "bash",
          "Traceback (most recent call last):\n  File \"manage.py\", line 22, in <module>\n    main()\nModuleNotFoundError: No module named 'django_extensions'",
        ),
      ],
    });
    expect(section(out, "Errors")).toEqual([
      "- [deploy] quota for project acme-prod is exhausted",
      "- [bash] Traceback (most recent call last):",
      "- [bash] ModuleNotFoundError: No module named 'django_extensions'",
    ]);
    expect(section(out, "Identifiers")).toContain("- error: ModuleNotFoundError: No module named 'django_extensions'");
    expect(section(out, "Tool activity")).toEqual(["- deploy: staging → failed", "- bash: python manage.py migrate"]);
  });

  it("rejects with an AbortError when the signal is already aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(summarize({ messages: firstTurns(), signal: controller.signal })).rejects.toMatchObject({ name: "AbortError" });
    await expect(summarize({ messages: firstTurns(), signal: controller.signal })).rejects.toBeInstanceOf(Error);
  });

  it("summarizes a 150-message, ~120k-token conversation in well under 100 ms", () => {
    const messages: Message[] = [];
    for (let i = 0; i < 30; i++) {
      messages.push(user(`Step ${i}: update src/mod${i}/index.ts so handler${i} validates input; it must not log secrets (OPS-${100 + i}).`));
      messages.push(
        assistant(`I'll read src/mod${i}/index.ts and switch to zod instead of manual checks.`, [
          toolCall(`r${i}`, "read_file", { path: `src/mod${i}/index.ts` }),
        ]),
      );
      const body = Array.from({ length: 190 }, (_, j) => `  const v${j} = compute${j % 7}(input.field${j}, opts); // see src/mod${i}/util${j % 5}.ts`).join(
        "\n",
      );
      messages.push(toolResult(`r${i}`, "read_file", `export function handler${i}(input: Input) {\n${body}\n}`));
      messages.push(assistant("Running the tests.", [toolCall(`b${i}`, "bash", { command: `npx vitest run test/mod${i}.test.ts` })]));
      messages.push(toolResult(`b${i}`, "bash", ` FAIL test/mod${i}.test.ts > validates\nAssertionError: expected 'a' to be 'b'\n Tests 1 failed | 9 passed`));
    }
    const tokens = messages.reduce((n, m) => n + m.content.reduce((k, b) => k + (b.block?.$case === "text" ? countTokens(b.block.value.text) : 0), 0), 0);
    expect(messages).toHaveLength(150);
    expect(tokens).toBeGreaterThan(120_000);
    summarizeExtractive({ previousSummary: "", messages: messages.slice(0, 10), maxChars: 16_000 }); // warm up
    let best = Number.POSITIVE_INFINITY;
    for (let run = 0; run < 3; run++) {
      const t0 = performance.now();
      const out = summarizeExtractive({ previousSummary: "", messages, maxChars: 16_000 });
      best = Math.min(best, performance.now() - t0);
      expect(out.length).toBeLessThanOrEqual(16_000);
    }
    expect(best).toBeLessThan(100);
  });

  it("ignores images and system messages but keeps user text", async () => {
    const withImage: Message = { ...user("Make the logo 48 px and never stretch it."), role: Role.ROLE_USER };
    withImage.content.push(imageBlock("image/png", Buffer.from([1, 2, 3])));
    const out = await summarize({ messages: [system("SYSTEM_PROMPT_SENTINEL you are helpful"), withImage] });
    expect(out).not.toContain("SYSTEM_PROMPT_SENTINEL");
    expect(section(out, "Latest user request")).toEqual(["Make the logo 48 px and never stretch it."]);
    expect(section(out, "Identifiers")).toContain("- number: 48 px");
  });
  describe("Facts section (conversational content)", () => {
    const chat = (date: string, offset: number): Message[] => [
      user(`[1:56 pm on ${date}] Caroline: I went to a LGBTQ support group yesterday and it was so powerful.`),
      assistant(`[1:56 pm on ${date}] Melanie: Wow, that's cool, Caroline! We went camping at Yosemite last week with the kids.`),
      user(`[1:56 pm on ${date}] Caroline: My friend Sarah moved to Sweden ${offset} years ago.`),
      assistant(`[1:56 pm on ${date}] Melanie: That sounds nice. How are you feeling?`),
    ];

    it("keeps dates, proper nouns and numbers verbatim with the session date, resolving relative times", async () => {
      const out = await summarize({ messages: chat("8 May, 2023", 4) });
      const facts = section(out, "Facts");
      // Grouped by the session date, each fact with its speaker.
      expect(facts).toEqual([
        "On 8 May 2023:",
        "- Caroline: I went to a LGBTQ support group yesterday (7 May 2023) and it was so powerful.",
        "- Melanie: We went camping at Yosemite last week (the week before 8 May 2023) with the kids.",
        "- Caroline: My friend Sarah moved to Sweden 4 years ago (2019).",
      ]);
      // Addressing a speaker by name, or asking a question, is not a fact.
      expect(facts.join("\n")).not.toContain("that's cool, Caroline");
      expect(facts.join("\n")).not.toContain("How are you feeling");
    });

    it("merges facts across two compactions, the first session's kept", async () => {
      const first = await summarize({ messages: chat("8 May, 2023", 4) });
      const second = await summarize({ previousSummary: first, messages: chat("25 May, 2023", 5) });
      const facts = section(second, "Facts").join("\n");
      expect(facts).toContain("On 8 May 2023:\n- Caroline: I went to a LGBTQ support group yesterday (7 May 2023)");
      expect(facts).toContain("On 25 May 2023:\n- Caroline: I went to a LGBTQ support group yesterday (24 May 2023)");
      expect(facts).toContain("Sweden 5 years ago");
      // A fact already present is not repeated.
      const again = await summarize({ previousSummary: second, messages: chat("25 May, 2023", 5) });
      expect(section(again, "Facts")).toEqual(section(second, "Facts"));
    });

    it("respects maxChars and keeps the first sessions' facts under pressure", async () => {
      let summary = "";
      for (let s = 0; s < 30; s++) {
        const date = `${(s % 28) + 1} June, 2023`;
        const messages = Array.from({ length: 20 }, (_, i) =>
          (i % 2 ? assistant : user)(
            `[10:00 am on ${date}] ${i % 2 ? "Melanie" : "Caroline"}: Session ${s} turn ${i}: we visited Lisbon and Porto with Anna on Friday.`,
          ),
        );
        summary = await summarize({ previousSummary: summary, messages, maxChars: 6000 });
        expect(summary.length).toBeLessThanOrEqual(6000);
      }
      const facts = section(summary, "Facts").join("\n");
      expect(facts).toContain("Session 0 turn 0:");
      expect(facts).toContain("Session 29 turn");
      for (const cap of [0, 50, 500, 2000]) {
        expect((await summarize({ previousSummary: summary, messages: chat("8 May, 2023", 4), maxChars: cap })).length).toBeLessThanOrEqual(cap);
      }
    });

    it("in a coding session holds facts to a small share and leaves the other sections alone", async () => {
      const out = await summarize({ messages: firstTurns(), maxChars: 16_000 });
      expect(section(out, "Facts").join("\n").length).toBeLessThanOrEqual(16_000 * 0.08);
    });
  });
});
