import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as H from "../../src/contract/gen/contextd/v1/host.js";
import { messageText } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { startPythonEngine, type EngineProcess } from "../helpers/engine-process.js";
import { eventually } from "../helpers/registry-client.js";

function hostCall<Req, Res>(
  client: H.HostServiceClient,
  method: (r: Req, m: Metadata, o: object, cb: (e: ServiceError | null, r: Res) => void) => unknown,
  req: Req,
  token: string,
): Promise<Res> {
  const md = new Metadata();
  md.set("authorization", `Bearer ${token}`);
  return new Promise((resolve, reject) => method.call(client, req, md, { deadline: new Date(Date.now() + 5_000) }, (e, r) => (e ? reject(e) : resolve(r))));
}

describe("HostService, called with the token of an engine call in progress", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;
  let cx: ContextdClient;
  let host: H.HostServiceClient;
  let token: string;
  const session = { sessionId: "host-calls" };

  beforeAll(async () => {
    contextd = await startContextd({ config: { slots: { context_engine: "py" }, engines: { timeouts: { assemble: "20s" } } } });
    const leak = path.join(mkdtempSync(path.join(tmpdir(), "contextd-host-")), "host.json");
    // A token is valid only while its engine call is in progress: keep one Assemble in flight (the
    // engine is told to take 15 s) and use the token it carries.
    engine = await startPythonEngine({
      engineId: "py",
      registry: contextd.address,
      owner: "team",
      control: { assemble: "slow", slow_ms: 15_000, leak_host_token_to: leak },
    });
    expect((await engine.registered).ok).toBe(true);
    cx = new ContextdClient({ address: contextd.address });
    await cx.appendMessages({ session, messages: [user("first draft with a typo"), user("second message")] });
    void cx.assemble({ session, tokenBudget: 10_000 }).catch(() => undefined);
    token = await eventually(
      async () => {
        try {
          return (JSON.parse(readFileSync(leak, "utf8")) as { token: string }).token;
        } catch {
          return undefined;
        }
      },
      5_000,
      20,
    );
    host = new H.HostServiceClient(contextd.address, credentials.createInsecure());
  });
  afterAll(async () => {
    host?.close();
    cx?.close();
    await engine?.stop().catch(() => undefined);
    await contextd?.cleanup();
  });

  it("ReadTranscript returns the whole history or the active view", async () => {
    const all = await hostCall(host, host.readTranscript, H.ReadTranscriptRequest.fromPartial({ session }), token);
    expect(all.entries).toHaveLength(2);
    const active = await hostCall(host, host.readTranscript, H.ReadTranscriptRequest.fromPartial({ session, activeOnly: true }), token);
    expect(active.entries.map((e) => e.id)).toEqual(all.entries.map((e) => e.id));
  });

  it("SearchTranscript searches the granted session's history only, with tokens of its own", async () => {
    const res = await hostCall(host, host.searchTranscript, H.HostServiceSearchTranscriptRequest.fromPartial({ session, query: "second" }), token);
    expect(res.hits.map((h) => [h.sessionId, h.seq, h.snippet])).toEqual([["host-calls", 2, "«second» message"]]);
    await cx.appendMessages({ session: { sessionId: "not-granted" }, messages: [user("second session, second word")] });
    const other = (await hostCall(
      host,
      host.searchTranscript,
      H.HostServiceSearchTranscriptRequest.fromPartial({ session: { sessionId: "not-granted" }, query: "second" }),
      token,
    ).catch((e) => e)) as ServiceError;
    expect(other.code).toBe(status.PERMISSION_DENIED);
    const wordless = (await hostCall(host, host.searchTranscript, H.HostServiceSearchTranscriptRequest.fromPartial({ session, query: "***" }), token).catch(
      (e) => e,
    )) as ServiceError;
    expect(wordless.code).toBe(status.INVALID_ARGUMENT);
    expect(wordless.details).toMatch(/^query /);
    // A runtime's page token is not a host's (and the other way round).
    await cx.appendMessages({ session, messages: [user("second again"), user("and a second time")] });
    const runtimePage = await cx.searchTranscript({ session, query: "second", pageSize: 1 });
    expect(runtimePage.nextPageToken).not.toBe("");
    const replayed = (await hostCall(
      host,
      host.searchTranscript,
      H.HostServiceSearchTranscriptRequest.fromPartial({ session, query: "second", pageSize: 1, pageToken: runtimePage.nextPageToken }),
      token,
    ).catch((e) => e)) as ServiceError;
    expect(replayed.code).toBe(status.INVALID_ARGUMENT);
    expect(replayed.details).toMatch(/^page_token /);
  });

  it("RewriteTranscriptEntries replaces content and keeps the previous revision", async () => {
    const before = await hostCall(host, host.readTranscript, H.ReadTranscriptRequest.fromPartial({ session }), token);
    const entryId = before.entries[0].id;
    const res = await hostCall(
      host,
      host.rewriteTranscriptEntries,
      H.RewriteTranscriptEntriesRequest.fromPartial({ session, rewrites: [{ entryId, message: user("first draft, typo fixed") }], reason: "fix typo" }),
      token,
    );
    expect(res.rewrittenEntries).toBe(1);
    const transcript = await cx.getTranscript({ session });
    const rewritten = transcript.entries[0];
    expect(rewritten.revision).toBe(1);
    expect(rewritten.entry?.$case === "message" && messageText(rewritten.entry.value)).toBe("first draft, typo fixed");
    const bad = (await hostCall(
      host,
      host.rewriteTranscriptEntries,
      H.RewriteTranscriptEntriesRequest.fromPartial({ session, rewrites: [{ entryId: "no-such-entry", message: user("x") }] }),
      token,
    ).catch((e) => e)) as ServiceError;
    expect(bad.code).toBe(status.INVALID_ARGUMENT);
    expect(bad.details).toContain("no-such-entry");
  });

  it("Complete answers FAILED_PRECONDITION while no summarizer model is configured", async () => {
    const err = (await hostCall(host, host.complete, H.CompleteRequest.fromPartial({ session, system: "s" }), token).catch((e) => e)) as ServiceError;
    expect(err.code).toBe(status.FAILED_PRECONDITION);
    expect(err.details).toContain("summarizer");
  });
});

