import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Metadata } from "@grpc/grpc-js";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { Authenticator, sha256Hex } from "../../../src/server/auth.js";
import { AuditTrail } from "../../../src/server/audit-trail.js";
import { SqliteStore } from "../../../src/store/sqlite/sqlite-store.js";
import { reservationChanges } from "../../../src/store/audit-records.js";
import type { AuditRecord } from "../../../src/store/types.js";

const OPERATOR = "operator-token-for-the-audit-test";
const DAY = 86_400_000;

const dirs: string[] = [];
const stores: SqliteStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function store(): SqliteStore {
  const dir = mkdtempSync(join(tmpdir(), "contextd-audit-"));
  dirs.push(dir);
  const s = SqliteStore.open(join(dir, "contextd.db"));
  stores.push(s);
  return s;
}

function trail(s: SqliteStore, reservations: [string, string][] = []): AuditTrail {
  const auth = new Authenticator({ required: true, owners: {}, operators: [{ token_sha256: sha256Hex(OPERATOR), name: "ops" }], runtimes: [] }, {});
  return new AuditTrail(s, auth, { retentionMs: 30 * DAY, reservations }, pino({ level: "silent" }));
}

const record = (atMs: number, action = "session.delete"): AuditRecord => ({
  atMs,
  actor: "operator ops",
  action,
  target: "session s",
  peer: "127.0.0.1:1",
  outcome: "OK",
  method: "/contextd.v1.SessionService/DeleteSession",
  requestId: "r",
});

describe("AuditTrail", () => {
  it("records a call under the name of the credential it presented, never the token", async () => {
    const s = store();
    const md = new Metadata();
    md.set("authorization", `Bearer ${OPERATOR}`);
    await trail(s).record({
      action: "engine.isolate",
      target: "engine e1",
      method: "/contextd.v1.RegistryService/QuarantineEngine",
      requestId: "req-1",
      metadata: md,
      peerCertificate: undefined,
      peer: "10.0.0.7:51234",
      outcome: "OK",
    });
    const [r] = await s.listAudit({ sinceMs: 0, untilMs: 0, actor: "", action: "", beforeId: 0, limit: 10 });
    expect(r).toMatchObject({ actor: "operator ops", action: "engine.isolate", target: "engine e1", peer: "10.0.0.7:51234", requestId: "req-1" });
    expect(JSON.stringify(r)).not.toContain(OPERATOR);
  });

  it("deletes the records past the retention and keeps the others", async () => {
    const s = store();
    const now = Date.now();
    for (const age of [40, 31, 29, 1]) await s.appendAudit(record(now - age * DAY));
    expect(await trail(s).prune(now)).toBe(2);
    const left = await s.listAudit({ sinceMs: 0, untilMs: 0, actor: "", action: "", beforeId: 0, limit: 10 });
    expect(left.map((r) => Math.round((now - r.atMs) / DAY))).toEqual([1, 29]);
  });

  it("records the configuration's reservation changes once: a second start with the same configuration records nothing", async () => {
    const s = store();
    await trail(s, [["lossless", "acme"]]).syncReservations();
    await trail(s, [["lossless", "acme"]]).syncReservations();
    await trail(s, [["lossless", "globex"]]).syncReservations();
    const records = await s.listAudit({ sinceMs: 0, untilMs: 0, actor: "config", action: "", beforeId: 0, limit: 10 });
    expect(records.reverse().map((r) => `${r.action} ${r.target}`)).toEqual([
      "reservation.add reservation lossless owner acme",
      "reservation.remove reservation lossless owner acme",
      "reservation.add reservation lossless owner globex",
    ]);
  });

  it("pages newest first by id, with every filter applied in the query", async () => {
    const s = store();
    for (let i = 0; i < 5; i++) await s.appendAudit(record(1000 + i, i % 2 ? "engine.isolate" : "session.delete"));
    const first = await s.listAudit({ sinceMs: 0, untilMs: 0, actor: "", action: "session.delete", beforeId: 0, limit: 2 });
    expect(first.map((r) => r.atMs)).toEqual([1004, 1002]);
    const next = await s.listAudit({ sinceMs: 0, untilMs: 0, actor: "", action: "session.delete", beforeId: first[1].id, limit: 2 });
    expect(next.map((r) => r.atMs)).toEqual([1000]);
    expect((await s.listAudit({ sinceMs: 1001, untilMs: 1003, actor: "", action: "", beforeId: 0, limit: 10 })).map((r) => r.atMs)).toEqual([1002, 1001]);
  });
});

describe("reservationChanges", () => {
  it("an owner change is a removal and an addition; unchanged ids are no change", () => {
    const before = new Map([
      ["a", "x"],
      ["b", "y"],
    ]);
    const after = new Map([
      ["b", "z"],
      ["c", "x"],
    ]);
    expect(reservationChanges(before, after)).toEqual([
      { engineId: "a", owner: "x", change: "remove" },
      { engineId: "b", owner: "y", change: "remove" },
      { engineId: "b", owner: "z", change: "add" },
      { engineId: "c", owner: "x", change: "add" },
    ]);
    expect(reservationChanges(after, after)).toEqual([]);
  });
});
