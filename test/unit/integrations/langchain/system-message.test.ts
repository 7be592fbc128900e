import { SystemMessage } from "@langchain/core/messages";
import { modelSystemMessage } from "@contextd/langchain";
import { describe, expect, it } from "vitest";

describe("the model call's system message from an assembled context", () => {
  it("is the agent's own system message, unchanged, when contextd adds nothing", () => {
    const own = new SystemMessage({ content: [{ type: "text", text: "You read files.", cache_control: { type: "ephemeral" } }] });
    expect(modelSystemMessage([own], "")).toBe(own);
  });

  it("puts contextd's system-prompt addition before a plain system prompt", () => {
    const m = modelSystemMessage([new SystemMessage({ content: "You read files.", id: "s1" })], "Recalled: the user prefers tabs.");
    expect(m.content).toBe("Recalled: the user prefers tabs.\n\nYou read files.");
    expect(m.id).toBe("s1");
  });

  it("keeps content blocks (cache control) and several leading system messages in order, the addition first", () => {
    const cached = new SystemMessage({ content: [{ type: "text", text: "Prefix.", cache_control: { type: "ephemeral" } }] });
    const m = modelSystemMessage([cached, new SystemMessage("Second.")], "Added.");
    expect(m.content).toEqual([
      { type: "text", text: "Added." },
      { type: "text", text: "Prefix.", cache_control: { type: "ephemeral" } },
      { type: "text", text: "Second." },
    ]);
  });

  it("is the addition alone when the context has no system message, and empty (left out by LangChain) when there is neither", () => {
    expect(modelSystemMessage([], "Added.").content).toBe("Added.");
    expect(modelSystemMessage([], "").text).toBe("");
  });
});
