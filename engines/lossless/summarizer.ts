/**
 * Writes the text of leaf and condensed summaries: through the host's summarizer model when it
 * has one (HostService.Complete), otherwise with the extractive summarizer (extractive.ts).
 *
 * Why both: a model writes better prose summaries, but contextd may have none configured
 * (Complete answers FAILED_PRECONDITION), the call may fail, or the engine call may be about to hit
 * its deadline. The extractive summarizer always works, in milliseconds, so a summary is never
 * missing. "The host has no model" is remembered per host endpoint for a while, so the engine does
 * not ask on every summary.
 */
import { status } from "@grpc/grpc-js";
import { messageText, ROLE_NAMES, Role, textMessage, type HostClient, type Message } from "contextd/engine-sdk";
import type { Logger } from "pino";
import { extractiveCondense, extractiveLeaf, stack } from "./extractive.js";

export const EXTRACTIVE = "extractive";
export const HOST_MODEL = "host-model";

/** How long "this host has no summarizer model" is believed before asking again. */
const NO_MODEL_TTL_MS = 10 * 60_000;
/** Below this much time left in the engine call, do not start a model call. */
const MIN_MODEL_TIME_MS = 3_000;
/** Characters of one message shown to the model (head and tail kept). */
const MESSAGE_CHARS = 4_000;

export interface SummarizeCall {
  /** The engine call's HostClient (absent: extractive only). */
  host?: HostClient;
  signal: AbortSignal;
  /** The engine call's deadline (epoch ms; Infinity when none). */
  deadlineMs: number;
  customInstructions?: string;
  log?: Logger;
}

export interface WrittenSummary {
  text: string;
  summarizer: typeof EXTRACTIVE | typeof HOST_MODEL;
}

export interface SummaryWriterOptions {
  leafChars: number;
  condensedChars: number;
  useHostModel: boolean;
}

const INSTRUCTIONS =
  "You compact an AI coding agent's conversation history. Write a dense summary that lets the agent continue the work: " +
  "the user's goals and constraints (verbatim when they are rules), requests, decisions and their reasons, errors seen and " +
  "whether they were fixed, and every identifier verbatim (file paths, function names, error messages, URLs, ticket ids, " +
  "versions, numbers). No preamble.";

export class SummaryWriter {
  private readonly noModelUntil = new Map<string, number>();

  constructor(private readonly options: SummaryWriterOptions) {}

  /** A leaf summary of consecutive messages. */
  async leaf(messages: Message[], call: SummarizeCall): Promise<WrittenSummary> {
    const maxChars = this.options.leafChars;
    const excerpt = messages.map(transcriptLine).join("\n\n");
    const modelText = await this.viaHostModel(call, `Summarize this part of the conversation:\n\n${excerpt}`, maxChars);
    if (modelText) return { text: modelText, summarizer: HOST_MODEL };
    return { text: extractiveLeaf(messages, { maxChars, customInstructions: call.customInstructions, signal: call.signal }), summarizer: EXTRACTIVE };
  }

  /** One summary of consecutive summaries (oldest first). */
  async condense(children: readonly string[], call: SummarizeCall): Promise<WrittenSummary> {
    const maxChars = this.options.condensedChars;
    const numbered = children.map((t, i) => `<summary part="${i + 1}">\n${t}\n</summary>`).join("\n\n");
    const prompt = `These summaries cover consecutive parts of one conversation, oldest first. Merge them into one summary:\n\n${numbered}`;
    const modelText = await this.viaHostModel(call, prompt, maxChars);
    if (modelText) return { text: modelText, summarizer: HOST_MODEL };
    try {
      return { text: extractiveCondense(children, { maxChars, customInstructions: call.customInstructions, signal: call.signal }), summarizer: EXTRACTIVE };
    } catch (err) {
      if (call.signal.aborted) throw err;
      call.log?.warn({ err }, "extractive merge failed; stacking the summaries instead");
      return { text: stack(children, maxChars), summarizer: EXTRACTIVE };
    }
  }

  /** The model's summary, or undefined when there is no model, no time, or the call failed. */
  private async viaHostModel(call: SummarizeCall, prompt: string, maxChars: number): Promise<string | undefined> {
    const host = call.host;
    if (!this.options.useHostModel || !host) return undefined;
    if ((this.noModelUntil.get(host.endpoint) ?? 0) > Date.now()) return undefined;
    const timeLeft = call.deadlineMs - Date.now();
    if (timeLeft < MIN_MODEL_TIME_MS) return undefined;
    const instructions = call.customInstructions ? `${INSTRUCTIONS}\nFocus: ${call.customInstructions}` : INSTRUCTIONS;
    try {
      const res = await host.complete(
        {
          system: `${instructions}\nAt most ${maxChars} characters.`,
          messages: [textMessage(Role.ROLE_USER, prompt)],
          maxTokens: Math.ceil(maxChars / 3),
        },
        { timeoutMs: Math.min(120_000, timeLeft - 1_000) },
      );
      const text = res.text.trim();
      return text ? text.slice(0, maxChars) : undefined;
    } catch (err) {
      if (call.signal.aborted) throw err;
      const code = (err as { code?: number }).code;
      if (code === status.FAILED_PRECONDITION || code === status.UNIMPLEMENTED) {
        this.noModelUntil.set(host.endpoint, Date.now() + NO_MODEL_TTL_MS);
        call.log?.info({ host: host.endpoint }, "the host has no summarizer model; using the extractive summarizer");
      } else {
        call.log?.warn({ err }, "HostService.Complete failed; using the extractive summarizer for this summary");
      }
      return undefined;
    }
  }
}

/** One message as a line of a transcript excerpt for the model. */
function transcriptLine(m: Message): string {
  const who = m.role === Role.ROLE_TOOL_RESULT ? `tool_result ${m.toolName}${m.isError ? " (error)" : ""}` : ROLE_NAMES[m.role];
  const text = messageText(m);
  const body = text.length <= MESSAGE_CHARS ? text : `${text.slice(0, MESSAGE_CHARS / 2)}\n[…]\n${text.slice(-MESSAGE_CHARS / 2)}`;
  return `[${who}]\n${body}`;
}
