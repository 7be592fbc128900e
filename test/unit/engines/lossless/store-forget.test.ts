/** LosslessStore.forget (ForgetSession): a session's messages, summaries and row leave the file; another session's stay. */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Role } from "../../../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../../../src/contract/messages.js";
import { LosslessStore } from "../../../../engines/lossless/store.js";

describe("LosslessStore.forget", () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("purges the session's messages, summary DAG and row from the file, and answers whether it held any", () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "lossless-forget-"));
    const file = path.join(dir, "lossless.db");
    const store = LosslessStore.open(file);
    const m = (id: string, text: string) => ({ ...textMessage(Role.ROLE_USER, text), id, tokenCount: 5 });
    store.append("gone", [m("e1", "the secret is ottersnorkel"), m("e2", "ottersnorkel again")]);
    store.insertSummary(
      {
        sessionId: "gone",
        depth: 0,
        firstOrd: 1,
        lastOrd: 2,
        firstEntryId: "e1",
        lastEntryId: "e2",
        messageCount: 2,
        sourceTokens: 10,
        childIds: [],
        text: "summary: ottersnorkel",
        summarizer: "test",
      },
      () => 7,
    );
    store.append("kept", [m("k1", "the other word is pelicanfudge")]);
    expect(store.forget("gone")).toBe(true);
    expect(store.hasSession("gone")).toBe(false);
    expect(store.allSummaries("gone")).toEqual([]);
    expect(store.messageCount("gone")).toBe(0);
    expect(store.forget("gone")).toBe(false);
    expect(store.messageCount("kept")).toBe(1);
    store.close();
    const bytes = fs.readFileSync(file);
    expect(bytes.includes(Buffer.from("ottersnorkel"))).toBe(false);
    expect(bytes.includes(Buffer.from("pelicanfudge"))).toBe(true);
  });
});
