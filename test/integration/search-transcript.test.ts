/**
 * SessionService.SearchTranscript and ExpandCompaction over real gRPC, against a real contextd on
 * SQLite and on PostgreSQL (proto/contextd/v1/search.proto is the contract): code-ish strings hit,
 * compacted entries are found and expanded, another agent's text never appears, pages are complete
 * and never overlap, page tokens are bound to their search, bad queries name the field, and query
 * text that is search syntax elsewhere is text here.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { SearchOrder, SearchScope, type SearchHit } from "../../src/contract/gen/contextd/v1/search.js";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { ContextdClient, errorDetails, textMessage } from "../../src/sdk/runtime-client.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";

async function refused(p: Promise<unknown>): Promise<{ code: number; details: string; fields: string[] }> {
  try {
    await p;
  } catch (err) {
    const e = err as ServiceError;
    return { code: e.code, details: e.details, fields: (errorDetails(e)?.fieldViolations ?? []).map((v) => v.field) };
  }
  throw new Error("the call succeeded");
}

describe.each(["sqlite", "postgres"] as const)("SearchTranscript and ExpandCompaction (%s)", (store) => {
  let contextd: ContextdProcess;
  let alice: ContextdClient;
  let bob: ContextdClient;
  let admin: ContextdClient;
  let db: ScratchDatabase | undefined;
  const planted = "Root cause: src/billing/invoice_rounding.ts rounds half-down; ticket BILL-4821 tracks the fix.";

  beforeAll(async () => {
    db = store === "postgres" ? await createScratchDatabase() : undefined;
    contextd = await startContextd({
      config: {
        ...(db ? { store: db.url() } : {}),
        auth: {
          required: true,
          runtimes: [
            { token_env: "ALICE", agents: ["alice"] },
            { token_env: "BOB", agents: ["bob"] },
            { token_env: "ADMIN", agents: ["*"] },
          ],
        },
      },
      env: { ALICE: "alice-token", BOB: "bob-token", ADMIN: "admin-token" },
    });
    alice = new ContextdClient({ address: contextd.address, token: "alice-token", timeoutMs: 60_000 });
    bob = new ContextdClient({ address: contextd.address, token: "bob-token", timeoutMs: 60_000 });
    admin = new ContextdClient({ address: contextd.address, token: "admin-token", timeoutMs: 60_000 });

    const session = { sessionId: "alice-main", agentId: "alice" };
    await alice.appendMessages({ session, messages: [textMessage(Role.ROLE_USER, planted)] });
    const filler = Array.from({ length: 60 }, (_, i) =>
      textMessage(i % 2 ? Role.ROLE_ASSISTANT : Role.ROLE_USER, `turn ${i}: we discussed the deployment checklist and the flaky test number ${i} at length`),
    );
    await alice.appendMessages({ session, messages: filler });
    await alice.appendMessages({
      session: { sessionId: "alice-other", agentId: "alice" },
      messages: [textMessage(Role.ROLE_USER, "alice also says flaky kestrel")],
    });
    await bob.appendMessages({
      session: { sessionId: "bob-main", agentId: "bob" },
      messages: [textMessage(Role.ROLE_USER, "bob's secret: kestrel BILL-4821 invoice_rounding.ts lives here too")],
    });
  }, 120_000);
  afterAll(async () => {
    for (const c of [alice, bob, admin]) c?.close();
    await contextd?.cleanup();
    await db?.drop();
  });

  it("finds a path and a ticket id by their words, with the match marked in the snippet", async () => {
    for (const query of ["invoice_rounding.ts", "BILL-4821", "billing rounds", '"rounds half down"']) {
      const res = await alice.searchTranscript({ session: { sessionId: "alice-main" }, query });
      expect(
        res.hits.map((h) => [h.sessionId, h.seq]),
        query,
      ).toEqual([["alice-main", 1]]);
    }
    const [hit] = (await alice.searchTranscript({ session: { sessionId: "alice-main" }, query: "invoice_rounding.ts" })).hits;
    expect(hit).toMatchObject({ role: Role.ROLE_USER, compaction: false, hidden: false });
    expect(hit.snippet).toBe("Root cause: src/billing/«invoice_rounding.ts» rounds half-down; ticket BILL-4821 tracks the fix.");
    expect(hit.score).toBeGreaterThan(0);
  });

  it("finds what compaction folded away, and ExpandCompaction answers the entries its summary covers", async () => {
    const session = { sessionId: "alice-main", agentId: "alice" };
    const compacted = await alice.compact({ session, tokenBudget: 600, force: true });
    expect(compacted.compacted).toBe(true);
    const view = await alice.assemble({ session, tokenBudget: 100_000, autoCompact: false });
    expect(view.messages.some((m) => m.content.some((c) => c.block?.$case === "text" && c.block.value.text === planted))).toBe(false);

    const hits = (await alice.searchTranscript({ session, query: "BILL-4821" })).hits;
    const original = hits.find((h) => !h.compaction);
    expect(original).toMatchObject({ seq: 1, role: Role.ROLE_USER });
    const transcript = (await alice.getTranscript({ session, pageSize: 5000 })).entries;
    const compaction = transcript.filter((e) => e.entry?.$case === "compaction").at(-1)!;

    const covered: string[] = [];
    let pageToken = "";
    do {
      const page = await alice.expandCompaction({ session, compactionEntryId: compaction.id, pageSize: 7, pageToken });
      expect(page.previousCompactionEntryId).toBe("");
      covered.push(...page.entries.map((e) => e.id));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(covered[0]).toBe(original!.entryId);
    expect(new Set(covered).size).toBe(covered.length);
    const firstKept = compaction.entry?.$case === "compaction" ? compaction.entry.value.firstKeptEntryId : "";
    const keptSeq = transcript.find((e) => e.id === firstKept)?.seq ?? compaction.seq;
    expect(covered).toEqual(transcript.filter((e) => e.seq < keptSeq && e.entry?.$case === "message").map((e) => e.id));

    expect(await refused(alice.expandCompaction({ session, compactionEntryId: original!.entryId }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      fields: ["compaction_entry_id"],
    });
    expect(await refused(bob.expandCompaction({ session: { sessionId: "alice-main" }, compactionEntryId: compaction.id }))).toMatchObject({
      code: status.NOT_FOUND,
    });
  });

  it("another agent's session answers NOT_FOUND, and an agent-wide search never holds another agent's text", async () => {
    expect(await refused(bob.searchTranscript({ session: { sessionId: "alice-main" }, query: "BILL-4821" }))).toMatchObject({
      code: status.NOT_FOUND,
      details: 'session "alice-main" not found',
    });
    const bobs = await bob.searchTranscript({ session: { sessionId: "bob-main" }, query: "BILL-4821", scope: SearchScope.SEARCH_SCOPE_AGENT });
    expect(bobs.hits.map((h) => h.sessionId)).toEqual(["bob-main"]);
    const alices = await alice.searchTranscript({ session: { sessionId: "alice-other" }, query: "kestrel", scope: SearchScope.SEARCH_SCOPE_AGENT });
    expect(alices.hits.map((h) => h.sessionId)).toEqual(["alice-other"]);
    // A token that covers every agent still searches one agent's sessions: the session's.
    const wide = await admin.searchTranscript({ session: { sessionId: "alice-other" }, query: "flaky", scope: SearchScope.SEARCH_SCOPE_AGENT, pageSize: 100 });
    expect(new Set(wide.hits.map((h) => h.sessionId))).toEqual(new Set(["alice-other", "alice-main"]));
    const fromBob = await admin.searchTranscript({ session: { sessionId: "bob-main" }, query: "BILL-4821", scope: SearchScope.SEARCH_SCOPE_AGENT });
    expect(fromBob.hits.map((h) => h.sessionId)).toEqual(["bob-main"]);
  });

  it("pages through every match exactly once, newest first and by relevance", async () => {
    const session = { sessionId: "alice-main" };
    // 60 messages say it, and so may the compaction's summary.
    const everything = await alice.searchTranscript({ session, query: "flaky test", pageSize: 100 });
    expect(everything.nextPageToken).toBe("");
    expect(everything.hits.filter((h) => !h.compaction).length).toBe(60);
    const count = everything.hits.length;
    for (const order of [SearchOrder.SEARCH_ORDER_NEWEST, SearchOrder.SEARCH_ORDER_RELEVANCE]) {
      const all: SearchHit[] = [];
      let pageToken = "";
      do {
        const page = await alice.searchTranscript({ session, query: "flaky test", order, pageSize: 7, pageToken });
        expect(page.hits.length).toBeLessThanOrEqual(7);
        all.push(...page.hits);
        pageToken = page.nextPageToken;
      } while (pageToken);
      expect(all.length).toBe(count);
      expect(new Set(all.map((h) => h.entryId))).toEqual(new Set(everything.hits.map((h) => h.entryId)));
      if (order === SearchOrder.SEARCH_ORDER_NEWEST) expect(all.map((h) => h.seq)).toEqual([...all.map((h) => h.seq)].sort((a, b) => b - a));
      else for (let i = 1; i < all.length; i++) expect(all[i - 1].score).toBeGreaterThanOrEqual(all[i].score);
    }
  });

  it("a page token works only for the caller, session, query, scope and order it was issued for", async () => {
    const session = { sessionId: "alice-main" };
    const first = await alice.searchTranscript({ session, query: "flaky", pageSize: 2 });
    expect(first.nextPageToken).not.toBe("");
    const attempts = [
      () => alice.searchTranscript({ session, query: "deployment", pageSize: 2, pageToken: first.nextPageToken }),
      () => alice.searchTranscript({ session, query: "flaky", pageSize: 2, pageToken: first.nextPageToken, order: SearchOrder.SEARCH_ORDER_RELEVANCE }),
      () => alice.searchTranscript({ session, query: "flaky", pageSize: 2, pageToken: first.nextPageToken, scope: SearchScope.SEARCH_SCOPE_AGENT }),
      () => alice.searchTranscript({ session: { sessionId: "alice-other" }, query: "flaky", pageSize: 2, pageToken: first.nextPageToken }),
      () => admin.searchTranscript({ session, query: "flaky", pageSize: 2, pageToken: first.nextPageToken }),
      () => alice.getTranscript({ session, pageToken: first.nextPageToken }),
      () => alice.searchTranscript({ session, query: "flaky", pageToken: "not-a-token" }),
      () => alice.searchTranscript({ session, query: "flaky", pageToken: "x".repeat(2000) }),
    ];
    for (const a of attempts) expect(await refused(a())).toMatchObject({ code: status.INVALID_ARGUMENT, fields: ["page_token"] });
    // The same query spelled otherwise is the same search.
    const next = await alice.searchTranscript({ session, query: "  FLAKY ", pageSize: 2, pageToken: first.nextPageToken });
    expect(next.hits.length).toBe(2);
    expect(next.hits[0].seq).toBeLessThan(first.hits[1].seq);
  });

  it("refuses an empty, overlong or wordless query, and unknown enums, naming the field", async () => {
    const session = { sessionId: "alice-main" };
    const cases: Array<[Parameters<ContextdClient["searchTranscript"]>[0], string]> = [
      [{ session, query: "" }, "query"],
      [{ session, query: "   " }, "query"],
      [{ session, query: "x".repeat(513) }, "query"],
      [{ session, query: "*** --- ()" }, "query"],
      [{ session, query: Array.from({ length: 17 }, (_, i) => `w${i}`).join(" ") }, "query"],
      [{ session, query: "ok", scope: 7 as SearchScope }, "scope"],
      [{ session, query: "ok", order: 9 as SearchOrder }, "order"],
    ];
    for (const [req, field] of cases) expect(await refused(alice.searchTranscript(req))).toMatchObject({ code: status.INVALID_ARGUMENT, fields: [field] });
  });

  it("treats search syntax (quotes, *, NEAR(, OR, -, column filters) as literal text", async () => {
    const session = { sessionId: "syntax", agentId: "alice" };
    await alice.appendMessages({ session, messages: [textMessage(Role.ROLE_USER, 'grep -v "NEAR(x" OR body:* && echo done')] });
    for (const query of ['"', '""', '"NEAR(x', "*", "NEAR(", "OR", "-v", "body:*", "x AND", ")(", "'", "\\", "NOT OR AND", "a:b:c"]) {
      let res;
      try {
        res = await alice.searchTranscript({ session, query });
      } catch (err) {
        // Only a query with no word in it is refused, and never as anything but INVALID_ARGUMENT on query.
        expect(await refused(Promise.reject(err)), query).toMatchObject({ code: status.INVALID_ARGUMENT, fields: ["query"] });
        continue;
      }
      // Any hit is the entry that holds these words as text.
      expect(
        res.hits.every((h) => h.seq === 1),
        query,
      ).toBe(true);
    }
    expect((await alice.searchTranscript({ session, query: "NEAR( OR -v" })).hits.map((h) => h.seq)).toEqual([1]);
    expect((await alice.searchTranscript({ session, query: "NOT" })).hits).toEqual([]);
  });

  it("a deleted session's text is not found again, even under a new session of the same id", async () => {
    const session = { sessionId: "short-lived", agentId: "alice" };
    await alice.appendMessages({ session, messages: [textMessage(Role.ROLE_USER, "ephemeral pelican")] });
    expect((await alice.searchTranscript({ session, query: "pelican" })).hits.length).toBe(1);
    await alice.deleteSession({ session });
    expect(await refused(alice.searchTranscript({ session, query: "pelican" }))).toMatchObject({ code: status.NOT_FOUND });
    await alice.appendMessages({ session, messages: [textMessage(Role.ROLE_USER, "a new start")] });
    expect((await alice.searchTranscript({ session, query: "pelican" })).hits).toEqual([]);
    expect((await alice.searchTranscript({ session: { sessionId: "alice-other" }, query: "pelican", scope: SearchScope.SEARCH_SCOPE_AGENT })).hits).toEqual([]);
  });
});
