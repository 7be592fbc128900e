import type { Message } from "../contract/gen/contextd/v1/types.js";

export type TokenizerName = "o200k_base" | "cl100k_base" | "heuristic";

/** How a count on the counting threads (count-pool.ts) is scheduled and dropped. */
export interface CountOptions {
  /** Who the work is for (runtime token and agent, engine): the unit the pool is fair between. */
  tenant?: string;
  /** Fires when the caller has gone: the job's work not done yet is dropped and it rejects. */
  signal?: AbortSignal;
  /** The caller's deadline (epoch ms): past it the job is dropped and rejects DEADLINE_EXCEEDED. */
  deadlineMs?: number;
}

/** Totals since start, for the metrics endpoint. */
export interface CountPoolStats {
  /** Characters counted on threads. */
  countedChars: number;
  /** Characters of jobs whose caller had gone, left uncounted. */
  droppedChars: number;
  /** Jobs dropped because their caller had gone. */
  droppedJobs: number;
  /** Chunks counted by threads (reported when their jobs end). */
  chunks: number;
  /** Threads that failed or exited and were replaced. */
  threadFailures: number;
  /** Characters of live jobs not answered yet. */
  pendingChars: number;
}

/** Counts tokens of text and messages. Counts are taken once per entry, at append, and stored. */
export interface Tokenizer {
  readonly name: TokenizerName;
  /** Inline, on the calling thread: for text whose size is bounded (summaries, tools). */
  countText(text: string): number;
  /** Inline, on the calling thread: for messages whose size is bounded. */
  countMessage(message: Message): number;
  /**
   * The same counts as `countMessage`, for what a request brings (an append, an import, an
   * engine's answer): with `offload`, anything but a small count runs on the worker threads of
   * count-pool.ts in bounded chunks, fairly between `options.tenant`s, so that BPE over megabytes of
   * text never stalls the event loop; the work is dropped and the promise rejects CANCELLED /
   * DEADLINE_EXCEEDED when `options.signal` fires or `options.deadlineMs` passes.
   */
  countMessages(messages: readonly Message[], options?: CountOptions): Promise<number[]>;
  /** `countText` as `countMessages` counts: off the event loop with `offload`. */
  countTextAsync(text: string, options?: CountOptions): Promise<number>;
  /** The counting pool's totals (undefined without `offload`). */
  stats(): CountPoolStats | undefined;
}

export interface TokenizerOptions {
  /** Tokens an image block counts as (images are not tokenized). */
  imageTokens: number;
  /** Count on worker threads (contextd's server does; tools count inline). */
  offload: boolean;
}
