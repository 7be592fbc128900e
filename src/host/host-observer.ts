/**
 * What the host tells its observer (the server's metrics, src/server/observability): appends and
 * compactions as they happen. The host works without one.
 */
export type CompactionOutcome = "committed" | "nothing" | "conflict" | "discarded";

export interface HostObserver {
  appended(messages: number, tokens: number): void;
  /** A compaction produced under `engineId` ended so; tokens and duration when known. */
  compaction(engineId: string, outcome: CompactionOutcome, tokensBefore: number, tokensAfter: number, seconds?: number): void;
  /** Sessions deleted, by why (session-deletions.ts DeletionCause). */
  sessionsDeleted?(cause: string, count: number): void;
  /** One ForgetSession delivery attempt ended (forget-delivery.ts). */
  forgetDelivery?(engineId: string, outcome: "delivered" | "unsupported" | "failed"): void;
}

export const NO_OBSERVER: HostObserver = {
  appended: () => {},
  compaction: () => {},
};
