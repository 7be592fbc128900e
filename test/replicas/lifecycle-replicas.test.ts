import { randomBytes } from "node:crypto";
import { credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuditServiceClient, ListAuditEventsRequest, type ListAuditEventsResponse } from "../../src/contract/gen/contextd/v1/audit.js";
import { ErrorReason } from "../../src/contract/gen/contextd/v1/errors.js";
import { ContextdClient, errorReason } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { refusal } from "../helpers/registry-client.js";
import { startReplicas, stopReplicas, type Replica } from "../helpers/replicas.js";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/scratch-postgres.js";

const OPERATOR = randomBytes(18).toString("base64url");
const RUNTIME = randomBytes(18).toString("base64url");
const OWNER = randomBytes(18).toString("base64url");

function listAudit(address: string, request: Partial<ListAuditEventsRequest>): Promise<ListAuditEventsResponse> {
  const client = new AuditServiceClient(address, credentials.createInsecure());
  const md = new Metadata();
  md.set("authorization", `Bearer ${OPERATOR}`);
  return new Promise<ListAuditEventsResponse>((resolve, reject) =>
    client.listAuditEvents(ListAuditEventsRequest.fromPartial(request), md, (err: ServiceError | null, res: ListAuditEventsResponse) =>
      err ? reject(err) : resolve(res),
    ),
  ).finally(() => client.close());
}

/**
 * The audit trail and the quotas with several replicas on one PostgreSQL database: a record written
 * at one replica is read at another, the configuration's reservations are recorded once however
 * many replicas start with it, and an agent's quota counts its sessions wherever they were made.
 */
describe("audit trail and quotas across replicas (PostgreSQL)", () => {
  let db: ScratchDatabase;
  let replicas: Replica[];

  beforeAll(async () => {
    db = await createScratchDatabase();
    replicas = await startReplicas(2, {
      store: db.url(),
      config: {
        auth: {
          required: true,
          owners: { acme: { token_env: "LR_OWNER", engines: ["lossless"] } },
          operators: [{ token_env: "LR_OPERATOR", name: "ops" }],
          runtimes: [{ token_env: "LR_RUNTIME", name: "web" }],
        },
        quotas: { max_sessions: 1 },
      },
      env: { LR_OPERATOR: OPERATOR, LR_RUNTIME: RUNTIME, LR_OWNER: OWNER },
    });
  }, 120_000);

  afterAll(async () => {
    if (replicas) await stopReplicas(replicas);
    await db?.drop();
  });

  it("a session deleted at one replica is in the audit trail every replica reads; the reservations were recorded once", async () => {
    const [a, b] = replicas.map((r) => new ContextdClient({ address: r.address, token: RUNTIME }));
    try {
      await a.appendMessages({ session: { sessionId: "x-1", agentId: "main" }, messages: [user("hello")] });
      await b.deleteSession({ session: { sessionId: "x-1", agentId: "main" } });
    } finally {
      a.close();
      b.close();
    }
    for (const r of replicas) {
      const deletes = (await listAudit(r.address, { action: "session.delete" })).events;
      expect(deletes.map((e) => [e.actor, e.target, e.outcome])).toEqual([["runtime web", "session x-1 agent main", "OK"]]);
      await expect
        .poll(async () => (await listAudit(r.address, { actor: "config" })).events.map((e) => `${e.action} ${e.target}`))
        .toEqual(["reservation.add reservation lossless owner acme"]);
    }
  });

  it("an agent's session quota counts the sessions it holds at every replica", async () => {
    const [a, b] = replicas.map((r) => new ContextdClient({ address: r.address, token: RUNTIME }));
    try {
      await a.appendMessages({ session: { sessionId: "q-1", agentId: "quota" }, messages: [user("first")] });
      const err = await refusal(b.appendMessages({ session: { sessionId: "q-2", agentId: "quota" }, messages: [user("second")] }));
      expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(errorReason(err)).toBe(ErrorReason.QUOTA_EXCEEDED);
      expect((await refusal(a.getSession({ session: { sessionId: "q-2" } }))).code).toBe(status.NOT_FOUND);
      const usage = (await b.getSession({ session: { sessionId: "q-1" } })).agentUsage!;
      expect(usage.sessions).toBe(1);
      expect(usage.maxSessions).toBe(1);
      expect(usage.storedBytes).toBeGreaterThan(0);
    } finally {
      a.close();
      b.close();
    }
  });
});
