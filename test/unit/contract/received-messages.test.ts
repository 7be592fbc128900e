/**
 * src/contract/received-messages.ts: an appended message is stored as the bytes the runtime sent,
 * followed by what the host sets. For arbitrary messages (fast-check), the entry stored that way
 * decodes exactly as the entry the store builds by encoding the decoded message — with the host's
 * entry id, token count and timestamp, whatever id, count or timestamp the runtime sent.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { rememberedBody, withIdAndCount } from "../../../src/contract/encoded-messages.js";
import { AppendMessagesRequest, SessionServiceService } from "../../../src/contract/gen/contextd/v1/session.js";
import { Message, Role, TranscriptEntry } from "../../../src/contract/gen/contextd/v1/types.js";
import { textBlock } from "../../../src/contract/messages.js";
import { encodedSize, withReceivedMessages } from "../../../src/contract/received-messages.js";
import { messageEntryRow } from "../../../src/store/rows.js";
import { message } from "../../fixtures/contract-messages.js";

const appendMethod = withReceivedMessages(SessionServiceService, "appendMessages", 2).appendMessages;
const receive = (req: AppendMessagesRequest) => appendMethod.requestDeserialize(Buffer.from(AppendMessagesRequest.encode(req).finish()));
const pos = { sessionId: "s", seq: 12, parentId: "p0" };
const NOW = 1_790_000_000_000;

describe("appended messages stored as received", () => {
  it("each message of a decoded AppendMessages request remembers its bytes, and is frozen", () => {
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 5 }), (messages) => {
        const got = receive(AppendMessagesRequest.fromPartial({ session: { sessionId: "s" }, messages, isHeartbeat: true }));
        expect(got.messages).toEqual(messages);
        got.messages.forEach((m, i) => {
          expect(Buffer.from(rememberedBody(m)!)).toEqual(Buffer.from(Message.encode(messages[i]).finish()));
          expect(encodedSize(m)).toBe(Message.encode(messages[i]).finish().length);
          expect(Object.isFrozen(m)).toBe(true);
        });
      }),
      { numRuns: 200 },
    );
  });

  it("the stored entry decodes exactly as the entry built from the decoded message", () => {
    fc.assert(
      fc.property(message, fc.stringMatching(/^[0-9a-f]{16}$/), fc.nat({ max: 2 ** 32 - 1 }), (sent, id, count) => {
        const [received] = receive(AppendMessagesRequest.fromPartial({ messages: [sent] })).messages;
        // What the host hands the store: the runtime's id cleared (runtimes do not choose entry ids).
        const fromBytes = messageEntryRow(pos, id, withIdAndCount(received, "", received.tokenCount), count, NOW, "m");
        const encoded = messageEntryRow(pos, id, { ...sent, id: "" }, count, NOW, "m");
        expect(rememberedBody(encoded.entry.entry!.value as Message)).toBeUndefined();
        const stored = TranscriptEntry.decode(fromBytes.row.payload);
        expect(stored).toEqual(TranscriptEntry.decode(encoded.row.payload));
        expect(stored).toEqual(fromBytes.entry);
        expect(stored.entry?.value).toEqual({ ...sent, id, tokenCount: count, timestampMs: sent.timestampMs || NOW });
        expect({ ...fromBytes.row, payload: undefined }).toEqual({ ...encoded.row, payload: undefined });
      }),
      { numRuns: 300 },
    );
  });

  it("keeps fields this contract does not know, where decoding and encoding again would drop them", () => {
    const sent = Message.encode(Message.fromPartial({ role: Role.ROLE_USER, content: [textBlock("hi")], id: "runtime", tokenCount: 999 })).finish();
    const unknown = Buffer.from([0xa0, 0x06, 0x07]); // field 100, varint 7
    const request = Buffer.concat([Buffer.from([0x12, sent.length + unknown.length]), sent, unknown]);
    const [received] = appendMethod.requestDeserialize(request).messages;
    const row = messageEntryRow(pos, "e1", withIdAndCount(received, "", 0), 3, NOW, "m").row;
    expect(Buffer.from(row.payload).includes(unknown)).toBe(true);
    const stored = TranscriptEntry.decode(row.payload).entry?.value as Message;
    expect([stored.id, stored.tokenCount, stored.timestampMs]).toEqual(["e1", 3, NOW]);
  });
});
