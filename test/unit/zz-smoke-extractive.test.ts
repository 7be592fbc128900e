import { test } from "vitest";
import { createExtractiveSummarizer } from "../../src/legacy/summarizer/extractive.js";
import { user, assistant, toolCall, toolResult } from "../fixtures/messages.js";
function code(i: number, lines: number): string {
  const out: string[] = [];
  for (let j = 0; j < lines; j++) out.push(`  const value${j} = computeThing${j % 7}(input.field${j}, options); // see src/mod${i}/util${j % 5}.ts`);
  out.push("  if (!ok) throw new Error('bad input');", "} catch (error) {", "  logger.error('failed', error);");
  return `export function handler${i}(input: Input) {\n${out.join("\n")}\n}`;
}
test("smoke", async () => {
  const s = createExtractiveSummarizer();
  const msgs = [];
  for (let i = 0; i < 30; i++) {
    msgs.push(user(`Step ${i}: please update src/mod${i}/index.ts so that handler${i} validates input. It must not log secrets. Ticket OPS-${100 + i}.`));
    msgs.push(assistant(`I'll read src/mod${i}/index.ts first and then switch to the zod schema instead of manual checks.`, [toolCall(`r${i}`, "read_file", { path: `src/mod${i}/index.ts` })]));
    msgs.push(toolResult(`r${i}`, "read_file", code(i, 380)));
    msgs.push(assistant(`Now running the tests.`, [toolCall(`b${i}`, "bash", { command: `npx vitest run test/mod${i}.test.ts` })]));
    msgs.push(toolResult(`b${i}`, "bash", i % 3 === 0 ? ` FAIL test/mod${i}.test.ts > validates\nAssertionError: expected 'a' to be 'b' // Object.is equality\n at test/mod${i}.test.ts:${i + 10}:7\n\n Tests 1 failed | 9 passed` : ` ✓ test/mod${i}.test.ts (10 tests) 23ms\n Tests 10 passed (10)`, false));
  }
  const chars = msgs.reduce((n, m) => n + JSON.stringify(m).length, 0);
  for (let k = 0; k < 5; k++) await s.summarize({ previousSummary: "", messages: msgs, maxChars: 16000 });
  const t0 = performance.now();
  const out = await s.summarize({ previousSummary: "", messages: msgs, maxChars: 16000 });
  const t1 = performance.now();
  console.log(msgs.length, chars, (t1 - t0).toFixed(1) + "ms", out.length);
  console.log(out);
});
