import { InvalidArgumentError, ResourceExhaustedError } from "../contract/errors.js";
import type * as S from "../contract/gen/contextd/v1/session.js";
import type { SeedEntry, TranscriptStore } from "../store/types.js";
import type { Tokenizer } from "../tokens/tokenizer.js";
import { ConversationLineError, parseConversationLines } from "./conversation-lines.js";
import { requireSession, validateMessage, type AppendLimits } from "./validate.js";

/**
 * SessionService.ImportTranscript (SPEC §2.4): creates a session from an OpenClaw session JSONL
 * file. Lines of type `"message"` become the session's messages, in file order; lines of any other
 * type (the session header, compactions, model changes, custom entries) are ignored. The simple
 * chat and proto JSON line forms of `contextctl replay` are accepted too (see conversation-lines.ts).
 *
 * Everything is checked before anything is written — an unreadable line, an invalid message
 * (`jsonl line N`), a file without messages (INVALID_ARGUMENT), more messages than
 * `limits.max_session_entries` (RESOURCE_EXHAUSTED) — and the session is then created with all its
 * messages in one transaction: ALREADY_EXISTS when the session exists, and nothing is written.
 * Engines are not called here; an engine that bootstraps is asked on the session's first routed call.
 */
export class TranscriptImports {
  constructor(
    private readonly store: TranscriptStore,
    private readonly tokenizer: Tokenizer,
    private readonly limits: AppendLimits,
  ) {}

  async importTranscript(req: S.ImportTranscriptRequest): Promise<S.ImportTranscriptResponse> {
    const session = requireSession(req.session);
    const text = Buffer.from(req.jsonl ?? []).toString("utf8");
    if (text.trim() === "") throw new InvalidArgumentError("jsonl is empty: send the content of an OpenClaw session JSONL file");
    let lines;
    try {
      lines = parseConversationLines(text, "jsonl");
    } catch (err) {
      if (err instanceof ConversationLineError) throw new InvalidArgumentError(`jsonl line ${err.line}: ${err.reason}`);
      throw err;
    }
    if (lines.length === 0) throw new InvalidArgumentError('jsonl has no message lines (lines of type "message"): nothing to import');
    if (lines.length > this.limits.maxSessionEntries) {
      throw new ResourceExhaustedError(`jsonl has ${lines.length} messages, over limits.max_session_entries (${this.limits.maxSessionEntries})`);
    }
    for (const { line, message } of lines) validateMessage(message, `jsonl line ${line}`, this.limits.maxMessageBytes);
    const seed: SeedEntry[] = lines.map(({ message }) => ({
      kind: "message",
      message: { ...message, id: "" },
      tokenCount: this.tokenizer.countMessage(message),
    }));
    await this.store.createSession(session.sessionId, { sessionKey: session.sessionKey, agentId: session.agentId }, seed);
    return { importedEntries: seed.length };
  }
}
