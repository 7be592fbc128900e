import { fieldError, InvalidArgumentError, LimitExceededError } from "../contract/errors.js";
import type * as S from "../contract/gen/contextd/v1/session.js";
import type { Message, TranscriptEntry } from "../contract/gen/contextd/v1/types.js";
import { summaryMessage } from "../contract/messages.js";
import { toTranscriptEntry } from "../openclaw/session-entries.js";
import { openclawMessageKey } from "../openclaw/message-key.js";
import { sessionFileSteps, isSessionFile } from "../openclaw/session-file.js";
import { activeBranchSteps } from "../openclaw/session-tree.js";
import { TimeSlices } from "../contract/time-slices.js";
import type { ImportedTranscript, SeedEntry, TranscriptStore } from "../store/types.js";
import type { CountOptions, Tokenizer } from "../tokens/tokenizer.js";
import { ConversationLineError, conversationLineSteps } from "./conversation-lines.js";
import { countingFor, type CountingCall } from "./counting.js";
import type { AdmittedSession } from "./session-visibility.js";
import { validateMessage, type AppendLimits } from "./validate.js";
import { quote } from "../contract/quote.js";

/** The message an entry's token count is taken from (a compaction counts as its summary); none for other entries. */
function countedMessage(entry: TranscriptEntry): Message | undefined {
  const e = entry.entry;
  if (e?.$case === "message") return e.value;
  if (e?.$case === "compaction") return summaryMessage(e.value.summary);
  return undefined;
}

/**
 * SessionService.ImportTranscript (proto/contextd/v1/session.proto; docs/openclaw.md, "Session
 * files"): creates a session from a transcript file.
 *
 * An OpenClaw session JSONL file (versions 3 and 4, recognised by its `{"type":"session"}` header
 * line) is imported whole: every entry of every branch keeps its id, parent id, type and fields
 * (src/openclaw/session-entries.ts), and the active view is what OpenClaw itself would show the
 * model (src/openclaw/session-tree.ts): the branch ending at the file's leaf, from its latest
 * compaction — whose summary heads the view — or reset on. Entries on abandoned branches, dropped
 * by a reset or excluded from context are kept but `hidden`. New appends follow the file's leaf.
 * Message entries get the message key `openclaw:<entry id>` (src/openclaw/message-key.ts), the key
 * the OpenClaw plugin appends them under, so a message imported here is never appended twice.
 *
 * A file without that header is read as conversation lines (the forms of `contextctl replay`,
 * conversation-lines.ts), one message per line, in order.
 *
 * Everything is checked before anything is written — a file over `limits.max_import_bytes`
 * (RESOURCE_EXHAUSTED, before any parsing), a malformed line (INVALID_ARGUMENT naming `jsonl line
 * N`), a message contextd would refuse on append, more entries than `limits.max_session_entries`
 * (RESOURCE_EXHAUSTED) — and the session is then created in one transaction: ALREADY_EXISTS when it
 * exists, and nothing is written. Engines are not called; an engine that bootstraps is asked on the
 * session's first routed call.
 *
 * A file at the cap is seconds of CPU work (parsing, converting, token counting). Parsing and
 * converting run in time slices that give the event loop back in between (src/contract/time-slices.ts);
 * the token counts are taken on the counting pool (src/tokens/count-pool.ts), in bounded chunks,
 * fairly with other agents' counts and dropped when the caller goes away — one message can be one
 * BPE piece of megabytes, which no time slice could cut. Health checks and other sessions' calls
 * keep being answered while one import is read.
 */
export class TranscriptImports {
  constructor(
    private readonly store: TranscriptStore,
    private readonly tokenizer: Tokenizer,
    private readonly limits: AppendLimits,
  ) {}

  async importTranscript(
    req: S.ImportTranscriptRequest,
    session: AdmittedSession,
    call: CountingCall = { deadlineMs: Infinity },
  ): Promise<S.ImportTranscriptResponse> {
    const counting = countingFor(call, session.agentId);
    const jsonl = req.jsonl ?? new Uint8Array();
    // The cap bounds the parse (time and memory), so it is checked on the raw bytes, first.
    if (jsonl.byteLength > this.limits.maxImportBytes) {
      throw new LimitExceededError(`jsonl is ${jsonl.byteLength} bytes, over limits.max_import_bytes (${this.limits.maxImportBytes})`, {
        key: "limits.max_import_bytes",
        value: this.limits.maxImportBytes,
      });
    }
    const text = Buffer.from(jsonl.buffer, jsonl.byteOffset, jsonl.byteLength).toString("utf8");
    if (text.trim() === "") throw fieldError("jsonl", "is empty: send the content of an OpenClaw session JSONL file");
    const labels = { sessionKey: session.sessionKey, agentId: session.agentId };
    const slices = new TimeSlices();
    if (!isSessionFile(text)) return this.importConversation(session.sessionId, labels, text, slices, counting);
    const plan = await this.plan(text, slices, counting);
    await this.store.importSession(session.sessionId, labels, plan);
    const visible = plan.entries.filter((e, i) => i >= plan.activeFromIndex && e.entry.entry?.$case === "message" && !e.entry.hidden).length;
    return {
      importedEntries: plan.entries.length,
      leafEntryId: plan.leafEntryId,
      activeMessages: visible + (plan.compactionIndex === null ? 0 : 1),
    };
  }

