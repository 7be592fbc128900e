import { randomBytes } from "node:crypto";
import { credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuditServiceClient, ListAuditEventsRequest, type AuditEvent, type ListAuditEventsResponse } from "../../src/contract/gen/contextd/v1/audit.js";
import { ContextdClient } from "../../src/sdk/runtime-client.js";
import { user } from "../fixtures/messages.js";
import { startContextd, type ContextdProcess } from "../helpers/contextd-process.js";
import { refusal, registryClient } from "../helpers/registry-client.js";
import { run } from "../cli/run-contextctl.js";

const secret = () => randomBytes(18).toString("base64url");
const TOKENS = { acme: secret(), globex: secret(), operator: secret(), runtime: secret() };
const ENV = { AT_ACME: TOKENS.acme, AT_GLOBEX: TOKENS.globex, AT_OPERATOR: TOKENS.operator, AT_RUNTIME: TOKENS.runtime };
/** Planted in message content and an imported file: must reach no audit record. */
const PLANTED = `planted-${secret()}`;

function authConfig(reserved: string[]) {
  return {
    auth: {
      required: true,
      owners: { acme: { token_env: "AT_ACME", engines: reserved }, globex: { token_env: "AT_GLOBEX" } },
      operators: [{ token_env: "AT_OPERATOR", name: "ops" }],
      runtimes: [{ token_env: "AT_RUNTIME", name: "web" }],
    },
    log_level: "info",
  };
}

function listAudit(address: string, request: Partial<ListAuditEventsRequest>, token: string | null = TOKENS.operator): Promise<ListAuditEventsResponse> {
  const client = new AuditServiceClient(address, credentials.createInsecure());
  const md = new Metadata();
  if (token) md.set("authorization", `Bearer ${token}`);
  return new Promise<ListAuditEventsResponse>((resolve, reject) =>
    client.listAuditEvents(ListAuditEventsRequest.fromPartial(request), md, (err: ServiceError | null, res: ListAuditEventsResponse) =>
      err ? reject(err) : resolve(res),
    ),
  ).finally(() => client.close());
}

/** Every record, newest first, following pages of `pageSize`. */
async function allRecords(address: string, pageSize: number, filters: Partial<ListAuditEventsRequest> = {}): Promise<AuditEvent[]> {
  const out: AuditEvent[] = [];
  let pageToken = "";
  do {
    const page = await listAudit(address, { ...filters, pageSize, pageToken });
    expect(page.events.length).toBeLessThanOrEqual(pageSize);
    out.push(...page.events);
    pageToken = page.nextPageToken;
  } while (pageToken);
  return out;
}

/**
 * The audit trail against a real contextd with auth required: every audited RPC — allowed or
 * refused — is recorded with the credential's name, the action, the ids it acted on, the caller's
 * address and the outcome; the configuration's reservation changes are recorded once; operators
 * read it (RPC and `contextctl audit`), nobody else; no record holds message content or a token.
 */
