/**
 * The prompt_cache bench's measure: a provider's cache serves the system prompt addition, if
 * unchanged, and the leading messages identical as the provider sees them — and the cost ratios
 * follow the published prices.
 */
import { describe, expect, it } from "vitest";
import { anthropicCostRatio, openaiCostRatio, PrefixMeter, prefixReuse } from "../../../bench/harness/prompt-cache.js";
import { textMessage } from "../../../src/contract/messages.js";
import { Role } from "../../../src/contract/gen/contextd/v1/types.js";
import { createTokenizer } from "../../../src/tokens/create-tokenizer.js";

const tokenizer = createTokenizer("o200k_base");
const user = (text: string) => textMessage(Role.ROLE_USER, text);

describe("prompt-cache prefix measure", () => {
  it("counts the unchanged addition and the identical leading messages as reused, nothing after the first difference", () => {
    const meter = new PrefixMeter(tokenizer);
    const a = user("alpha ".repeat(50));
    const b = user("beta ".repeat(50));
    expect(meter.add({ systemPromptAddition: "note", messages: [a] }).reused).toBe(0);
    const second = meter.add({ systemPromptAddition: "note", messages: [a, b, a] });
    expect(second.reused).toBe(tokenizer.countText("note") + tokenizer.countMessage(a));
    // A message that differs only by its id and stored count is the same to the provider.
    const third = meter.add({ systemPromptAddition: "note", messages: [{ ...a, id: "other", tokenCount: 1 }, b, b] });
    expect(third.reused).toBe(tokenizer.countText("note") + tokenizer.countMessage(a) + tokenizer.countMessage(b));
  });

  it("misses the whole cache when the system prompt addition changes (it precedes the system prompt)", () => {
    const meter = new PrefixMeter(tokenizer);
    const a = user("alpha ".repeat(50));
    meter.add({ systemPromptAddition: "recalled: x", messages: [a] });
    expect(meter.add({ systemPromptAddition: "recalled: y", messages: [a] }).reused).toBe(0);
  });

  it("prices reads at 0.1× and writes at 1.25× (Anthropic); OpenAI caches ≥ 1,024-token prompts in 128-token steps", () => {
    const calls = [
      { total: 1000, reused: 0, reusedMessages: 0 },
      { total: 2000, reused: 1000, reusedMessages: 1 },
    ];
    expect(prefixReuse(calls)).toBeCloseTo(1000 / 3000);
    expect(anthropicCostRatio(calls)).toBeCloseTo((1000 * 1.25 + 1000 * 0.1 + 1000 * 1.25) / 3000);
    // 1,000 reused tokens are under OpenAI's 1,024 minimum: nothing is cached.
    expect(openaiCostRatio(calls)).toBeCloseTo(1);
    expect(openaiCostRatio([{ total: 3000, reused: 2000, reusedMessages: 2 }])).toBeCloseTo((1920 * 0.1 + 1080) / 3000);
  });
});
