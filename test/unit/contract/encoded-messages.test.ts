/**
 * src/contract/encoded-messages.ts: a stored message sent on as its stored bytes decodes exactly as
 * the decoded message with the host's id and count would have encoded — for arbitrary messages and
 * entries (fast-check) — and such a message cannot be edited in place.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { entryMessageBytes, rememberEncoding, splicingSerializer } from "../../../src/contract/encoded-messages.js";
import { AssembleResponse } from "../../../src/contract/gen/contextd/v1/session.js";
import { CompactionEntry, Message, Role, TranscriptEntry } from "../../../src/contract/gen/contextd/v1/types.js";
import { textBlock } from "../../../src/contract/messages.js";
import { message } from "../../fixtures/contract-messages.js";

/** What the store does for a view message: decode the entry, set id and count, remember the body. */
function viewMessage(payload: Uint8Array, entryId: string, tokenCount: number): Message {
  const entry = TranscriptEntry.decode(payload);
  if (entry.entry?.$case !== "message") throw new Error("no message entry");
  const m = entry.entry.value;
  m.id = entryId;
  m.tokenCount = tokenCount;
  return rememberEncoding(m, entryMessageBytes(payload)!);
}

const serialize = splicingSerializer(AssembleResponse, 1);

describe("stored messages spliced into answers", () => {
  it("decode exactly as the host's copy would have encoded, whatever the message and entry", () => {
    fc.assert(
      fc.property(
        message,
        fc.stringMatching(/^[0-9a-f-]{1,32}$/),
        fc.nat({ max: 2 ** 31 }),
        fc.string({ maxLength: 40 }),
        fc.nat(),
        (stored, entryId, count, extra, seq) => {
          const payload = TranscriptEntry.encode(
            TranscriptEntry.fromPartial({
              id: entryId,
              parentId: "p",
              seq,
              timestampMs: 7,
              entry: { $case: "message", value: stored },
              extraJson: extra,
              revision: 2,
            }),
          ).finish();
          const view = viewMessage(payload, entryId, count);
          const made = Message.fromPartial({ role: Role.ROLE_ASSISTANT, content: [textBlock("made by an engine")] });
          const answer = { ...AssembleResponse.fromPartial({ estimatedTokens: 3, systemPromptAddition: "x", engineId: "e" }), messages: [made, view] };
          const spliced = AssembleResponse.decode(serialize(answer));
          expect(spliced).toEqual(AssembleResponse.decode(AssembleResponse.encode(answer).finish()));
          expect(spliced.messages[1]).toEqual({ ...stored, id: entryId, tokenCount: count });
        },
      ),
      { numRuns: 300 },
    );
  });

  it("an entry with no message, or the field twice, has no stored body: the message is encoded anew", () => {
    const compaction = TranscriptEntry.encode(
      TranscriptEntry.fromPartial({ id: "c", entry: { $case: "compaction", value: CompactionEntry.fromPartial({ summary: "s" }) } }),
    ).finish();
    expect(entryMessageBytes(compaction)).toBeUndefined();
    const once = TranscriptEntry.encode(
      TranscriptEntry.fromPartial({ id: "m", entry: { $case: "message", value: Message.fromPartial({ role: Role.ROLE_USER }) } }),
    ).finish();
    const twice = new Uint8Array([...once, ...once.slice(once.indexOf(0x2a))]);
    expect(entryMessageBytes(once)).toBeDefined();
    expect(entryMessageBytes(twice)).toBeUndefined();
    expect(entryMessageBytes(new Uint8Array([0x2a, 0x7f]))).toBeUndefined(); // truncated
  });

  it("a stored message cannot be edited in place (its bytes would be stale); a copy is encoded anew", () => {
    const payload = TranscriptEntry.encode(
      TranscriptEntry.fromPartial({
        id: "e1",
        entry: { $case: "message", value: Message.fromPartial({ role: Role.ROLE_USER, content: [textBlock("stored")] }) },
      }),
    ).finish();
    const view = viewMessage(payload, "e1", 4);
    expect(() => {
      (view as { tokenCount: number }).tokenCount = 9;
    }).toThrow(TypeError);
    const edited = { ...view, content: [textBlock("edited")] };
    const out = AssembleResponse.decode(serialize({ ...AssembleResponse.fromPartial({}), messages: [edited] }));
    expect(out.messages[0].content).toEqual([textBlock("edited")]);
    expect(out.messages[0].id).toBe("e1");
  });
});