describe("audit trail", () => {
  let cd: ContextdProcess;
  let cx: ContextdClient;

  beforeAll(async () => {
    cd = await startContextd({ config: authConfig(["lossless"]), env: ENV });
    cx = new ContextdClient({ address: cd.address, token: TOKENS.runtime });
  });

  afterAll(async () => {
    cx?.close();
    await cd?.cleanup();
  });

  it("records every operator and owner action, allowed or refused, with who, what, when, from where and the outcome", async () => {
    const started = Date.now();
    const session = { sessionId: "audited-1", agentId: "main" };
    await cx.appendMessages({ session, messages: [user(`remember ${PLANTED}`)] });
    await cx.exportTranscript({ session });
    await cx.importTranscript({
      session: { sessionId: "audited-2", agentId: "main" },
      jsonl: Buffer.from(`${JSON.stringify({ role: "user", content: PLANTED })}\n`),
    });
    await cx.deleteSession({ session });
    const registry = registryClient(cd.address);
    try {
      // An owner's registration the handler refuses (no endpoint), another owner's claim, a runtime isolating, an operator's isolate and release of an unknown engine.
      expect((await refusal(registry.register({ engineId: "lossless", owner: "acme" }, TOKENS.acme))).code).toBe(status.INVALID_ARGUMENT);
      expect((await refusal(registry.register({ engineId: "lossless", owner: "acme", endpoint: "127.0.0.1:1" }, TOKENS.globex))).code).toBe(
        status.PERMISSION_DENIED,
      );
      expect((await refusal(registry.isolate("lossless", `because ${PLANTED}`, TOKENS.runtime))).code).toBe(status.PERMISSION_DENIED);
      expect((await refusal(registry.isolate("lossless", "investigating", TOKENS.operator))).code).toBe(status.NOT_FOUND);
      expect((await refusal(registry.clear("lossless", TOKENS.operator))).code).toBe(status.NOT_FOUND);
      expect((await refusal(registry.deregister("lossless", TOKENS.operator))).code).toBe(status.NOT_FOUND);
    } finally {
      registry.close();
    }
    // Reads are not audited.
    await cx.listSessions({});

    const records = (await listAudit(cd.address, { sinceMs: started, pageSize: 100 })).events.reverse();
    expect(records.map((r) => [r.actor, r.action, r.target, r.outcome])).toEqual([
      ["runtime web", "session.export", "session audited-1 agent main", "OK"],
      ["runtime web", "session.import", "session audited-2 agent main", "OK"],
      ["runtime web", "session.delete", "session audited-1 agent main", "OK"],
      ["owner acme", "engine.register", "engine lossless owner acme", "INVALID_ARGUMENT"],
      ["owner globex", "engine.register", "engine lossless owner acme", "PERMISSION_DENIED"],
      ["runtime web", "engine.isolate", "engine lossless", "PERMISSION_DENIED"],
      ["operator ops", "engine.isolate", "engine lossless", "NOT_FOUND"],
      ["operator ops", "engine.release", "engine lossless", "NOT_FOUND"],
      ["operator ops", "engine.deregister", "engine lossless", "NOT_FOUND"],
    ]);
    for (const r of records) {
      expect(r.atMs).toBeGreaterThanOrEqual(started);
      expect(r.atMs).toBeLessThanOrEqual(Date.now());
      expect(r.peer).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(r.method).toMatch(/^\/contextd\.v1\.(Session|Registry)Service\//);
      expect(r.requestId).not.toBe("");
    }
    // Never the content of a message, never a token: in the records or in the log's audit lines.
    const auditLines = cd.logLines().filter((l) => l.msg === "audit");
    expect(auditLines.length).toBeGreaterThanOrEqual(records.length);
    const seen = JSON.stringify(records) + JSON.stringify(auditLines);
    expect(seen).not.toContain(PLANTED);
    for (const token of Object.values(TOKENS)) expect(cd.logs()).not.toContain(token);
    expect(seen).not.toContain("investigating");
  });

  it("the configuration's reservation changes are recorded, once, by `config`", async () => {
    const added = async (address: string) => (await allRecords(address, 50, { actor: "config" })).map((r) => `${r.action} ${r.target}`);
    await expect.poll(() => added(cd.address)).toEqual(["reservation.add reservation lossless owner acme"]);
    const restarted = await cd.restart({ config: authConfig(["recall"]), env: ENV });
    cd = restarted;
    cx.close();
    cx = new ContextdClient({ address: cd.address, token: TOKENS.runtime });
    await expect
      .poll(() => added(cd.address))
      .toEqual([
        "reservation.add reservation recall owner acme",
        "reservation.remove reservation lossless owner acme",
        "reservation.add reservation lossless owner acme",
      ]);
  });

  it("operators read it a page at a time and by filter; any other credential is refused", async () => {
    const all = await allRecords(cd.address, 1000);
    const paged = await allRecords(cd.address, 2);
    expect(paged).toEqual(all);
    expect(new Set(paged.map((r) => r.id)).size).toBe(paged.length);
    const deletes = await allRecords(cd.address, 2, { action: "session.delete" });
    expect(deletes.map((r) => r.target)).toEqual(["session audited-1 agent main"]);
    const ops = await allRecords(cd.address, 3, { actor: "operator ops" });
    expect(ops.length).toBe(3);
    expect((await listAudit(cd.address, { sinceMs: Date.now() + 60_000 })).events).toEqual([]);
    for (const token of [TOKENS.runtime, TOKENS.acme]) expect((await refusal(listAudit(cd.address, {}, token))).code).toBe(status.PERMISSION_DENIED);
    expect((await refusal(listAudit(cd.address, {}, null))).code).toBe(status.UNAUTHENTICATED);
    expect((await refusal(listAudit(cd.address, { pageToken: "not-a-token" }))).code).toBe(status.INVALID_ARGUMENT);
  });

  it("contextctl audit lists the trail with filters, with an operator token", async () => {
    const table = await run(["--address", cd.address, "audit", "--since", "1h", "--action", "session.delete"], { CONTEXTD_ADMIN_TOKEN: TOKENS.operator });
    expect(table.stderr).toBe("");
    expect(table.code).toBe(0);
    expect(table.stdout).toContain("session audited-1 agent main");
    expect(table.stdout).toContain("runtime web");
    const json = await run(["--address", cd.address, "--json", "audit", "--actor", "operator ops", "--limit", "2"], { CONTEXTD_ADMIN_TOKEN: TOKENS.operator });
    expect(json.code).toBe(0);
    const events = (JSON.parse(json.stdout) as { events: { actor: string; action: string }[] }).events;
    expect(events).toHaveLength(2);
    expect(events.every((e) => e.actor === "operator ops")).toBe(true);
    const denied = await run(["--address", cd.address, "audit"], { CONTEXTD_RUNTIME_TOKEN: TOKENS.runtime });
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain("PERMISSION_DENIED");
  });
});
