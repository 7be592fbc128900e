import { createMiddleware, type AgentMiddleware, type Runtime } from "langchain";
import { AIMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import type { ContextdClient } from "contextd/client";
import { KeyedAppender } from "../../shared/src/keyed-appender.js";
import { fromContextd, messageKey, toContextd } from "./message-mapping.js";
import { modelSystemMessage } from "./system-message.js";

/** What `contextdMiddleware` needs. */
export interface ContextdMiddlewareOptions {
  /** A contextd runtime client (`new ContextdClient({ address, token })` from `contextd/client`). */
  client: ContextdClient;
  /**
   * The session the conversation is: a fixed id, or one read from each run's runtime. Default: the
   * run's `configurable.thread_id` (`agent.invoke(input, { configurable: { thread_id } })`). No
   * session: the run passes through untouched.
   */
  sessionId?: string | ((runtime: Runtime<unknown>) => string | undefined);
  /** The agent the session is created under (selects its engine through `slots.agents`). */
  agentId?: string;
  /** What the assembled context must fit, in contextd's tokens. Default: `contextWindow` minus the model's `maxTokens`. */
  tokenBudget?: number;
  /** The model's context window, in tokens, when `tokenBudget` is not given. Default 32 000. */
  contextWindow?: number;
  /** Deadline of each contextd call, ms. Default 5000: past it the call goes on without contextd. */
  timeoutMs?: number;
  /** Told of every contextd call that failed (the model call went on with LangChain's own messages). */
  onError?: (error: unknown, during: "append" | "assemble" | "answer") => void;
}

const DEFAULT_CONTEXT_WINDOW = 32_000;

/**
 * An agent middleware for LangChain's `createAgent` (`middleware: [contextdMiddleware(...)]`) that
 * makes contextd decide what the model sees. Around every model call of the agent loop
 * (`wrapModelCall`; each step of a tool loop is one) it appends the conversation — the agent's
 * system message, then the state's messages — to the session (message keys make that idempotent:
 * what contextd holds already is not stored again), replaces the model's messages with contextd's
 * assembled context within the budget, and appends the model's answer (text, tool calls). When the
 * run ends (`afterAgent`) it appends what the run added after the last model call (the results of
 * a `returnDirect` tool).
 *
 * contextd unreachable, or refusing: the model call goes on with LangChain's own messages, and the
 * next call that reaches contextd appends every message it missed (they are in the agent's state)
 * — nothing is lost, nothing is stored twice.
 */
export function contextdMiddleware(options: ContextdMiddlewareOptions): AgentMiddleware {
  const { client } = options;
  const timeoutMs = options.timeoutMs ?? 5000;
  const appender = new KeyedAppender(client, { agentId: options.agentId, timeoutMs });
  // The system message of each session's last model call: afterAgent sees only the state's messages.
  const systems = new Map<string, BaseMessage[]>();

  const sessionOf = (runtime: Runtime<unknown>): string | undefined => {
    const id = typeof options.sessionId === "function" ? options.sessionId(runtime) : (options.sessionId ?? runtime.configurable?.thread_id);
    return typeof id === "string" && id ? id : undefined;
  };

  /** The conversation from position `from` on, each message with its key. */
  const append = (sessionId: string, conversation: readonly BaseMessage[], from = 0): Promise<void> =>
    appender.append(
      sessionId,
      conversation.map((m, i) => {
        const message = toContextd(m);
        return { message, key: messageKey(from + i, message) };
      }),
    );

  return createMiddleware({
    name: "ContextdMiddleware",

    wrapModelCall: async (request, handler) => {
      const sessionId = sessionOf(request.runtime as Runtime<unknown>);
      if (!sessionId) return handler(request);
      const system: BaseMessage[] = request.systemMessage.text === "" && !Array.isArray(request.systemMessage.content) ? [] : [request.systemMessage];
      remember(systems, sessionId, system);
      const conversation = [...system, ...request.messages];

      let next = request;
      let during: "append" | "assemble" = "append";
      try {
        await append(sessionId, conversation);
        during = "assemble";
        const maxTokens = (request.model as { maxTokens?: unknown }).maxTokens;
        const budget =
          options.tokenBudget ?? (options.contextWindow ?? DEFAULT_CONTEXT_WINDOW) - (typeof maxTokens === "number" && maxTokens > 0 ? maxTokens : 0);
        const assembled = await client.assemble(
          {
            session: { sessionId, agentId: options.agentId ?? "" },
            tokenBudget: Math.max(1, budget),
            availableTools: request.tools.map((t) => String((t as { name?: unknown }).name ?? "")).filter(Boolean),
          },
          { timeoutMs },
        );
        const messages = fromContextd(assembled.messages);
        // The leading system messages are the agent's system message (LangChain sends it first).
        const leading: BaseMessage[] = [];
        while (messages.length > 0 && SystemMessage.isInstance(messages[0])) leading.push(messages.shift()!);
        next = { ...request, messages, systemMessage: modelSystemMessage(leading, assembled.systemPromptAddition) };
      } catch (error) {
        // LangChain's own messages go to the model; the answer is still offered to contextd.
        options.onError?.(error, during);
      }

      const answer = await handler(next);
      if (AIMessage.isInstance(answer)) {
        try {
          await append(sessionId, [answer], conversation.length);
        } catch (error) {
          // The answer is in the agent's state: the next call that reaches contextd stores it.
          options.onError?.(error, "answer");
        }
      }
      return answer;
    },

    afterAgent: async (state, runtime) => {
      const sessionId = sessionOf(runtime as Runtime<unknown>);
      const system = sessionId ? systems.get(sessionId) : undefined;
      // No model call of this session reached the middleware: nothing to catch up with.
      if (!sessionId || !system) return;
      try {
        await append(sessionId, [...system, ...state.messages]);
      } catch (error) {
        options.onError?.(error, "append");
      }
    },
  });
}

/** Sessions whose system message the middleware remembers for afterAgent; the least recently used is forgotten past it. */
const REMEMBERED_SESSIONS = 1000;

function remember(systems: Map<string, BaseMessage[]>, sessionId: string, system: BaseMessage[]): void {
  systems.delete(sessionId);
  systems.set(sessionId, system);
  for (const oldest of systems.keys()) {
    if (systems.size <= REMEMBERED_SESSIONS) break;
    systems.delete(oldest);
  }
}
