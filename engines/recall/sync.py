"""Bringing the index up to date from the host's transcript (HostService.ReadTranscript).

The index learns of messages by Ingest. It reads the transcript instead when it cannot have seen
everything:

- `bootstrap`: a session it does not know (first call for it, a fresh or deleted index file) is
  read whole. For a session it knows, only the active view is read (one page) and compared with
  the index; any entry the index lacks (appends made while the engine was down or while contextd
  had it quarantined) makes it read the whole transcript.
- `fill_gaps`: on Assemble, when the view holds entry ids the index never saw, the same whole read,
  bounded by half of what is left of the call's deadline so that the answer still fits in it. A
  failed read is logged and Assemble goes on with what the index has (the fresh turns come from the
  view itself; only recall of the missing messages is lost).
"""

from __future__ import annotations

from collections.abc import Sequence

from contextd.engine import CallContext, HostCallError
from contextd.v1 import types_pb2
from index import RecallIndex, SyncResult
from selection import is_summary

#: Share of the remaining deadline a gap fill on Assemble may spend reading the transcript.
GAP_FILL_SHARE = 0.5


def missing_ids(index: RecallIndex, session_id: str, view: Sequence[types_pb2.Message]) -> set[str]:
    """Entry ids of the view's messages the index lacks (the summary is no message entry)."""
    return _missing(index, session_id, {m.id for m in view if m.id and not is_summary(m)})


def _missing(index: RecallIndex, session_id: str, ids: set[str]) -> set[str]:
    return ids - index.ords(session_id, ids).keys() if ids else set()


def read_all(index: RecallIndex, session: types_pb2.SessionRef, ctx: CallContext, timeout: float | None = None) -> SyncResult:
    """Reads the whole transcript into the index (raises HostCallError)."""
    assert ctx.host is not None
    entries = ctx.host.read_whole_transcript(session, timeout=timeout)
    ctx.raise_if_cancelled()
    return index.sync_transcript(session.session_id, entries, check=ctx.raise_if_cancelled)


def bootstrap(index: RecallIndex, session: types_pb2.SessionRef, ctx: CallContext) -> dict:
    """The Bootstrap answer (see the module doc)."""
    sid = session.session_id
    if ctx.host is None:
        return {"bootstrapped": False, "reason": "no HostContext: cannot read the transcript"}
    if index.is_synced(sid):
        view = ctx.host.read_transcript(session=session, active_only=True)
        ids = {e.id for e in view.entries if e.WhichOneof("entry") == "message" and not e.hidden}
        if not _missing(index, sid, ids):
            ctx.log.info("session already indexed", extra={"session": sid, "view_entries": len(ids)})
            return {"bootstrapped": True, "imported_messages": 0, "reason": "already indexed"}
    result = read_all(index, session, ctx)
    ctx.log.info(
        "bootstrapped from the transcript",
        extra={"session": sid, "imported": result.imported, "updated": result.updated, "removed": result.removed},
    )
    return {"bootstrapped": True, "imported_messages": result.imported, "reason": f"indexed {result.imported} messages from the transcript"}


def fill_gaps(index: RecallIndex, session: types_pb2.SessionRef, view: Sequence[types_pb2.Message], ctx: CallContext) -> SyncResult | None:
    """Reads the transcript when the view holds messages the index lacks; None when it did not."""
    missing = missing_ids(index, session.session_id, view)
    if not missing:
        return None
    fields = {"session": session.session_id, "missing": len(missing)}
    if ctx.host is None:
        ctx.log.warning("the view holds messages the index never saw, and there is no HostContext to read them", extra=fields)
        return None
    remaining = ctx.time_remaining()
    try:
        result = read_all(index, session, ctx, timeout=None if remaining is None else remaining * GAP_FILL_SHARE)
    except HostCallError as err:
        ctx.raise_if_cancelled()
        ctx.log.warning("could not read the transcript to fill the index's gaps; assembling without them", extra={**fields, "error": str(err)})
        return None
    ctx.log.info("filled the index's gaps from the transcript", extra={**fields, "imported": result.imported, "updated": result.updated})
    return result