  /** The store's import plan for an OpenClaw session file. */
  private async plan(text: string, slices: TimeSlices, counting: CountOptions): Promise<ImportedTranscript> {
    const file = await slices.run(sessionFileSteps(text));
    if (file.entries.length > this.limits.maxSessionEntries) {
      throw new LimitExceededError(`jsonl has ${file.entries.length} entries, over limits.max_session_entries (${this.limits.maxSessionEntries})`, {
        key: "limits.max_session_entries",
        value: this.limits.maxSessionEntries,
      });
    }
    const branch = await slices.run(activeBranchSteps(file.entries));
    // The view is read in file order; OpenClaw never writes a child before its parent.
    for (let i = 1; i < branch.path.length; i++) {
      if (branch.path[i] < branch.path[i - 1]) {
        const child = file.entries[branch.path[i]];
        throw fieldError("jsonl", `line ${child.line}: entry ${quote(String(child.raw.id))} comes before its parent on the active branch`);
      }
    }
    const onPath = new Set(branch.path);
    const visible = new Set(branch.visible);
    const entries: ImportedTranscript["entries"] = [];
    for (let i = 0; i < file.entries.length; i++) {
      await slices.pause();
      const line = file.entries[i];
      const where = `jsonl line ${line.line}`;
      const entry = toTranscriptEntry(line.raw, line.recognized, where);
      const e = entry.entry;
      if (e?.$case === "message") {
        validateMessage(e.value, `${where}: message`, this.limits.maxMessageBytes);
        // The key the OpenClaw plugin appends this message under: a later append of it is held.
        entry.messageKey = openclawMessageKey(entry.id);
        // Compacted away is not hidden: it was part of the view once.
        entry.hidden = onPath.has(i) && i < branch.activeFromIndex ? e.value.excludeFromContext : !visible.has(i);
      } else entry.hidden = !onPath.has(i);
      entries.push({ entry, tokenCount: 0 });
    }
    const counted = entries.flatMap((e) => {
      const message = countedMessage(e.entry);
      return message ? [{ e, message }] : [];
    });
    const counts = await this.tokenizer.countMessages(
      counted.map((c) => c.message),
      counting,
    );
    counted.forEach((c, i) => (c.e.tokenCount = counts[i]));
    return {
      headerJson: JSON.stringify(file.header),
      entries,
      leafEntryId: branch.leafId ?? "",
      compactionIndex: branch.compactionIndex ?? null,
      activeFromIndex: branch.activeFromIndex,
    };
  }

  /** A file of conversation lines: one message per line, appended in order. */
  private async importConversation(
    sessionId: string,
    labels: { sessionKey: string; agentId: string },
    text: string,
    slices: TimeSlices,
    counting: CountOptions,
  ): Promise<S.ImportTranscriptResponse> {
    let lines: { line: number; message: Message }[];
    try {
      lines = await slices.run(conversationLineSteps(text, "jsonl"));
    } catch (err) {
      if (err instanceof ConversationLineError) throw fieldError("jsonl", `line ${err.line}: ${err.reason}`);
      throw err;
    }
    if (lines.length === 0) throw new InvalidArgumentError('jsonl has no message lines (lines of type "message"): nothing to import');
    if (lines.length > this.limits.maxSessionEntries) {
      throw new LimitExceededError(`jsonl has ${lines.length} messages, over limits.max_session_entries (${this.limits.maxSessionEntries})`, {
        key: "limits.max_session_entries",
        value: this.limits.maxSessionEntries,
      });
    }
    const seed: SeedEntry[] = [];
    for (const { line, message } of lines) {
      await slices.pause();
      validateMessage(message, `jsonl line ${line}`, this.limits.maxMessageBytes);
      seed.push({ kind: "message", message: { ...message, id: "" }, tokenCount: 0 });
    }
    const counts = await this.tokenizer.countMessages(
      lines.map((l) => l.message),
      counting,
    );
    seed.forEach((e, i) => e.kind === "message" && (e.tokenCount = counts[i]));
    await this.store.createSession(sessionId, labels, seed);
    return { importedEntries: seed.length, leafEntryId: "", activeMessages: seed.length };
  }
}
