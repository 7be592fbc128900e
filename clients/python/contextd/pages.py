"""Following page tokens, without the I/O: one source for Client's iterators and AsyncClient's.

A pager says which page to ask for next (`next()`: the request's fields, or None when done) and what
of an answered page to hand out (`take(page)`). The clients' `transcript()` and `search()` are the
loop around it, one blocking and one awaiting:

    pages = TranscriptPages(session, page_size)
    while (fields := pages.next()) is not None:
        yield from pages.take(cx.get_transcript(**fields))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextd.sessions import SessionLike, session_ref
from contextd.v1 import search_pb2 as SR
from contextd.v1 import session_pb2 as S
from contextd.v1 import types_pb2

__all__ = ["SearchPages", "TranscriptPages"]

#: SearchTranscript's largest page (search.proto, page_size).
SEARCH_PAGE_MAX = 100


class TranscriptPages:
    """Every entry of a session's transcript, in order, to the last page."""

    def __init__(self, session: SessionLike, page_size: int) -> None:
        self._ref = session_ref(session)
        self._page_size = page_size
        self._token: str | None = ""

    def next(self) -> dict[str, Any] | None:
        if self._token is None:
            return None
        return {"session": self._ref, "page_size": self._page_size, "page_token": self._token}

    def take(self, page: S.GetTranscriptResponse) -> list[types_pb2.TranscriptEntry]:
        self._token = page.next_page_token or None
        return list(page.entries)


class SearchPages:
    """At most `limit` hits of a search, following pages until the limit or the last page."""

    def __init__(self, session: SessionLike, query: str, limit: int, fields: Mapping[str, Any]) -> None:
        self._ref = session_ref(session)
        self._query = query
        self._fields = dict(fields)
        self._left = limit
        self._token: str | None = ""

    def next(self) -> dict[str, Any] | None:
        if self._token is None or self._left <= 0:
            return None
        page_size = min(self._left, SEARCH_PAGE_MAX)
        return {"session": self._ref, "query": self._query, "page_size": page_size, "page_token": self._token, **self._fields}

    def take(self, page: SR.SearchTranscriptResponse) -> list[SR.SearchHit]:
        hits = list(page.hits)[: self._left]
        self._left -= len(hits)
        self._token = page.next_page_token or None
        return hits
