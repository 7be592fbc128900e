"""Turning a client method's arguments into its request proto.

Every Client method takes either the request proto itself or that request's fields as keywords
(`cx.assemble(session="chat-42", token_budget=32000)`). The keywords are checked here against the
request's descriptor, so a misspelt field or a value of the wrong type is a TypeError / ValueError
naming `Request.field` — protobuf's own messages ("'x' has type str, but expected one of: int")
do not say which field they mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from contextd.sessions import session_ref
from contextd.v1 import types_pb2

__all__ = ["build_request"]

R = TypeVar("R", bound=Message)

_SESSION_REF = types_pb2.SessionRef.DESCRIPTOR.full_name


def build_request(request_type: type[R], request: R | None, fields: Mapping[str, Any], method: str) -> R:
    """The `request_type` message for `method(request)` or `method(**fields)`.

    A field of type SessionRef (`session`, `parent`, `child`) also takes what `session_ref` takes.
    Raises TypeError for a request of another type, both forms at once, or an unknown field; the
    error of a value protobuf refuses is re-raised (same type) with `Request.field` in front.
    """
    name = request_type.DESCRIPTOR.name
    if request is not None:
        if fields:
            raise TypeError(f"{method}() takes a {name} or its fields as keywords, not both")
        if not isinstance(request, request_type):
            raise TypeError(f"{method}() takes a {name}, got {type(request).__name__}")
        return request
    by_name = request_type.DESCRIPTOR.fields_by_name
    built = request_type()
    for key, value in fields.items():
        field = by_name.get(key)
        if field is None:
            known = ", ".join(by_name)
            raise TypeError(f"{method}() got an unknown field {key!r}: {name} has {known}")
        if value is None:
            # None means "not set", as for an omitted keyword (protobuf would refuse it for scalars).
            continue
        if field.message_type is not None and field.message_type.full_name == _SESSION_REF and not _repeated(field):
            value = session_ref(value, key)
        try:
            built.MergeFrom(request_type(**{key: value}))
        except (TypeError, ValueError) as err:
            raise type(err)(f"{name}.{key}: {err}") from err
    return built


def _repeated(field: FieldDescriptor) -> bool:
    return field.label == FieldDescriptor.LABEL_REPEATED
