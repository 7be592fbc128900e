/**
 * The audit trail's records as the store keeps them (table `audit_events`, both stores): one per
 * operator or owner action, written by the server's audit step (src/server/middleware/audit-step.ts)
 * and read by AuditService.ListAuditEvents. Identifiers and outcomes only: never message content,
 * never a token.
 */
export interface AuditRecord {
  atMs: number;
  /** `<role> <token name>`, `anonymous`, `config`, `contextctl`. */
  actor: string;
  /** `engine.register`, `session.delete`, ... (proto/contextd/v1/audit.proto lists them). */
  action: string;
  /** What it was done to, by id only. */
  target: string;
  /** The caller's address (grpc-js getPeer), "" for none. */
  peer: string;
  /** The gRPC status code name of the outcome (`OK`, `PERMISSION_DENIED`, ...). */
  outcome: string;
  /** The RPC's path, "" for an action no RPC made. */
  method: string;
  requestId: string;
}

/** A record as stored: with its id, increasing in write order. */
export interface StoredAuditRecord extends AuditRecord {
  id: number;
}

/** A page of the trail, newest first: records with id < `beforeId` (0: from the newest) that match every filter given. */
export interface AuditQuery {
  sinceMs: number;
  /** 0: no upper bound. */
  untilMs: number;
  /** "" for any. */
  actor: string;
  /** "" for any. */
  action: string;
  beforeId: number;
  limit: number;
}

/** An engine id reservation the configuration added or removed since the store last saw it (syncReservations). */
export interface ReservationChange {
  engineId: string;
  owner: string;
  change: "add" | "remove";
}

/** The audit records of reservation changes: made by `config`, at `atMs`. */
export function reservationRecords(changes: readonly ReservationChange[], atMs: number): AuditRecord[] {
  return changes.map((c) => ({
    atMs,
    actor: "config",
    action: `reservation.${c.change}`,
    target: `reservation ${c.engineId} owner ${c.owner}`,
    peer: "",
    outcome: "OK",
    method: "",
    requestId: "",
  }));
}

/** The changes from `stored` to `configured` ([engineId, owner] pairs), in engine id order. */
export function reservationChanges(stored: ReadonlyMap<string, string>, configured: ReadonlyMap<string, string>): ReservationChange[] {
  const changes: ReservationChange[] = [];
  const ids = [...new Set([...stored.keys(), ...configured.keys()])].sort();
  for (const engineId of ids) {
    const before = stored.get(engineId);
    const after = configured.get(engineId);
    if (before === after) continue;
    if (before !== undefined) changes.push({ engineId, owner: before, change: "remove" });
    if (after !== undefined) changes.push({ engineId, owner: after, change: "add" });
  }
  return changes;
}

/** What an agent holds in the store (the quotas count it: src/host/agent-quotas.ts). */
export interface AgentUsage {
  sessions: number;
  storedBytes: number;
}
