import { randomUUID } from "node:crypto";
import { status, type ContextdClient, type ServiceError } from "contextd/client";
import type { AgentInputItem, Session } from "@openai/agents";
import { itemToMessage, messageToItem } from "./items.js";

export interface ContextdSessionOptions {
  /** A contextd runtime client (`new ContextdClient({ address, token })`); the session does not close it. */
  client: ContextdClient;
  /** The contextd session id. Default: a new random one. */
  sessionId?: string;
  /** The agent the session belongs to (selects the engine through `slots.agents`). */
  agentId?: string;
  /** What the model's history must fit, in contextd's tokens (AssembleRequest.token_budget). Default 32000. */
  tokenBudget?: number;
  /** The model the context is for, passed to the engine. */
  model?: string;
  /** Deadline of each contextd call, ms. Default 5000. */
  timeoutMs?: number;
  /** Called when contextd could not be reached and the session carried on without it. */
  onUnreachable?: (error: ServiceError, during: "getItems" | "addItems") => void;
}

/** A message key of this integration: the identity contextd stores an item under (AppendMessagesRequest.message_keys). */
export const MESSAGE_KEY_PREFIX = "openai-agents:";

/** popItem on an item contextd already holds: contextd's transcript is append-only. */
export class PopUnsupportedError extends Error {
  constructor() {
    super(
      "contextd keeps history append-only: the last item is already stored and cannot be removed. " +
        "Only an item not yet delivered to contextd (added while it was unreachable) can be popped; clearSession() removes everything.",
    );
    this.name = "PopUnsupportedError";
  }
}

/** Failures that mean "contextd is not there right now": the session carries on from its own items. */
const UNREACHABLE = new Set<number>([status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.CANCELLED, status.UNKNOWN, status.INTERNAL]);

function isUnreachable(error: unknown): error is ServiceError {
  return typeof (error as ServiceError)?.code === "number" && UNREACHABLE.has((error as ServiceError).code);
}

/** What SessionService.Assemble answers. */
export type AssembleResponse = Awaited<ReturnType<ContextdClient["assemble"]>>;

interface PendingBatch {
  items: AgentInputItem[];
  keys: string[];
  /** When the items were added: kept, so that a later delivery stores the same messages. */
  timestampMs: number;
}

/**
 * An Agents SDK `Session` whose history lives in contextd.
 *
 * - `addItems` appends the items to the contextd session, each under a message key
 *   (`openai-agents:<uuid>`) chosen when it is added, so a retried delivery is stored once.
 * - `getItems` answers contextd's *assembled context* (SessionService.Assemble at `tokenBudget`,
 *   compacting first when the history is over it), not the raw transcript: the runner sends what
 *   getItems answers to the model, so this is how the model gets contextd's compacted context.
 *   The whole transcript stays in contextd (GetTranscript, the history tools).
 * - contextd unreachable: items added are kept in order in memory and delivered, with the same
 *   keys, on the next call that reaches contextd; getItems answers the last context contextd gave
 *   followed by every item added since. Nothing is lost while the process lives, nothing is stored
 *   twice, and the run goes on.
 * - `popItem` removes an item that contextd does not hold yet; once delivered an item cannot be
 *   removed (contextd has no RPC that removes a transcript entry), so it throws PopUnsupportedError.
 * - `clearSession` deletes the contextd session (DeleteSession).
 */
export class ContextdSession implements Session {
  readonly sessionId: string;
  /** contextd's last Assemble answer (what the model got), for inspection. */
  lastAssembly: AssembleResponse | undefined;
  private readonly client: ContextdClient;
  private readonly opts: ContextdSessionOptions;
  private pending: PendingBatch[] = [];
  /** contextd's last context, as items, and every item added after it was assembled. */
  private lastContext: AgentInputItem[] = [];
  private since: AgentInputItem[] = [];
  /** Operations run one at a time, in call order: deliveries must not overtake each other. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(options: ContextdSessionOptions) {
    this.client = options.client;
    this.opts = options;
    this.sessionId = options.sessionId ?? randomUUID();
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** Items added but not delivered to contextd yet. */
  get undelivered(): number {
    return this.pending.reduce((n, b) => n + b.items.length, 0);
  }

