/**
 * ContextEngineServiceAssembleResponse.kept_entry_ids against a real contextd and a real sidecar
 * (the TS misbehaving engine, "by_reference" modes): an engine that answers by id gets the stored
 * messages sent on — the very bytes the runtime appended, with their entry ids and stored counts —
 * after the messages it added; an answer naming an id the view does not have, an id twice, or ids
 * out of order breaks the contract and is answered by legacy.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mode, Role } from "../../src/contract/gen/contextd/v1/types.js";
import { Message } from "../../src/contract/gen/contextd/v1/types.js";
import { codingSession } from "../fixtures/coding-session.js";
import { startContextdWithEngine, type ContextdWithEngine } from "../helpers/contextd-with-engine.js";
import { toolPairViolations } from "../helpers/invariants.js";
import { registryClient } from "../helpers/registry-client.js";

const ENGINE = "by-reference";

describe("Assemble answered by kept_entry_ids", () => {
  let f: ContextdWithEngine;
  let registry: ReturnType<typeof registryClient>;
  const session = { sessionId: "kept-ids" };
  const conversation = codingSession({ turns: 6, seed: 5 }).messages;
  /** Room for most of the session, not all of it: the engine keeps the newest part. */
  let budget = 0;
  let entryIds: string[] = [];

  beforeAll(async () => {
    f = await startContextdWithEngine(ENGINE);
    registry = registryClient(f.contextd.address);
    ({ entryIds } = await f.cx.appendMessages({ session, messages: conversation }));
    const total = (await f.cx.getSession({ session })).info!.activeTokens;
    budget = Math.floor(total * 0.7);
  });
  afterAll(async () => {
    registry?.close();
    await f?.close();
  });

  it("the runtime gets the engine's note, then the stored messages it kept, byte for byte", async () => {
    f.engine.control({ assemble: "by_reference" });
    // No compaction first: the engine itself keeps the newest part of the whole view.
    const res = await f.cx.assemble({ session, tokenBudget: budget, autoCompact: false });
    expect(res).toMatchObject({ engineId: ENGINE, mode: Mode.MODE_NORMAL, fallbackReason: "" });
    const [note, ...kept] = res.messages;
    expect(note).toMatchObject({ role: Role.ROLE_USER, id: "" });
    expect(note.content[0]).toMatchObject({ block: { $case: "text", value: { text: "a note the engine adds" } } });
    expect(kept.length).toBeGreaterThan(2);
    expect(kept.length).toBeLessThan(conversation.length);
    expect(toolPairViolations(kept)).toEqual([]);

    // Each kept message is the one appended, with its entry id and stored count: the newest ones.
    const first = entryIds.length - kept.length;
    expect(kept.map((m) => m.id)).toEqual(entryIds.slice(first));
    kept.forEach((m, i) => {
      expect(Message.toJSON(m)).toEqual(Message.toJSON({ ...conversation[first + i], id: m.id, tokenCount: m.tokenCount }));
      expect(m.tokenCount).toBeGreaterThan(0);
    });
    // The host counts the answer itself: the note by the tokenizer, the kept ones by their stored counts.
    const keptTokens = kept.reduce((sum, m) => sum + m.tokenCount, 0);
    expect(res.estimatedTokens).toBeGreaterThan(keptTokens);
    expect(res.estimatedTokens).toBeLessThanOrEqual(budget);
  });

  for (const [mode, what] of [
    ["reference_unknown", "is no message of the view"],
    ["reference_twice", "named twice or out of the view's order"],
    ["reference_order", "named twice or out of the view's order"],
  ] as const) {
    it(`${mode}: a contract violation, answered by legacy, the engine quarantined`, async () => {
      f.engine.control({ assemble: mode });
      const res = await f.cx.assemble({ session, tokenBudget: budget });
      expect(res).toMatchObject({ engineId: "legacy", mode: Mode.MODE_FALLBACK });
      expect(res.fallbackReason).toContain("kept_entry_ids[");
      expect(res.fallbackReason).toContain(what);
      expect((await registry.get(ENGINE)).quarantine?.reason).toContain("contract");
      await registry.clear(ENGINE);
    });
  }
});
