from contextd.v1 import search_pb2 as _search_pb2
from contextd.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompleteRequest(_message.Message):
    __slots__ = ["max_tokens", "messages", "session", "system"]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    session: _types_pb2.SessionRef
    system: str
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., system: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., max_tokens: _Optional[int] = ...) -> None: ...

class CompleteResponse(_message.Message):
    __slots__ = ["text", "usage"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    text: str
    usage: _types_pb2.Usage
    def __init__(self, text: _Optional[str] = ..., usage: _Optional[_Union[_types_pb2.Usage, _Mapping]] = ...) -> None: ...

class DelegateCompactionRequest(_message.Message):
    __slots__ = ["compaction_target", "current_token_count", "custom_instructions", "force", "session", "token_budget"]
    COMPACTION_TARGET_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    compaction_target: _types_pb2.CompactionTarget
    current_token_count: int
    custom_instructions: str
    force: bool
    session: _types_pb2.SessionRef
    token_budget: int
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., token_budget: _Optional[int] = ..., force: bool = ..., current_token_count: _Optional[int] = ..., compaction_target: _Optional[_Union[_types_pb2.CompactionTarget, str]] = ..., custom_instructions: _Optional[str] = ...) -> None: ...

class DelegateCompactionResponse(_message.Message):
    __slots__ = ["compacted", "ok", "reason", "result"]
    COMPACTED_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    compacted: bool
    ok: bool
    reason: str
    result: _types_pb2.CompactionResult
    def __init__(self, ok: bool = ..., compacted: bool = ..., reason: _Optional[str] = ..., result: _Optional[_Union[_types_pb2.CompactionResult, _Mapping]] = ...) -> None: ...

class EntryRewrite(_message.Message):
    __slots__ = ["entry_id", "message"]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    entry_id: str
    message: _types_pb2.Message
    def __init__(self, entry_id: _Optional[str] = ..., message: _Optional[_Union[_types_pb2.Message, _Mapping]] = ...) -> None: ...

class HostServiceSearchTranscriptRequest(_message.Message):
    __slots__ = ["order", "page_size", "page_token", "query", "session"]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    order: _search_pb2.SearchOrder
    page_size: int
    page_token: str
    query: str
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., query: _Optional[str] = ..., order: _Optional[_Union[_search_pb2.SearchOrder, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class HostServiceSearchTranscriptResponse(_message.Message):
    __slots__ = ["hits", "next_page_token"]
    HITS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[_search_pb2.SearchHit]
    next_page_token: str
    def __init__(self, hits: _Optional[_Iterable[_Union[_search_pb2.SearchHit, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ReadTranscriptRequest(_message.Message):
    __slots__ = ["active_only", "page_size", "page_token", "session"]
    ACTIVE_ONLY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    active_only: bool
    page_size: int
    page_token: str
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., active_only: bool = ...) -> None: ...

class ReadTranscriptResponse(_message.Message):
    __slots__ = ["entries", "next_page_token"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[_types_pb2.TranscriptEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[_types_pb2.TranscriptEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RewriteTranscriptEntriesRequest(_message.Message):
    __slots__ = ["reason", "rewrites", "session"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REWRITES_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    reason: str
    rewrites: _containers.RepeatedCompositeFieldContainer[EntryRewrite]
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., rewrites: _Optional[_Iterable[_Union[EntryRewrite, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class RewriteTranscriptEntriesResponse(_message.Message):
    __slots__ = ["bytes_freed", "rewritten_entries"]
    BYTES_FREED_FIELD_NUMBER: _ClassVar[int]
    REWRITTEN_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    bytes_freed: int
    rewritten_entries: int
    def __init__(self, rewritten_entries: _Optional[int] = ..., bytes_freed: _Optional[int] = ...) -> None: ...
