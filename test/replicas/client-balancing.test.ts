/**
 * Client-side balancing without a proxy (docs/deployment.md "In front of the replicas"): a grpc-js channel with
 * the round_robin policy over every replica's address — what `dns:///<name>:50051` gives when the
 * name has one A record per replica (a Kubernetes headless service, Docker's network aliases). Here
 * the addresses are listed with the `ipv4:` scheme (no DNS in tests); the channel's behaviour is the
 * same once a resolver returned them.
 *
 * Calls spread over both replicas, and keep succeeding (keyed appends, retried on UNAVAILABLE as
 * the runtime policy allows) while one replica drains and restarts. Legacy engine only.
 */
import { credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppendMessagesRequest, type AppendMessagesResponse, SessionServiceClient } from "../../src/contract/gen/contextd/v1/session.js";
import { Role } from "../../src/contract/gen/contextd/v1/types.js";
import { textMessage } from "../../src/contract/messages.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { startReplicas, stopReplicas, type Replica } from "../helpers/replicas.js";
import { expectExactlyOnce, readEntries, RuntimeStats, withRetries, type AckedAppend } from "../helpers/runtime-load.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";

describe("grpc-js round_robin over two replicas", () => {
  let db: ScratchDatabase;
  let replicas: Replica[];
  let channel: SessionServiceClient;

  beforeAll(async () => {
    db = await createScratchDatabase();
    // debug: each replica logs every call it answered ("ok"), which is how the spread is counted.
    replicas = await startReplicas(2, { store: db.url({ pool_max: 3 }), config: { log_level: "debug", health: { drain_delay: "500ms" } } });
    // The snippet of docs/deployment.md, with `ipv4:` instead of `dns:///contextd-replicas:50051`.
    channel = new SessionServiceClient(`ipv4:${replicas.map((r) => r.address).join(",")}`, credentials.createInsecure(), {
      "grpc.service_config": JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
    });
  });
  afterAll(async () => {
    channel?.close();
    if (replicas) await stopReplicas(replicas);
    await db?.drop();
  });

  const append = (req: AppendMessagesRequest) =>
    new Promise<AppendMessagesResponse>((resolve, reject) =>
      channel.appendMessages(req, new Metadata(), { deadline: new Date(Date.now() + 15_000) }, (err: ServiceError | null, res) =>
        err ? reject(err) : resolve(res),
      ),
    );
  const answered = (r: Replica) => r.history.reduce((n, p) => n + p.logLines().filter((l) => l.method === "AppendMessages" && l.msg === "ok").length, 0);

  it("spreads calls over the replicas and keeps answering while one of them restarts", async () => {
    const stats = new RuntimeStats();
    const acked: AckedAppend[] = [];
    let n = 0;
    const step = async () => {
      const key = `rr-${n}`;
      const texts = [`rr-${n++} hello`];
      const req = AppendMessagesRequest.fromPartial({
        session: { sessionId: "rr" },
        messages: texts.map((t) => textMessage(Role.ROLE_USER, t)),
        idempotencyKey: key,
      });
      const res = await withRetries(stats, "AppendMessages", true, () => append(req));
      acked.push({ key, texts, entryIds: res.entryIds, replayed: res.replayed });
    };
    for (let i = 0; i < 20; i++) await step();
    const before = replicas.map(answered);
    expect(before[0], "replica 1 answered calls").toBeGreaterThan(0);
    expect(before[1], "replica 2 answered calls").toBeGreaterThan(0);

    // One replica drains and restarts while calls go on.
    let restarting = true;
    const restart = replicas[0]!.restart().finally(() => (restarting = false));
    while (restarting) await step();
    const stopped = await restart;
    expect(stopped.exitCode).toBe(0);
    const restartedAt = acked.length;
    // The restarted replica gets calls again (round_robin reconnects to it).
    const fresh = () => replicas[0]!.current.logLines().filter((l) => l.method === "AppendMessages" && l.msg === "ok").length;
    while (fresh() === 0) await step();
    console.log(JSON.stringify({ test: "grpc-js round_robin", appends: acked.length, after_restart: acked.length - restartedAt, load: stats.summary() }));
    expect(stats.failures, JSON.stringify(stats.summary())).toEqual([]);
    const reader = new ContextdClient({ address: replicas[1]!.address });
    try {
      expectExactlyOnce(await readEntries(reader, "rr"), acked);
    } finally {
      reader.close();
    }
  });
});
