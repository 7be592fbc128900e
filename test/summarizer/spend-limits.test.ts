/**
 * `compaction.summarizer.limits` through a real contextd and a chat-completions stand-in: an agent
 * over its hour of the model gets extractive summaries (said in the compaction's details) and its
 * engines' HostService.Complete is refused RESOURCE_EXHAUSTED — with no request reaching the model —
 * while another agent, whose own limit is higher, is not affected; every request and refusal is counted.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorReason } from "../../src/contract/gen/contextd/v1/errors.js";
import { CompactionTarget } from "../../src/contract/gen/contextd/v1/types.js";
import { errorDetails } from "../../src/contract/error-details.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { assistant, user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { parsePrometheus, sampleValue } from "../observability/prometheus-text.js";
import { completion, startChatServer, type ChatServer } from "./chat-server.js";
import { completeCaller, type CompleteCaller } from "./complete-caller.js";

/** ~9k tokens of short turns (150 of them): one model request per compaction. */
function history() {
  const messages = [];
  for (let i = 1; i <= 150; i++) {
    messages.push(user(`Step ${i}: reconcile ledger batch ${1000 + i} against the invoice export for region ${i % 7} and list every mismatch.`));
    messages.push(assistant(`Batch ${1000 + i}: entry L-${i * 17} differs (expected 1${i}.00 EUR, found 1${i}.50 EUR); flagged for review.`));
  }
  return messages;
}

describe("per-agent spend limits on the summarizer model", () => {
  let server: ChatServer;
  let contextd: ContextdProcess;
  let cx: ContextdClient;
  let n = 0;

  beforeAll(async () => {
    server = await startChatServer();
    server.respond = () =>
      completion("## Goal\n- reconcile the ledger batches against the invoice export", { prompt_tokens: 900, completion_tokens: 40, total_tokens: 940 });
    contextd = await startContextd({
      config: {
        compaction: {
          keep_recent_tokens: 2_000,
          summary_max_chars: 3_000,
          summarizer: {
            kind: "openai",
            base_url: server.baseUrl,
            model: "contextd-test-model",
            api_key_env: "TEST_SUMMARIZER_KEY",
            max_retries: 0,
            // One model request an hour for every agent; `roomy` has no limit of its own.
            limits: { calls_per_hour: 1, agents: { roomy: { calls_per_hour: 0, tokens_per_hour: 0 } } },
          },
        },
        slots: { agents: { "engine-agent": "complete-engine" } },
        engines: { timeouts: { assemble: "60s" } },
      },
      env: { TEST_SUMMARIZER_KEY: "sk-spend-test" },
    });
    cx = new ContextdClient({ address: contextd.address, timeoutMs: 60_000 });
  }, 60_000);
  afterAll(async () => {
    cx?.close();
    await contextd?.cleanup();
    await server?.close();
  });

  const compactFor = async (agentId: string) => {
    const session = { sessionId: `spend-${++n}`, agentId };
    await cx.appendMessages({ session, messages: history() });
    const res = await cx.compact({ session, tokenBudget: 200_000, force: true, compactionTarget: CompactionTarget.COMPACTION_TARGET_THRESHOLD });
    expect(res.compacted, res.reason).toBe(true);
    return res.result!.details!;
  };
  const scrape = async () => parsePrometheus(await (await fetch(`http://${contextd.metricsAddress}/metrics`)).text());

  it("an agent over its hour gets the extractive summary, said in the details, and the model hears nothing", async () => {
    expect(await compactFor("tight")).toMatchObject({ summarizer: "openai", summarizer_requests: 1 });
    const requests = server.requests.length;
    const limited = await compactFor("tight");
    expect(limited).toMatchObject({ summarizer: "extractive", summarizer_fallback_from: "openai", summarizer_spend_limited: true, summarizer_requests: 0 });
    expect(String(limited.summarizer_fallback_reason)).toContain("compaction.summarizer.limits.calls_per_hour is 1");
    expect(server.requests.length).toBe(requests);
  });

  it("another agent's limit is its own: roomy (no limit) keeps the model", async () => {
    for (let i = 0; i < 3; i++) {
      const d = await compactFor("roomy");
      expect(d, JSON.stringify(d)).toMatchObject({ summarizer: "openai" });
    }
  });

  describe("HostService.Complete shares the agent's hour", () => {
    let caller: CompleteCaller;
    const session = { sessionId: "spend-complete", agentId: "engine-agent" };

    beforeAll(async () => {
      caller = await completeCaller(contextd, cx, session, "complete-engine");
    }, 60_000);
    afterAll(() => caller?.close());

    const complete = () => caller.complete({ system: "Answer briefly.", messages: [user("2 + 2?")] }).done;

    it("the first call of the hour is answered; the next is RESOURCE_EXHAUSTED MODEL_SPEND_LIMITED naming the limit, without a request", async () => {
      expect((await complete()).text).toContain("reconcile");
      const requests = server.requests.length;
      const err = (await complete().catch((e: unknown) => e)) as ServiceError;
      expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(err.details).toContain('agent "engine-agent" used 1 model calls in the last hour');
      const details = errorDetails(err)!;
      expect(details.reason).toBe(ErrorReason[ErrorReason.MODEL_SPEND_LIMITED]);
      expect(details.metadata).toMatchObject({ limit: "compaction.summarizer.limits.calls_per_hour", limit_value: "1", used: "1", attempts: "0" });
      expect(server.requests.length).toBe(requests);
    });
  });

  it("requests, tokens and refusals are counted by purpose", async () => {
    const samples = await scrape();
    // tight 1 + roomy 3 summaries; one Complete.
    expect(sampleValue(samples, "contextd_model_requests_total", { purpose: "summary" })).toBe(4);
    expect(sampleValue(samples, "contextd_model_tokens_total", { purpose: "summary" })).toBe(4 * 940);
    expect(sampleValue(samples, "contextd_model_requests_total", { purpose: "complete" })).toBe(1);
    expect(sampleValue(samples, "contextd_model_spend_limited_total", { purpose: "summary" })).toBe(1);
    expect(sampleValue(samples, "contextd_model_spend_limited_total", { purpose: "complete" })).toBe(1);
  });
});
