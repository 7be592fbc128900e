from contextd.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
SEARCH_ORDER_NEWEST: SearchOrder
SEARCH_ORDER_RELEVANCE: SearchOrder
SEARCH_ORDER_UNSPECIFIED: SearchOrder
SEARCH_SCOPE_AGENT: SearchScope
SEARCH_SCOPE_SESSION: SearchScope
SEARCH_SCOPE_UNSPECIFIED: SearchScope

class ExpandCompactionRequest(_message.Message):
    __slots__ = ["compaction_entry_id", "page_size", "page_token", "session"]
    COMPACTION_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    compaction_entry_id: str
    page_size: int
    page_token: str
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., compaction_entry_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ExpandCompactionResponse(_message.Message):
    __slots__ = ["entries", "next_page_token", "previous_compaction_entry_id"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_COMPACTION_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[_types_pb2.TranscriptEntry]
    next_page_token: str
    previous_compaction_entry_id: str
    def __init__(self, entries: _Optional[_Iterable[_Union[_types_pb2.TranscriptEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., previous_compaction_entry_id: _Optional[str] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ["compaction", "entry_id", "hidden", "role", "score", "seq", "session_id", "snippet", "timestamp_ms"]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    compaction: bool
    entry_id: str
    hidden: bool
    role: _types_pb2.Role
    score: float
    seq: int
    session_id: str
    snippet: str
    timestamp_ms: int
    def __init__(self, entry_id: _Optional[str] = ..., session_id: _Optional[str] = ..., seq: _Optional[int] = ..., role: _Optional[_Union[_types_pb2.Role, str]] = ..., compaction: bool = ..., timestamp_ms: _Optional[int] = ..., hidden: bool = ..., snippet: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class SearchTranscriptRequest(_message.Message):
    __slots__ = ["order", "page_size", "page_token", "query", "scope", "session"]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    order: SearchOrder
    page_size: int
    page_token: str
    query: str
    scope: SearchScope
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., query: _Optional[str] = ..., scope: _Optional[_Union[SearchScope, str]] = ..., order: _Optional[_Union[SearchOrder, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class SearchTranscriptResponse(_message.Message):
    __slots__ = ["hits", "next_page_token"]
    HITS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    next_page_token: str
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SearchScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SearchOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
