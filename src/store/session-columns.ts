import type { RawSession } from "./types.js";

/**
 * The `sessions` table's columns, in the order both schemas declare them, each with the
 * {@link RawSession} field it carries. The SQLite and PostgreSQL migrations keep these names and
 * types alike on purpose, so the store copy (`contextctl migrate-store`) reads and writes a session
 * row column for column with one map, whichever way it goes.
 */
export const SESSION_COLUMNS: readonly (readonly [keyof RawSession, string])[] = [
  ["sessionId", "session_id"],
  ["sessionKey", "session_key"],
  ["agentId", "agent_id"],
  ["parentSessionId", "parent_session_id"],
  ["createdAtMs", "created_at_ms"],
  ["updatedAtMs", "updated_at_ms"],
  ["entryCount", "entry_count"],
  ["messageCount", "message_count"],
  ["compactionCount", "compaction_count"],
  ["totalTokens", "total_tokens"],
  ["lastSeq", "last_seq"],
  ["lastEntryId", "last_entry_id"],
  ["latestCompactionId", "latest_compaction_id"],
  ["latestCompactionSeq", "latest_compaction_seq"],
  ["activeFromSeq", "active_from_seq"],
  ["activeSummaryTokens", "active_summary_tokens"],
  ["systemAdditionTokens", "system_addition_tokens"],
  ["headerJson", "header_json"],
  ["expiresAtMs", "expires_at_ms"],
  ["endedAtMs", "ended_at_ms"],
  ["endReason", "end_reason"],
  ["lastMessageKey", "last_message_key"],
  ["lastMessageTimestampMs", "last_message_timestamp_ms"],
];
