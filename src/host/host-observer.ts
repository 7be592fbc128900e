/**
 * What the host tells its observer (the server's metrics, src/server/observability): appends and
 * compactions as they happen. The host works without one.
 */
export type CompactionOutcome = "committed" | "nothing" | "conflict" | "discarded";

export interface HostObserver {
  appended(messages: number, tokens: number): void;
  /** A compaction produced under `engineId` ended so; tokens and duration when known. */
  compaction(engineId: string, outcome: CompactionOutcome, tokensBefore: number, tokensAfter: number, seconds?: number): void;
}

export const NO_OBSERVER: HostObserver = {
  appended: () => {},
  compaction: () => {},
};
