import type {
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3Middleware,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
} from "@ai-sdk/provider";
import type { ContextdClient } from "contextd/client";
import { KeyedAppender } from "../../shared/src/keyed-appender.js";
import { answerMessage, fromContextd, messageKey, toContextd } from "./message-mapping.js";

/** What `contextdMiddleware` needs. */
export interface ContextdMiddlewareOptions {
  /** A contextd runtime client (`new ContextdClient({ address, token })` from `contextd/client`). */
  client: ContextdClient;
  /**
   * The session the conversation is. A call may name another with
   * `providerOptions: { contextd: { sessionId } }`. Neither given: the call passes through untouched.
   */
  sessionId?: string;
  /** The agent the session is created under (selects its engine through `slots.agents`). */
  agentId?: string;
  /** What the assembled context must fit, in contextd's tokens. Default: `contextWindow` minus the call's `maxOutputTokens`. */
  tokenBudget?: number;
  /** The model's context window, in tokens, when `tokenBudget` is not given. Default 32 000. */
  contextWindow?: number;
  /** Deadline of each contextd call, ms. Default 5000: past it the call goes on without contextd. */
  timeoutMs?: number;
  /** Told of every contextd call that failed (the model call went on with the SDK's own messages). */
  onError?: (error: unknown, during: "append" | "assemble" | "answer") => void;
}

const DEFAULT_CONTEXT_WINDOW = 32_000;

interface CallState {
  sessionId: string;
  /** Where the answer goes in the conversation: after the SDK's whole prompt. */
  position: number;
}

/**
 * A language-model middleware (`wrapLanguageModel({ model, middleware: contextdMiddleware(...) })`)
 * that makes contextd decide what the model sees. On every model call — each step of a tool loop is
 * one — it appends the SDK's prompt to the session (message keys make that idempotent: what contextd
 * holds already is not stored again), replaces the prompt with contextd's assembled context within
 * the budget, and when the answer is complete (generate, or the end of a stream) appends it.
 *
 * contextd unreachable, or refusing: the call goes on with the SDK's own prompt, and the next call
 * that reaches contextd appends every message it missed (they are in the SDK's prompt) — nothing is
 * lost, nothing is stored twice.
 *
 * Each call sends only the messages whose keys contextd has not taken yet from this middleware, not
 * the whole prompt again (which would make a long tool loop's appends quadratic). A session it has
 * forgotten (more than 1000 sessions since) gets its whole prompt once more: the keys make that
 * harmless.
 */
export function contextdMiddleware(options: ContextdMiddlewareOptions): LanguageModelV3Middleware {
  const { client } = options;
  const timeoutMs = options.timeoutMs ?? 5000;
  // transformParams hands its result to wrapGenerate/wrapStream as the same object.
  const calls = new WeakMap<LanguageModelV3CallOptions, CallState>();

  const sessionOf = (params: LanguageModelV3CallOptions): string | undefined => {
    const perCall = (params.providerOptions?.contextd as { sessionId?: unknown } | undefined)?.sessionId;
    return typeof perCall === "string" && perCall ? perCall : options.sessionId;
  };

  // Sends only the messages contextd has not taken from this middleware (integrations/shared).
  const appender = new KeyedAppender(client, { agentId: options.agentId, timeoutMs });
  const append = (sessionId: string, prompt: LanguageModelV3Prompt, from = 0): Promise<void> =>
    appender.append(
      sessionId,
      prompt.flatMap((m, i) => toContextd(m).map((message, j) => ({ message, key: messageKey(from + i, j, message) }))),
    );

  async function appendAnswer(params: LanguageModelV3CallOptions, content: LanguageModelV3Content[]): Promise<void> {
    const state = calls.get(params);
    if (!state) return;
    try {
      await append(state.sessionId, [answerMessage(content)], state.position);
    } catch (error) {
      // The answer is in the SDK's next prompt: the next call that reaches contextd stores it.
      options.onError?.(error, "answer");
    }
  }

  return {
    specificationVersion: "v3",

    async transformParams({ params }) {
      const sessionId = sessionOf(params);
      if (!sessionId) return params;
      const state: CallState = { sessionId, position: params.prompt.length };
      let during: "append" | "assemble" = "append";
      try {
        await append(sessionId, params.prompt);
        during = "assemble";
        const budget = options.tokenBudget ?? (options.contextWindow ?? DEFAULT_CONTEXT_WINDOW) - (params.maxOutputTokens ?? 0);
        const assembled = await client.assemble(
          {
            session: { sessionId, agentId: options.agentId ?? "" },
            tokenBudget: Math.max(1, budget),
            availableTools: (params.tools ?? []).map((t) => t.name),
          },
          { timeoutMs },
        );
        const prompt = fromContextd(assembled.messages);
        if (assembled.systemPromptAddition) addSystem(prompt, assembled.systemPromptAddition);
        const next = { ...params, prompt };
        calls.set(next, state);
        return next;
      } catch (error) {
        options.onError?.(error, during);
        // The SDK's own messages go to the model; the answer is still offered to contextd.
        const next = { ...params };
        calls.set(next, state);
        return next;
      }
    },

    async wrapGenerate({ doGenerate, params }) {
      const result = await doGenerate();
      await appendAnswer(params, result.content);
      return result;
    },

    async wrapStream({ doStream, params }) {
      const { stream, ...rest } = await doStream();
      const answer = new StreamedAnswer();
      return {
        ...rest,
        stream: stream.pipeThrough(
          new TransformStream<LanguageModelV3StreamPart, LanguageModelV3StreamPart>({
            transform(part, controller) {
              answer.add(part);
              controller.enqueue(part);
            },
            // The stream ends once the answer is stored (or contextd failed to take it).
            flush: () => appendAnswer(params, answer.content),
          }),
        ),
      };
    },
  };
}

/** contextd's system-prompt addition, prepended to the first system message (or as one). */
function addSystem(prompt: LanguageModelV3Prompt, addition: string): void {
  const first = prompt[0];
  if (first?.role === "system") first.content = `${addition}\n\n${first.content}`;
  else prompt.unshift({ role: "system", content: addition });
}

/** The content of a streamed answer, in the order its parts started. */
class StreamedAnswer {
  readonly content: LanguageModelV3Content[] = [];
  private readonly open = new Map<string, { text: string }>();

  add(part: LanguageModelV3StreamPart): void {
    switch (part.type) {
      case "text-start":
      case "reasoning-start": {
        const c = { type: part.type === "text-start" ? ("text" as const) : ("reasoning" as const), text: "", providerMetadata: part.providerMetadata };
        this.content.push(c);
        this.open.set(`${c.type}:${part.id}`, c);
        break;
      }
      case "text-delta":
      case "reasoning-delta": {
        const c = this.open.get(`${part.type === "text-delta" ? "text" : "reasoning"}:${part.id}`);
        if (c) c.text += part.delta;
        break;
      }
      case "tool-call":
      case "file":
        this.content.push(part);
        break;
    }
  }
}
