/**
 * AssembleRequest.prompt reaches the engine (a real sidecar: the TS misbehaving engine, which logs
 * the prompt of every Assemble): as the runtime set it, "" when it asked for none, and — unset — the
 * text of the latest user message of the view (session.proto), never the compaction summary.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { startContextdWithEngine, type ContextdWithEngine } from "../helpers/contextd-with-engine.js";

const ENGINE = "prompt-engine";

describe("the prompt an engine gets", () => {
  let f: ContextdWithEngine;
  const session = { sessionId: "prompted" };
  const prompts = () =>
    f.engine
      .events()
      .filter((e) => e.event === "assemble_request")
      .map((e) => e.prompt);

  beforeAll(async () => {
    f = await startContextdWithEngine(ENGINE);
    await f.cx.appendMessages({
      session,
      messages: [
        textMessage(Role.ROLE_USER, "What did we decide about the cache?"),
        textMessage(Role.ROLE_ASSISTANT, "To drop it."),
        textMessage(Role.ROLE_USER, "And where is the config for it?"),
        textMessage(Role.ROLE_ASSISTANT, "In config/cache.yaml."),
      ],
    });
  });
  afterAll(() => f?.close());

  it("unset: the latest user message of the view; set: as sent; empty: none", async () => {
    await f.cx.assemble({ session, tokenBudget: 8_000 });
    await f.cx.assemble({ session, tokenBudget: 8_000, prompt: "Which file holds the cache settings?" });
    await f.cx.assemble({ session, tokenBudget: 8_000, prompt: "" });
    await f.engine.waitForEvent(() => prompts().length === 3);
    expect(prompts()).toEqual(["And where is the config for it?", "Which file holds the cache settings?", ""]);
  });

  it("after a compaction the summary (a user message too) is not taken for the prompt", async () => {
    await f.cx.compact({ session, tokenBudget: 8_000, force: true });
    await f.cx.appendMessages({ session, messages: [textMessage(Role.ROLE_ASSISTANT, "Anything else?")] });
    await f.cx.assemble({ session, tokenBudget: 8_000 });
    await f.engine.waitForEvent(() => prompts().length === 4);
    // The kept part still holds the last user message; were it compacted away, the prompt would be "".
    expect(prompts()[3]).toBe("And where is the config for it?");
  });
});