  getItems(limit?: number): Promise<AgentInputItem[]> {
    return this.serial(async () => {
      let items: AgentInputItem[];
      try {
        await this.deliver();
        items = await this.assemble();
      } catch (error) {
        if (!isUnreachable(error)) throw error;
        this.opts.onUnreachable?.(error, "getItems");
        items = [...this.lastContext, ...this.since];
      }
      return limit === undefined ? items : limit <= 0 ? [] : items.slice(-limit);
    });
  }

  addItems(items: AgentInputItem[]): Promise<void> {
    if (items.length === 0) return Promise.resolve();
    const batch: PendingBatch = { items: structuredClone(items), keys: items.map(() => MESSAGE_KEY_PREFIX + randomUUID()), timestampMs: Date.now() };
    return this.serial(async () => {
      this.pending.push(batch);
      this.since.push(...batch.items);
      try {
        await this.deliver();
      } catch (error) {
        if (!isUnreachable(error)) throw error;
        this.opts.onUnreachable?.(error, "addItems");
      }
    });
  }

  popItem(): Promise<AgentInputItem | undefined> {
    return this.serial(async () => {
      const last = this.pending.at(-1);
      if (!last) {
        // Nothing is waiting for delivery: the last item is contextd's (or there is none).
        const held = await this.client.getSession({ session: { sessionId: this.sessionId } }, { timeoutMs: this.timeoutMs }).catch((e: ServiceError) => {
          if (e.code === status.NOT_FOUND) return undefined;
          throw e;
        });
        if (!held || Number(held.info?.messageCount ?? 0) === 0) return undefined;
        throw new PopUnsupportedError();
      }
      const item = last.items.pop();
      last.keys.pop();
      if (last.items.length === 0) this.pending.pop();
      this.since.pop();
      return item;
    });
  }

  clearSession(): Promise<void> {
    return this.serial(async () => {
      await this.client.deleteSession({ session: { sessionId: this.sessionId } }, { timeoutMs: this.timeoutMs }).catch((e: ServiceError) => {
        if (e.code !== status.NOT_FOUND) throw e;
      });
      this.pending = [];
      this.lastContext = [];
      this.since = [];
      this.lastAssembly = undefined;
    });
  }

  /** Delivers what contextd does not hold yet; rejects (keeping it) when contextd is unreachable. */
  flush(): Promise<void> {
    return this.serial(() => this.deliver());
  }

  private get timeoutMs(): number {
    return this.opts.timeoutMs ?? 5_000;
  }

  private get ref() {
    return { sessionId: this.sessionId, agentId: this.opts.agentId ?? "" };
  }

  private async deliver(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending[0];
      try {
        // Chunks within contextd's default limit of messages per append; keys make a resend harmless.
        for (let i = 0; i < batch.items.length; i += 500) {
          await this.client.appendMessages(
            {
              session: this.ref,
              messages: batch.items.slice(i, i + 500).map((item) => itemToMessage(item, batch.timestampMs)),
              messageKeys: batch.keys.slice(i, i + 500),
            },
            { timeoutMs: this.timeoutMs },
          );
        }
      } catch (error) {
        // A refusal that waiting will not heal (INVALID_ARGUMENT, PERMISSION_DENIED, …) is thrown once,
        // and the batch is dropped rather than blocking every later delivery.
        if (!isUnreachable(error)) this.pending.shift();
        throw error;
      }
      this.pending.shift();
    }
  }

  private async assemble(): Promise<AgentInputItem[]> {
    let answer: AssembleResponse;
    try {
      answer = await this.client.assemble(
        { session: this.ref, tokenBudget: this.opts.tokenBudget ?? 32_000, model: this.opts.model ?? "" },
        { timeoutMs: this.timeoutMs },
      );
    } catch (error) {
      // A session nothing was added to yet: an empty history.
      if ((error as ServiceError).code !== status.NOT_FOUND) throw error;
      this.lastContext = [];
      this.since = [];
      return [];
    }
    this.lastAssembly = answer;
    this.lastContext = answer.messages.map(messageToItem);
    this.since = [];
    return [...this.lastContext];
  }

  private serial<T>(op: () => Promise<T>): Promise<T> {
    const run = this.queue.then(op, op);
    this.queue = run.catch(() => undefined);
    return run;
  }
}
