"""The recall index's SQLite schema (index.py). Version 1; a file of another version is refused
rather than misread (there is no migration yet: delete the file and the engine rebuilds it from the
host's transcripts, see README.md)."""

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

-- A session the engine has seen; `synced` once its transcript was read in (Bootstrap, gap fill).
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY,
  synced     INTEGER NOT NULL DEFAULT 0
);

-- Every message, whole (`body`: the encoded contextd.v1.Message, with the host's token_count).
CREATE TABLE IF NOT EXISTS messages (
  id           INTEGER PRIMARY KEY,
  session_id   TEXT NOT NULL,
  entry_id     TEXT NOT NULL,
  ord          INTEGER NOT NULL,           -- conversation order (the transcript's seq when known)
  role         INTEGER NOT NULL,           -- contextd.v1.Role
  tool_call_id TEXT NOT NULL DEFAULT '',   -- ROLE_TOOL_RESULT: the call it answers
  call_ids     TEXT NOT NULL DEFAULT '',   -- the tool calls it makes, space separated
  token_count  INTEGER NOT NULL,
  revision     INTEGER NOT NULL DEFAULT 0, -- TranscriptEntry.revision it was read at
  body         BLOB NOT NULL,
  UNIQUE (session_id, entry_id)
);
CREATE INDEX IF NOT EXISTS messages_by_ord ON messages (session_id, ord);
CREATE INDEX IF NOT EXISTS messages_by_result ON messages (session_id, tool_call_id, ord) WHERE tool_call_id <> '';

-- Which message made a tool call (ids may repeat across turns in some runtimes: not unique).
CREATE TABLE IF NOT EXISTS tool_calls (
  session_id TEXT NOT NULL,
  call_id    TEXT NOT NULL,
  entry_id   TEXT NOT NULL,
  PRIMARY KEY (session_id, call_id, entry_id)
) WITHOUT ROWID;

-- rowid = messages.id. `scope` is one token per session (index.scope_token), `body` the searchable
-- text. Porter stemming over unicode61 (diacritics folded): "failing tests" finds "failed test".
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5 (
  scope,
  body,
  tokenize = 'porter unicode61 remove_diacritics 2'
);

-- The recalled block of a turn (selection.py): the entry ids recalled for the turn whose user
-- message is `anchor_id`, for `prompt`, best first. Kept so that the block stays the same while the
-- turn goes on (the index's BM25 statistics drift as messages arrive) and stays where it was shown.
-- Added in place to version 1 (an older engine ignores it).
CREATE TABLE IF NOT EXISTS blocks (
  session_id TEXT NOT NULL,
  anchor_id  TEXT NOT NULL,
  epoch      TEXT NOT NULL,               -- the view it was chosen in: its first message after the pinned ones
  prompt     TEXT NOT NULL,
  entry_ids  TEXT NOT NULL,               -- a JSON array
  PRIMARY KEY (session_id, anchor_id)
) WITHOUT ROWID;
"""
