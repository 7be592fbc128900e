import type { Logger } from "pino";
import type { AuditRecord, TranscriptStore } from "../store/types.js";
import type { Authenticator } from "./auth.js";
import type { AuditedCall } from "./middleware/audit-step.js";

/** How often audit records past their retention are deleted, and how many one statement deletes at most. */
const PRUNE_INTERVAL_MS = 3_600_000;
const PRUNE_BATCH = 10_000;

export interface AuditTrailSettings {
  /** How long records are kept (`audit.retention_days`). */
  retentionMs: number;
  /** Engine ids reserved by the configuration ([engineId, owner]): changes since the last start are recorded. */
  reservations: ReadonlyArray<readonly [string, string]>;
}

/**
 * The audit trail (docs/operations.md, "The audit trail"): where the pipeline's audit step
 * (middleware/audit-step.ts) hands each audited call — written to the store, so every replica
 * reads one trail (AuditService.ListAuditEvents), and to the log (`msg: "audit"`) — and the loop
 * that keeps it bounded: records older than the retention are deleted every hour (by every
 * replica; a delete finds nothing the second time). At start it records the configuration's
 * reservation changes (syncReservations: once across replicas).
 *
 * A record holds who (the name of the token's credential, never the token), what (the action and
 * the ids it was done to), when, from where and the outcome; never message content.
 */
export class AuditTrail {
  private timer: NodeJS.Timeout | undefined;
  private pruning: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: TranscriptStore,
    private readonly auth: Authenticator,
    private readonly settings: AuditTrailSettings,
    private readonly log: Logger,
  ) {}

  /** The audit step's sink: the call as a record, in the store and the log. */
  readonly record = async (call: AuditedCall): Promise<void> => {
    await this.write({
      atMs: Date.now(),
      actor: this.auth.actorOf(call.metadata, call.peerCertificate),
      action: call.action,
      target: call.target,
      peer: call.peer,
      outcome: call.outcome,
      method: call.method,
      requestId: call.requestId,
    });
  };

  /** A record of an action no RPC made (a reservation change, an offline restore). */
  async write(record: AuditRecord): Promise<void> {
    this.log.info({ audit: record }, "audit");
    await this.store.appendAudit(record);
  }

  /** Records the reservation changes since the store last saw the configuration's (once across replicas). */
  async syncReservations(): Promise<void> {
    const atMs = Date.now();
    const changes = await this.store.syncReservations(new Map(this.settings.reservations), atMs);
    for (const c of changes)
      this.log.info(
        { audit: { atMs, actor: "config", action: `reservation.${c.change}`, target: `reservation ${c.engineId} owner ${c.owner}`, outcome: "OK" } },
        "audit",
      );
  }

  start(): void {
    if (this.timer) return;
    void this.syncReservations().catch((err: unknown) => this.log.error({ err }, "audit: reservation changes not recorded"));
    const prune = () => {
      this.pruning = this.prune().then(
        () => undefined,
        (err: unknown) => this.log.warn({ err }, "audit: records past their retention not deleted (retried in an hour)"),
      );
    };
    prune();
    this.timer = setInterval(prune, PRUNE_INTERVAL_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.pruning;
  }

  /** Deletes every record past the retention, a batch a statement. */
  async prune(nowMs = Date.now()): Promise<number> {
    let deleted = 0;
    for (;;) {
      const n = await this.store.pruneAudit(nowMs - this.settings.retentionMs, PRUNE_BATCH);
      deleted += n;
      if (n < PRUNE_BATCH) return deleted;
    }
  }
}
