"""Naming a session in fewer keystrokes than `SessionRef(session_id=...)`.

Every SessionService call names a session (or a parent and a child); runtimes mostly know it by an
id, sometimes with the agent it belongs to. `session_ref` accepts each of those spellings and turns
anything else away with a TypeError naming the field, before a request is sent — so a mistake is a
Python error at the line that made it, not a status from the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Union

from contextd.v1 import types_pb2

__all__ = ["SessionLike", "session_ref"]

#: What a `session=` (or `parent=` / `child=`) argument may be: a SessionRef; a session id; a
#: (session_id, agent_id) pair; or a dict of SessionRef fields.
SessionLike = Union[types_pb2.SessionRef, str, "tuple[str, str]", Mapping[str, str]]

_FIELDS = ("session_id", "session_key", "agent_id")


def session_ref(value: SessionLike, field: str = "session") -> types_pb2.SessionRef:
    """The SessionRef `value` names. `field` is only for the error message.

        session_ref("chat-42")                    -> SessionRef(session_id="chat-42")
        session_ref(("chat-42", "coder"))         -> SessionRef(session_id="chat-42", agent_id="coder")
        session_ref({"session_id": "chat-42", "session_key": "k"})

    The ids are not checked here: contextd checks them (INVALID_ARGUMENT naming the field), and one
    set of rules in one place is easier to keep right than two.
    """
    if isinstance(value, types_pb2.SessionRef):
        return value
    if isinstance(value, str):
        return types_pb2.SessionRef(session_id=value)
    if isinstance(value, tuple):
        if len(value) == 2 and all(isinstance(v, str) for v in value):
            return types_pb2.SessionRef(session_id=value[0], agent_id=value[1])
        raise TypeError(f"{field}: a tuple must be (session_id, agent_id), two strings; got {len(value)} items")
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in _FIELDS)
        if unknown:
            raise TypeError(f"{field}: unknown SessionRef field(s) {', '.join(unknown)} (fields: {', '.join(_FIELDS)})")
        bad = sorted(str(k) for k, v in value.items() if not isinstance(v, str))
        if bad:
            raise TypeError(f"{field}: {', '.join(f'{field}.{k}' for k in bad)} must be a string")
        return types_pb2.SessionRef(**value)
    raise TypeError(
        f"{field}: expected a SessionRef, a session id, a (session_id, agent_id) tuple or a dict; "
        f"got {type(value).__name__}"
    )
