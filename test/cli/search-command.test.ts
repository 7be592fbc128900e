import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { textMessage } from "../../src/contract/messages.js";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { contextctl, tableRows } from "./run-contextctl.js";

/** `contextctl search` (the built CLI as a child process) against what SearchTranscript answers. */
describe("contextctl search against a real contextd", () => {
  let server: ContextdProcess;
  let cx: ContextdClient;

  beforeAll(async () => {
    server = await startContextd();
    cx = new ContextdClient({ address: server.address });
    await cx.appendMessages({
      session: { sessionId: "chat", agentId: "cli" },
      messages: [
        textMessage(Role.ROLE_USER, "The bug is in src/billing/invoice_rounding.ts, ticket BILL-4821."),
        textMessage(Role.ROLE_ASSISTANT, "Fixed invoice_rounding.ts; BILL-4821 can be closed."),
        textMessage(Role.ROLE_USER, "Thanks, unrelated question now."),
      ],
    });
    await cx.appendMessages({ session: { sessionId: "other", agentId: "cli" }, messages: [textMessage(Role.ROLE_USER, "BILL-4821 elsewhere")] });
  }, 60_000);
  afterAll(async () => {
    cx?.close();
    await server?.cleanup();
  });

  it("prints one row per hit, newest first, with the match marked; --json gives the SearchHits", async () => {
    const out = await contextctl(server.address, "search", "chat", "invoice_rounding.ts");
    expect(out.code).toBe(0);
    const rows = tableRows(out.stdout);
    expect(rows.map((r) => [r[0], r[1], r[3]])).toEqual([
      ["chat", "2", "assistant"],
      ["chat", "1", "user"],
    ]);
    expect(rows[1].at(-1)).toBe("The bug is in src/billing/«invoice_rounding.ts», ticket BILL-4821.");

    const json = await contextctl(server.address, "--json", "search", "chat", "BILL-4821", "--agent", "--limit", "2");
    expect(json.code).toBe(0);
    const hits = JSON.parse(json.stdout).hits as { sessionId: string; entryId: string; snippet: string }[];
    expect(hits.length).toBe(2);
    const all = (await cx.searchTranscript({ session: { sessionId: "chat" }, query: "BILL-4821", scope: 2, pageSize: 2 })).hits;
    expect(hits.map((h) => h.entryId)).toEqual(all.map((h) => h.entryId));
  });

  it("a query without a word is exit 1 naming the field; no hits is exit 0", async () => {
    const bad = await contextctl(server.address, "search", "chat", "***");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/INVALID_ARGUMENT: query has no letter or digit/);
    const none = await contextctl(server.address, "search", "chat", "zebra");
    expect(none).toMatchObject({ code: 0, stdout: "no hits\n" });
  });
});
