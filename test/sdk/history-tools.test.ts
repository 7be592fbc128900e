import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { textMessage } from "../../src/contract/messages.js";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { contextTool, expandTool, searchTool, sessionsTool } from "../../src/sdk/history-tools.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";

/**
 * The history tools (contextd/tools) called directly, as a framework adapter calls them, against a
 * real contextd: every answer within maxChars, and what does not fit reachable by page tokens.
 */
describe("history tools: bounded answers, paged to the end", () => {
  let server: ContextdProcess;
  let cx: ContextdClient;
  const MAX = 1_000;
  const session = { sessionId: "long", agentId: "tools" };

  beforeAll(async () => {
    server = await startContextd();
    cx = new ContextdClient({ address: server.address });
    for (let i = 0; i < 30; i++)
      await cx.appendMessages({
        session,
        messages: [textMessage(i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER, `Message ${i} mentions the marker word zircon. ${"padding ".repeat(20)}`)],
      });
    await cx.appendMessages({ session, messages: [textMessage(Role.ROLE_USER, `A very long paste: ${"lorem ipsum ".repeat(2_000)} ends with quartz.`)] });
  }, 60_000);
  afterAll(async () => {
    cx?.close();
    await server?.stop();
  });

  it("context pages through every message the model would be sent, each page within maxChars", async () => {
    const defaults = { sessionId: "long", maxChars: MAX, tokenBudget: 1_000_000 };
    const seen: number[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const res = await contextTool.run(cx, token ? { page_token: token } : {}, defaults);
      expect(res.isError).toBe(false);
      expect(res.text.length).toBeLessThanOrEqual(MAX);
      seen.push(...[...res.text.matchAll(/^--- (\d+) · /gm)].map((m) => Number(m[1])));
      token = (res.data?.next_page_token as string) || undefined;
      pages++;
    } while (token && pages < 100);
    expect(seen).toEqual(Array.from({ length: 31 }, (_, i) => i + 1));
    expect(pages).toBeGreaterThan(3);
  });

  it("search answers within maxChars and pages through every hit", async () => {
    const ids = new Set<string>();
    let token: string | undefined;
    let pages = 0;
    do {
      const res = await searchTool.run(cx, { query: "zircon", limit: 4, ...(token ? { page_token: token } : {}) }, { sessionId: "long", maxChars: MAX });
      expect(res.isError).toBe(false);
      expect(res.text.length).toBeLessThanOrEqual(MAX);
      for (const h of res.data!.hits as Array<{ entryId: string }>) ids.add(h.entryId);
      token = (res.data!.next_page_token as string) || undefined;
      pages++;
    } while (token && pages < 100);
    expect(ids.size).toBe(30);
  });

  it("an entry longer than the answer is cut, saying so; sessions fits too", async () => {
    const hit = await searchTool.run(cx, { query: "quartz" }, { sessionId: "long" });
    const entryId = (hit.data!.hits as Array<{ entryId: string }>)[0].entryId;
    const res = await expandTool.run(cx, { entry_id: entryId }, { sessionId: "long", maxChars: MAX });
    expect(res.isError).toBe(false);
    expect(res.text.length).toBeLessThanOrEqual(MAX);
    expect(res.text).toMatch(/\[cut: \d+ characters in all\]/);
    const list = await sessionsTool.run(cx, {}, { maxChars: MAX });
    expect(list.text).toContain("session long · agent tools");
  });
});
