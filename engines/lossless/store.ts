/**
 * The lossless engine's durable store: every message of every session verbatim, and the summary
 * DAG over them (see types.ts). better-sqlite3 is synchronous, so each method is atomic on its own;
 * multi-row changes run in one transaction. One engine process per database file.
 */
import { Message, Role } from "contextd/engine-sdk";
import type Database from "better-sqlite3";
import { openDatabase } from "./schema.js";
import type { MessageMeta, SummaryDraft, SummaryRecord } from "./types.js";
import { toolCallIdsOf } from "./tool-pairs.js";

interface MessageRow {
  entry_id: string;
  ord: number;
  role: number;
  token_count: number;
  tool_call_ids: string;
  tool_call_id: string;
}

interface SummaryRow {
  session_id: string;
  summary_id: string;
  depth: number;
  first_ord: number;
  last_ord: number;
  first_entry_id: string;
  last_entry_id: string;
  message_count: number;
  source_tokens: number;
  child_ids: string;
  parent_id: string | null;
  text: string;
  token_count: number;
  summarizer: string;
  created_at_ms: number;
}

const SUMMARY_COLUMNS =
  "session_id, summary_id, depth, first_ord, last_ord, first_entry_id, last_entry_id, message_count, source_tokens, child_ids, parent_id, text, token_count, summarizer, created_at_ms";

function toMeta(r: MessageRow): MessageMeta {
  return {
    entryId: r.entry_id,
    ord: r.ord,
    role: r.role,
    tokenCount: r.token_count,
    toolCallIds: JSON.parse(r.tool_call_ids) as string[],
    toolCallId: r.tool_call_id,
  };
}

function toSummary(r: SummaryRow): SummaryRecord {
  return {
    sessionId: r.session_id,
    id: r.summary_id,
    depth: r.depth,
    firstOrd: r.first_ord,
    lastOrd: r.last_ord,
    firstEntryId: r.first_entry_id,
    lastEntryId: r.last_entry_id,
    messageCount: r.message_count,
    sourceTokens: r.source_tokens,
    childIds: JSON.parse(r.child_ids) as string[],
    parentId: r.parent_id,
    text: r.text,
    tokenCount: r.token_count,
    summarizer: r.summarizer,
    createdAtMs: r.created_at_ms,
  };
}

export interface SessionStats {
  messages: number;
  summaries: number;
  roots: number;
  maxDepth: number;
  /** Messages covered by some leaf summary. */
  summarizedMessages: number;
}

export class LosslessStore {
  private readonly q;