describe("on_failure: strict", () => {
  let contextd: ContextdProcess;
  let engine: EngineProcess;

  beforeAll(async () => {
    contextd = await startContextd({ config: { slots: { context_engine: "strict-py" }, engines: { overrides: { "strict-py": { on_failure: "strict" } } } } });
    engine = await startPythonEngine({ engineId: "strict-py", registry: contextd.address, owner: "team", control: { assemble: "throw" } });
    expect((await engine.registered).ok).toBe(true);
  });
  afterAll(async () => {
    await engine?.stop().catch(() => undefined);
    await contextd?.cleanup();
  });

  it("fails closed with a clear status instead of answering from legacy", async () => {
    const cx = new ContextdClient({ address: contextd.address });
    try {
      await cx.appendMessages({ session: { sessionId: "s" }, messages: [user("hi")] });
      const err = (await cx.assemble({ session: { sessionId: "s" }, tokenBudget: 1_000 }).catch((e) => e)) as ServiceError;
      expect(err.code).toBe(status.UNAVAILABLE);
      expect(err.details).toContain('engine "strict-py" failed on assemble');
      expect(err.details).toContain("strict");
      // Quarantined now: a strict slot still fails closed rather than answering from legacy.
      const again = (await cx.assemble({ session: { sessionId: "s" }, tokenBudget: 1_000 }).catch((e) => e)) as ServiceError;
      expect(again.code).toBe(status.UNAVAILABLE);
      expect(again.details).toContain("quarantined");
    } finally {
      cx.close();
    }
  });
});
