/**
 * The benchmarks' stand-in summarizer model (bench/harness/summary-model.ts) over a real socket: it
 * speaks chat completions, answers with content of what it was asked to summarize (contextd refuses
 * a summary that carries nothing of what it replaces), and counts the calls and tokens it reported.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSummaryModel, type SummaryModel } from "../../../bench/harness/summary-model.js";

describe("the bench's stand-in summarizer model", () => {
  let model: SummaryModel;
  beforeAll(async () => {
    model = await startSummaryModel();
  });
  afterAll(async () => {
    await model?.close();
  });

  const ask = (body: unknown) =>
    fetch(`${model.baseUrl}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  it("answers a chat completion with an extract of the last message and counts what its usage reported", async () => {
    const prompt = "Summarize:\n\nuser: fix invoice_rounding.ts, bug BILL-4821\n\nassistant: patched the rounding mode\n\nuser: run the tests";
    const res = await ask({
      model: "m",
      max_tokens: 200,
      messages: [
        { role: "system", content: "You summarize." },
        { role: "user", content: prompt },
      ],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      choices: { message: { content: string } }[];
      usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
    };
    const answer = body.choices[0].message.content;
    expect(answer).toContain("BILL-4821");
    expect(answer.length).toBeLessThanOrEqual(800);
    expect(body.usage.prompt_tokens).toBe(Math.ceil(("You summarize.".length + prompt.length) / 4));
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens);
    expect(model.spent()).toEqual({ calls: 1, tokens: body.usage.total_tokens });
  });

  it("refuses what is not a chat completion, and counts nothing for it", async () => {
    const before = model.spent();
    expect((await fetch(`${model.baseUrl}/embeddings`, { method: "POST", body: "{}" })).status).toBe(404);
    const bad = await fetch(`${model.baseUrl}/chat/completions`, { method: "POST", body: "{not json" });
    expect(bad.status).toBe(400);
    expect(model.spent()).toEqual(before);
  });
});