  constructor(readonly db: Database.Database) {
    this.q = {
      session: db.prepare<[string], { host_summary_id: string }>("SELECT host_summary_id FROM sessions WHERE session_id = ?"),
      ensureSession: db.prepare("INSERT OR IGNORE INTO sessions (session_id, created_at_ms) VALUES (?, ?)"),
      setHostSummary: db.prepare("UPDATE sessions SET host_summary_id = ? WHERE session_id = ?"),
      nextSummaryNo: db.prepare<[string], { no: number }>(
        "UPDATE sessions SET next_summary_no = next_summary_no + 1 WHERE session_id = ? RETURNING next_summary_no - 1 AS no",
      ),
      hasMessage: db.prepare<[string, string], { ord: number }>("SELECT ord FROM messages WHERE session_id = ? AND entry_id = ?"),
      maxOrd: db.prepare<[string], { m: number | null }>("SELECT MAX(ord) AS m FROM messages WHERE session_id = ?"),
      allOrds: db.prepare<[string], { entry_id: string; ord: number }>("SELECT entry_id, ord FROM messages WHERE session_id = ?"),
      insertMessage: db.prepare(
        "INSERT OR IGNORE INTO messages (session_id, entry_id, ord, role, token_count, tool_call_ids, tool_call_id, body, ingested_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      ),
      setOrd: db.prepare("UPDATE messages SET ord = ? WHERE session_id = ? AND entry_id = ?"),
      metaFrom: db.prepare<[string, number], MessageRow>(
        "SELECT entry_id, ord, role, token_count, tool_call_ids, tool_call_id FROM messages WHERE session_id = ? AND ord > ? ORDER BY ord",
      ),
      bodies: db.prepare<[string, number, number], { body: string }>("SELECT body FROM messages WHERE session_id = ? AND ord BETWEEN ? AND ? ORDER BY ord"),
      // Pinned system messages (docs/pinned-messages.md), through the partial index messages_system:
      // the role is a literal so that SQLite may use it.
      systemMeta: db.prepare<[string], MessageRow>(
        `SELECT entry_id, ord, role, token_count, tool_call_ids, tool_call_id FROM messages WHERE session_id = ? AND role = ${Role.ROLE_SYSTEM} ORDER BY ord`,
      ),
      systemBodies: db.prepare<[string], { body: string }>(`SELECT body FROM messages WHERE session_id = ? AND role = ${Role.ROLE_SYSTEM} ORDER BY ord`),
      messageCount: db.prepare<[string], { n: number }>("SELECT COUNT(*) AS n FROM messages WHERE session_id = ?"),
      countUpTo: db.prepare<[string, number], { n: number }>("SELECT COUNT(*) AS n FROM messages WHERE session_id = ? AND ord <= ?"),
      frontier: db.prepare<[string], { m: number | null }>("SELECT MAX(last_ord) AS m FROM summaries WHERE session_id = ? AND depth = 0"),
      roots: db.prepare<[string], SummaryRow>(`SELECT ${SUMMARY_COLUMNS} FROM summaries WHERE session_id = ? AND parent_id IS NULL ORDER BY first_ord`),
      allSummaries: db.prepare<[string], SummaryRow>(`SELECT ${SUMMARY_COLUMNS} FROM summaries WHERE session_id = ? ORDER BY depth, first_ord`),
      insertSummary: db.prepare(
        `INSERT INTO summaries (${SUMMARY_COLUMNS}) VALUES (${SUMMARY_COLUMNS.split(",")
          .map(() => "?")
          .join(", ")})`,
      ),
      adopt: db.prepare("UPDATE summaries SET parent_id = ? WHERE session_id = ? AND summary_id = ? AND parent_id IS NULL"),
    };
  }

  static open(file: string): LosslessStore {
    return new LosslessStore(openDatabase(file));
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  /**
   * Purges a session (ForgetSession): its messages, its summary DAG and its row, in one
   * transaction; with secure_delete the freed pages hold zeros, and a TRUNCATE checkpoint empties
   * the write-ahead log that still held copies. False when the engine held nothing of it.
   */
  forget(sessionId: string): boolean {
    const purged = this.db.transaction((): number => {
      let n = this.db.prepare("DELETE FROM messages WHERE session_id = ?").run(sessionId).changes;
      n += this.db.prepare("DELETE FROM summaries WHERE session_id = ?").run(sessionId).changes;
      return n + this.db.prepare("DELETE FROM sessions WHERE session_id = ?").run(sessionId).changes;
    })();
    if (purged > 0 && this.db.name !== ":memory:") this.db.pragma("wal_checkpoint(TRUNCATE)");
    return purged > 0;
  }

  hasSession(sessionId: string): boolean {
    return this.q.session.get(sessionId) !== undefined;
  }

  /** The host compaction entry id we saw last (see schema.ts); "" when none. */
  hostSummaryId(sessionId: string): string {
    return this.q.session.get(sessionId)?.host_summary_id ?? "";
  }

  setHostSummaryId(sessionId: string, entryId: string): void {
    this.q.ensureSession.run(sessionId, Date.now());
    this.q.setHostSummary.run(entryId, sessionId);
  }

  hasMessage(sessionId: string, entryId: string): boolean {
    return this.q.hasMessage.get(sessionId, entryId) !== undefined;
  }

  /** The stored position of a message; undefined when it is not stored. */
  ordOf(sessionId: string, entryId: string): number | undefined {
    return this.q.hasMessage.get(sessionId, entryId)?.ord;
  }

  messageCount(sessionId: string): number {
    return this.q.messageCount.get(sessionId)?.n ?? 0;
  }

  /**
   * Appends the messages not stored yet, in the given order, after everything stored. Idempotent on
   * entry id. Every message needs `id` (the host entry id) and `tokenCount`. Returns how many were new.
   */
  append(sessionId: string, messages: readonly Message[]): number {
    return this.db.transaction(() => {
      this.q.ensureSession.run(sessionId, Date.now());
      let next = (this.q.maxOrd.get(sessionId)?.m ?? 0) + 1;
      let added = 0;
      for (const m of messages) {
        if (this.q.hasMessage.get(sessionId, m.id)) continue;
        this.insert(sessionId, m, next++);
        added++;
      }
      return added;
    })();
  }

  /**
   * Brings the store in line with the host's transcript (`ordered`: its messages, oldest first):
   * stores the missing ones and puts every message that no summary covers yet back in transcript
   * order (messages that arrived while the engine was down may land after newer ones otherwise).
   * Summarized messages never move, so the spans summaries record stay valid. Returns how many
   * messages were new.
   */
  mergeTranscript(sessionId: string, ordered: readonly Message[]): number {
    return this.db.transaction(() => {
      this.q.ensureSession.run(sessionId, Date.now());
      const frontier = this.frontier(sessionId);
      const known = new Map(this.q.allOrds.all(sessionId).map((r) => [r.entry_id, r.ord]));
      const position = new Map(ordered.map((m, i) => [m.id, i]));
      const missing = ordered.filter((m) => !known.has(m.id));
      const open = [...known].filter(([, ord]) => ord > frontier).map(([id, ord]) => ({ id, ord, message: undefined as Message | undefined }));
      for (const m of missing) open.push({ id: m.id, ord: Number.POSITIVE_INFINITY, message: m });
      open.sort((a, b) => (position.get(a.id) ?? Infinity) - (position.get(b.id) ?? Infinity) || a.ord - b.ord);
      let ord = frontier;
      for (const item of open) {
        ord++;
        if (item.message) this.insert(sessionId, item.message, ord);
        else if (item.ord !== ord) this.q.setOrd.run(ord, sessionId, item.id);
      }
      return missing.length;
    })();
  }

  private insert(sessionId: string, m: Message, ord: number): void {
    this.q.insertMessage.run(
      sessionId,
      m.id,
      ord,
      m.role,
      m.tokenCount,
      JSON.stringify(toolCallIdsOf(m)),
      m.toolCallId ?? "",
      JSON.stringify(Message.toJSON(m)),
      Date.now(),
    );
  }

  /** The ord of the last message some leaf covers; 0 when nothing is summarized. */
  frontier(sessionId: string): number {
    return this.q.frontier.get(sessionId)?.m ?? 0;
  }

  /** The messages no summary covers yet (the raw tail), oldest first. */
  rawMessages(sessionId: string): MessageMeta[] {
    return this.q.metaFrom.all(sessionId, this.frontier(sessionId)).map(toMeta);
  }

  /** Every message's metadata, oldest first. */
  allMessages(sessionId: string): MessageMeta[] {
    return this.q.metaFrom.all(sessionId, 0).map(toMeta);
  }

  /** The stored messages with ord in [fromOrd, toOrd], oldest first. */
  messageBodies(sessionId: string, fromOrd: number, toOrd: number): Message[] {
    return this.q.bodies.all(sessionId, fromOrd, toOrd).map((r) => Message.fromJSON(JSON.parse(r.body)));
  }

  /**
   * Every system message of the session, oldest first: never folded into a summary, always shown
   * first (docs/pinned-messages.md). Those in the raw tail are in rawMessages() as well.
   */
  systemMessages(sessionId: string): MessageMeta[] {
    return this.q.systemMeta.all(sessionId).map(toMeta);
  }

  /** The bodies of systemMessages(), in the same order. */
  systemMessageBodies(sessionId: string): Message[] {
    return this.q.systemBodies.all(sessionId).map((r) => Message.fromJSON(JSON.parse(r.body)));
  }

  /** The summaries nothing has condensed yet, oldest span first. */
  roots(sessionId: string): SummaryRecord[] {
    return this.q.roots.all(sessionId).map(toSummary);
  }

  allSummaries(sessionId: string): SummaryRecord[] {
    return this.q.allSummaries.all(sessionId).map(toSummary);
  }

  /**
   * Stores a summary: assigns its id (S1, S2, … per session), asks `countTokens` for the size of
   * its rendered message, and makes it the parent of `draft.childIds`. A leaf must start right after
   * the current frontier and every child must still be a root, so the DAG stays a clean partition.
   */
  insertSummary(draft: SummaryDraft, countTokens: (summary: SummaryRecord) => number): SummaryRecord {
    return this.db.transaction(() => {
      const { sessionId } = draft;
      this.q.ensureSession.run(sessionId, Date.now());
      if (draft.depth === 0 && draft.firstOrd !== this.frontier(sessionId) + 1) {
        throw new Error(`lossless: leaf over ords ${draft.firstOrd}-${draft.lastOrd} does not start at the frontier (${this.frontier(sessionId)})`);
      }
      const no = this.q.nextSummaryNo.get(sessionId)!.no;
      const summary: SummaryRecord = { ...draft, id: `S${no}`, parentId: null, createdAtMs: Date.now(), tokenCount: 0 };
      summary.tokenCount = countTokens(summary);
      this.q.insertSummary.run(
        sessionId,
        summary.id,
        summary.depth,
        summary.firstOrd,
        summary.lastOrd,
        summary.firstEntryId,
        summary.lastEntryId,
        summary.messageCount,
        summary.sourceTokens,
        JSON.stringify(summary.childIds),
        null,
        summary.text,
        summary.tokenCount,
        summary.summarizer,
        summary.createdAtMs,
      );
      for (const child of summary.childIds) {
        if (this.q.adopt.run(summary.id, sessionId, child).changes !== 1) {
          throw new Error(`lossless: summary ${child} is not a root of session ${sessionId}; cannot condense it into ${summary.id}`);
        }
      }
      return summary;
    })();
  }

  stats(sessionId: string): SessionStats {
    const all = this.allSummaries(sessionId);
    return {
      messages: this.messageCount(sessionId),
      summaries: all.length,
      roots: all.filter((s) => s.parentId === null).length,
      maxDepth: all.reduce((d, s) => Math.max(d, s.depth), 0),
      summarizedMessages: this.q.countUpTo.get(sessionId, this.frontier(sessionId))?.n ?? 0,
    };
  }
}
