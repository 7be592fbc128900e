"""RecallIndex: every message `recall` has seen, per session, in a SQLite file with an FTS5 index.

Each message is kept whole (its encoded protobuf, so it can be sent back to the model after the
host's compaction dropped it from the view) with what selection needs without decoding it: session
id, entry id, conversation order, role, the tool call it answers or the calls it makes, and the
host's token count. The FTS5 table indexes its searchable text (searchable_text) under a scope
token per session, so a search only touches that session's postings.

Order (`ord`): the transcript's `seq` whenever the engine has read the transcript (Bootstrap, gap
fills); a message that arrives by Ingest gets the session's highest `ord` + 1. Ingest follows the
host's appends, so both keep conversation order, and a later transcript read sets every `ord`
back to the host's `seq`.

Threads: grpcio serves calls from a thread pool, and a sqlite3 connection belongs to the thread
that opened it. So each thread gets its own connection (WAL journal: readers never wait for the
writer; `busy_timeout`: writers queue instead of failing), and every write is one IMMEDIATE
transaction, which also makes `max(ord) + 1` safe between concurrent Ingests.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from contextd.turns import pair_tools, tool_call_ids, total_tokens
from contextd.v1 import types_pb2
from message_text import scope_token, searchable_text

from schema import SCHEMA, SCHEMA_VERSION
from tool_units import answered_calls, unit_members

__all__ = ["IndexedRow", "RecallIndex", "RecallUnit", "SyncResult"]

#: Entries between two cancellation checks while syncing a transcript.
CHECK_EVERY = 200

_COLUMNS = "m.entry_id, m.ord, m.role, m.tool_call_id, m.call_ids, m.token_count"


def _nothing() -> None:
    pass


#: How long a writer waits for another thread's (or process's) write to finish.
BUSY_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class IndexedRow:
    entry_id: str
    ord: int
    role: int
    tool_call_id: str
    call_ids: tuple[str, ...]
    token_count: int


@dataclass
class RecallUnit:
    """Messages recalled together: one message, or a tool call message with all its results (calls
    left unanswered in their turn stripped, as contextd.turns.pair_tools strips them)."""

    messages: list[types_pb2.Message]  # conversation order
    ords: list[int]
    tokens: int  # the host's counts, as ingested
    score: float  # bm25 of the best-matching message (lower is better)
    ids: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class SyncResult:
    imported: int  # messages new to the index
    updated: int  # messages whose content changed (a rewrite) or whose order was corrected
    removed: int  # messages the transcript now hides


class RecallIndex:
    """The index in the SQLite file at `path` (its directory is created)."""

    def __init__(self, path: str) -> None:
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        conn = self._conn()
        # executescript commits first by itself: the schema is one transaction of its own.
        conn.executescript(f"BEGIN IMMEDIATE;\n{SCHEMA}\nCOMMIT;")
        with self._write(conn):
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise RuntimeError(f"{path} holds recall index schema {row[0]}, this engine reads {SCHEMA_VERSION}")

    # -- connections ---------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise RuntimeError("the recall index is closed")
            # check_same_thread off only so that close() may close every thread's connection at shutdown;
            # each connection is used by the thread that opened it alone.
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # A forgotten session's text is overwritten where it was, not only unlinked (forget).
            conn.execute("PRAGMA secure_delete = ON")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    class _write:
        """An IMMEDIATE transaction: committed on success, rolled back on any exception."""

        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def __enter__(self) -> sqlite3.Connection:
            self.conn.execute("BEGIN IMMEDIATE")
            return self.conn

        def __exit__(self, kind, value, tb) -> None:  # type: ignore[no-untyped-def]
            self.conn.execute("COMMIT" if kind is None else "ROLLBACK")

    def close(self) -> None:
        """Closes every thread's connection (at shutdown, after the server drained)."""
        with self._lock:
            self._closed = True
            conns, self._connections = self._connections, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.ProgrammingError:
                pass  # opened by a thread that is gone; SQLite closes it with the process

    # -- writes --------------------------------------------------------------------------------

    def forget(self, session_id: str) -> bool:
        """Purges a deleted session (ForgetSession): its messages, their FTS5 entries, tool calls,
        recalled blocks and its row, in one transaction. Then the FTS5 index is merged into one
        segment ('optimize'), so the session's words leave the segments that still held them under a
        delete marker; secure_delete zeroes the freed pages, and a TRUNCATE checkpoint empties the
        write-ahead log that still held copies. The merge rewrites the whole index: its cost grows
        with the index, not the session. True when the index held anything of the session."""
        conn = self._conn()
        with self._write(conn):
            ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = ?", (session_id,))]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                conn.execute(f"DELETE FROM messages_fts WHERE rowid IN ({','.join('?' * len(chunk))})", chunk)
            purged = len(ids)
            purged += conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,)).rowcount
            purged += conn.execute("DELETE FROM tool_calls WHERE session_id = ?", (session_id,)).rowcount
            purged += conn.execute("DELETE FROM blocks WHERE session_id = ?", (session_id,)).rowcount
            purged += conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,)).rowcount
            if purged:
                conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
        if purged:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return purged > 0

    def ingest(self, session_id: str, messages: Iterable[types_pb2.Message]) -> int:
        """Adds messages the host has just appended, after everything known; messages already
        indexed (by entry id) are left as they are. Returns how many were new."""
        batch = [m for m in messages if m.id]
        if not batch:
            return 0
        conn = self._conn()
        added = 0
        with self._write(conn):
            self._ensure_session(conn, session_id)
            (top,) = conn.execute("SELECT coalesce(max(ord), 0) FROM messages WHERE session_id = ?", (session_id,)).fetchone()
            for message in batch:
                if self._row_id(conn, session_id, message.id) is not None:
                    continue
                top += 1
                self._insert(conn, session_id, message, top, 0)
                added += 1
        return added

    def sync_transcript(self, session_id: str, entries: Sequence[types_pb2.TranscriptEntry], check: Callable[[], None] = _nothing) -> SyncResult:
        """Makes the index agree with the host's transcript (whole history, oldest first): every
        visible message entry present with `ord` = its seq and its current revision; hidden ones
        (abandoned branches, resets, messages excluded from context) removed. `check` runs every few
        hundred entries and may raise to abandon the sync (rolled back: the call was cancelled)."""
        conn = self._conn()
        imported = updated = removed = 0
        with self._write(conn):
            self._ensure_session(conn, session_id)
            for n, entry in enumerate(entries):
                if n % CHECK_EVERY == 0:
                    check()
                if entry.WhichOneof("entry") != "message" or not entry.id:
                    continue
                found = conn.execute(
                    "SELECT id, ord, revision FROM messages WHERE session_id = ? AND entry_id = ?", (session_id, entry.id)
                ).fetchone()
                if entry.hidden:
                    if found is not None:
                        self._delete(conn, session_id, found[0], entry.id)
                        removed += 1
                    continue
                message = types_pb2.Message()
                message.CopyFrom(entry.message)
                message.id = entry.id
                if found is None:
                    self._insert(conn, session_id, message, int(entry.seq), entry.revision)
                    imported += 1
                elif found[2] != entry.revision:
                    self._delete(conn, session_id, found[0], entry.id)
                    self._insert(conn, session_id, message, int(entry.seq), entry.revision)
                    updated += 1
                elif found[1] != entry.seq:
                    conn.execute("UPDATE messages SET ord = ? WHERE id = ?", (int(entry.seq), found[0]))
                    updated += 1
            conn.execute("UPDATE sessions SET synced = 1 WHERE session_id = ?", (session_id,))
        return SyncResult(imported, updated, removed)

    def _ensure_session(self, conn: sqlite3.Connection, session_id: str) -> None:
        conn.execute("INSERT OR IGNORE INTO sessions(session_id, synced) VALUES (?, 0)", (session_id,))

    def _row_id(self, conn: sqlite3.Connection, session_id: str, entry_id: str) -> int | None:
        row = conn.execute("SELECT id FROM messages WHERE session_id = ? AND entry_id = ?", (session_id, entry_id)).fetchone()
        return None if row is None else int(row[0])

    def _insert(self, conn: sqlite3.Connection, session_id: str, message: types_pb2.Message, ord_: int, revision: int) -> None:
        calls = tool_call_ids(message)
        result_of = message.tool_call_id if message.role == types_pb2.ROLE_TOOL_RESULT else ""
        cur = conn.execute(
            "INSERT INTO messages(session_id, entry_id, ord, role, tool_call_id, call_ids, token_count, revision, body)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, message.id, ord_, int(message.role), result_of, " ".join(calls), int(message.token_count), revision, message.SerializeToString()),
        )
        conn.execute("INSERT INTO messages_fts(rowid, scope, body) VALUES (?, ?, ?)", (cur.lastrowid, scope_token(session_id), searchable_text(message)))
        for cid in calls:
            conn.execute("INSERT OR IGNORE INTO tool_calls(session_id, call_id, entry_id) VALUES (?, ?, ?)", (session_id, cid, message.id))

    def _delete(self, conn: sqlite3.Connection, session_id: str, row_id: int, entry_id: str) -> None:
        conn.execute("DELETE FROM messages WHERE id = ?", (row_id,))
        conn.execute("DELETE FROM messages_fts WHERE rowid = ?", (row_id,))
        conn.execute("DELETE FROM tool_calls WHERE session_id = ? AND entry_id = ?", (session_id, entry_id))

    # -- reads ---------------------------------------------------------------------------------

    def is_synced(self, session_id: str) -> bool:
        """True once the session's transcript has been read into the index (Bootstrap or a gap fill)."""
        row = self._conn().execute("SELECT synced FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        return bool(row and row[0])

    def count(self, session_id: str) -> int:
        return int(self._conn().execute("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0])

    def ords(self, session_id: str, entry_ids: Iterable[str]) -> dict[str, int]:
        """entry id -> ord for the ids the index holds."""
        out: dict[str, int] = {}
        ids = [i for i in entry_ids if i]
        conn = self._conn()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for entry_id, ord_ in conn.execute(
                f"SELECT entry_id, ord FROM messages WHERE session_id = ? AND entry_id IN ({marks})", (session_id, *chunk)
            ):
                out[entry_id] = int(ord_)
        return out

    def search(self, session_id: str, query: str, before_ord: int | None, limit: int) -> list[tuple[IndexedRow, float]]:
        """The session's messages (not system messages) matching the FTS5 `query`, best BM25 first,
        only those before `before_ord` (None: any)."""
        sql = (
            f"SELECT {_COLUMNS}, bm25(messages_fts, 0.0, 1.0) AS score"
            " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            " WHERE messages_fts MATCH ? AND m.session_id = ? AND m.role <> ? AND m.ord < ?"
            " ORDER BY score LIMIT ?"
        )
        match = f'scope : "{scope_token(session_id)}" AND body : ({query})'
        bound = before_ord if before_ord is not None else 2**62
        rows = self._conn().execute(sql, (match, session_id, types_pb2.ROLE_SYSTEM, bound, limit)).fetchall()
        return [(_row(r[:6]), float(r[6])) for r in rows]

    def recall_units(
        self, session_id: str, query: str, before_ord: int | None, limit: int = 50, check: Callable[[], None] = _nothing
    ) -> list[RecallUnit]:
        """The best matches as whole units, best first: a tool result comes with the message that
        called it, a tool call message with every result of its calls, paired within their turn as
        the view's turns are (tool_units.py). A result that answers no call in its turn is not
        recalled; a call that got no result in its turn (an aborted run) is stripped from its
        message as contextd.turns.pair_tools strips it (the message is left out if nothing else is
        in it): never a result without its call, nor a call without its result. Units reaching
        `before_ord` are left out too."""
        units: list[RecallUnit] = []
        seen: set[frozenset[str]] = set()
        bound = before_ord if before_ord is not None else 2**62
        turns: dict[int, tuple[list[IndexedRow], dict[int, int]]] = {}  # first ord -> rows, answered_calls
        for row, score in self.search(session_id, query, before_ord, limit):
            check()
            members = self._unit_rows(session_id, row, turns)
            if not members or any(m.ord >= bound for m in members):
                continue
            ids = frozenset(m.entry_id for m in members)
            if ids in seen:
                continue
            seen.add(ids)
            bodies = self._bodies(session_id, [m.entry_id for m in members])
            decoded = []
            for m in members:
                message = types_pb2.Message()
                message.ParseFromString(bodies[m.entry_id])
                decoded.append(message)
            # Strips the calls the turn left unanswered; the results are all answered (paired above).
            messages = pair_tools(decoded)
            if not messages:
                continue
            ord_of = {m.entry_id: m.ord for m in members}
            kept = frozenset(m.id for m in messages)
            units.append(RecallUnit(messages, [ord_of[m.id] for m in messages], total_tokens(messages), score, kept))
        return units

    def _unit_rows(
        self, session_id: str, row: IndexedRow, turns: dict[int, tuple[list[IndexedRow], dict[int, int]]]
    ) -> list[IndexedRow] | None:
        """The rows of `row`'s unit in conversation order (None: a result answering no call).
        `turns` caches the turns read so far, by their first ord: hits often share a turn."""
        conn = self._conn()
        found = conn.execute(
            "SELECT ord FROM messages WHERE session_id = ? AND role = ? AND ord <= ? ORDER BY ord DESC LIMIT 1",
            (session_id, types_pb2.ROLE_USER, row.ord),
        ).fetchone()
        first = int(found[0]) if found is not None else -(2**62)  # before any user message: the leading fragment
        if first not in turns:
            found = conn.execute(
                "SELECT ord FROM messages WHERE session_id = ? AND role = ? AND ord > ? ORDER BY ord LIMIT 1",
                (session_id, types_pb2.ROLE_USER, row.ord),
            ).fetchone()
            after = int(found[0]) if found is not None else 2**62
            rows = [
                _row(r)
                for r in conn.execute(
                    f"SELECT {_COLUMNS} FROM messages m WHERE m.session_id = ? AND m.ord >= ? AND m.ord < ? ORDER BY m.ord",
                    (session_id, first, after),
                )
            ]
            turns[first] = (rows, answered_calls(rows))
        rows, answer = turns[first]
        hit = next((i for i, r in enumerate(rows) if r.entry_id == row.entry_id), None)
        if hit is None:
            return None  # written or moved by another thread since the search (or since the turn was cached)
        members = unit_members(rows, hit, answer)
        return None if members is None else [rows[i] for i in members]

    # -- recalled blocks -------------------------------------------------------------------------

    def set_block(self, session_id: str, anchor_id: str, epoch: str, prompt: str, entry_ids: Sequence[str]) -> None:
        """Stores the block recalled for the turn of user message `anchor_id`, in the view `epoch`, for
        `prompt` (replacing the turn's previous one)."""
        conn = self._conn()
        with self._write(conn):
            conn.execute(
                "INSERT OR REPLACE INTO blocks(session_id, anchor_id, epoch, prompt, entry_ids) VALUES (?, ?, ?, ?, ?)",
                (session_id, anchor_id, epoch, prompt, json.dumps(list(entry_ids))),
            )

    def blocks(self, session_id: str, anchor_ids: Iterable[str], epoch: str) -> dict[str, tuple[str, list[str]]]:
        """anchor id -> (prompt, entry ids) for the anchors that have a block stored in view `epoch`."""
        out: dict[str, tuple[str, list[str]]] = {}
        ids = [i for i in anchor_ids if i]
        conn = self._conn()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for anchor, prompt, entry_ids in conn.execute(
                f"SELECT anchor_id, prompt, entry_ids FROM blocks WHERE session_id = ? AND epoch = ? AND anchor_id IN ({marks})",
                (session_id, epoch, *chunk),
            ):
                out[anchor] = (prompt, list(json.loads(entry_ids)))
        return out

    def messages(self, session_id: str, entry_ids: Sequence[str]) -> dict[str, types_pb2.Message]:
        """entry id -> the indexed message, for the ids the index holds."""
        out: dict[str, types_pb2.Message] = {}
        ids = list(dict.fromkeys(i for i in entry_ids if i))
        for start in range(0, len(ids), 500):
            for entry_id, body in self._bodies(session_id, ids[start : start + 500]).items():
                message = types_pb2.Message()
                message.ParseFromString(body)
                out[entry_id] = message
        return out

    def _bodies(self, session_id: str, entry_ids: list[str]) -> dict[str, bytes]:
        marks = ",".join("?" * len(entry_ids))
        rows = self._conn().execute(f"SELECT entry_id, body FROM messages WHERE session_id = ? AND entry_id IN ({marks})", (session_id, *entry_ids))
        return {entry_id: bytes(body) for entry_id, body in rows}


def _row(r: Sequence) -> IndexedRow:  # type: ignore[type-arg]
    return IndexedRow(r[0], int(r[1]), int(r[2]), r[3], tuple(r[4].split()) if r[4] else (), int(r[5]))
