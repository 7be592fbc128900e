/**
 * HostService.Complete as a sidecar engine calls it: a host token lives only while its engine call
 * does, so the TS test engine (`engineId`, routed for `session`'s agent) is told to hold an Assemble
 * for a minute and to leak that call's host token; Complete is then called with it, over real gRPC.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { credentials, Metadata } from "@grpc/grpc-js";
import { expect } from "vitest";
import * as H from "../../src/contract/gen/contextd/v1/host.js";
import type { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import type { ContextdProcess } from "../helpers/contextd-process.js";
import { readLeakedHostContext, startTsEngine } from "../helpers/engine-process.js";

export interface CompleteCaller {
  /** One Complete with the held call's token; `cancel` cancels the gRPC call. */
  complete(req: H.DeepPartial<H.CompleteRequest>, timeoutMs?: number): { done: Promise<H.CompleteResponse>; cancel(): void };
  close(): Promise<void>;
}

export async function completeCaller(
  contextd: ContextdProcess,
  cx: ContextdClient,
  session: { sessionId: string; agentId: string },
  engineId: string,
): Promise<CompleteCaller> {
  const leak = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "contextd-complete-")), "host.json");
  const engine = await startTsEngine({
    engineId,
    registry: contextd.address,
    owner: "team",
    control: { assemble: "slow", slow_ms: 60_000, leak_host_token_to: leak },
  });
  expect((await engine.registered).ok).toBe(true);
  await cx.appendMessages({ session, messages: [user("hello")] });
  void cx.assemble({ session, tokenBudget: 100_000 }, { timeoutMs: 90_000 }).catch(() => undefined);
  await engine.waitForEvent((e) => e.event === "call" && e.op === "assemble");
  const token = readLeakedHostContext(leak)!.token;
  const host = new H.HostServiceClient(contextd.address, credentials.createInsecure());
  return {
    complete(req, timeoutMs = 20_000) {
      const md = new Metadata();
      md.set("authorization", `Bearer ${token}`);
      let cancel = () => {};
      const done = new Promise<H.CompleteResponse>((resolve, reject) => {
        const call = host.complete(H.CompleteRequest.fromPartial({ session, ...req }), md, { deadline: new Date(Date.now() + timeoutMs) }, (e, r) =>
          e ? reject(e) : resolve(r),
        );
        cancel = () => call.cancel();
      });
      return { done, cancel };
    },
    async close() {
      host.close();
      await engine.stop().catch(() => undefined);
    },
  };
}
