"""Pinned messages: what an engine choosing a subset of the host's active view must always keep.

docs/pinned-messages.md. Two kinds of message are pinned:

- every system message (``ROLE_SYSTEM``): the host never summarizes one away; after a compaction
  the system messages from before its cut head the view verbatim, those after it stay in place;
- the host's compaction summary (metadata ``contextd.kind`` = ``compaction_summary``): it is the
  only account of what came before it.

Pinned messages count against the token budget like any other; an engine fits the rest into what
they leave. The Python counterpart of ``isPinned`` / ``splitPinned`` in ``contextd/engine-sdk``.
This module imports only the generated types, so engines and tools can use it without the client.

    pinned, rest = split_pinned(request.messages)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from contextd.v1 import types_pb2

__all__ = ["is_pinned", "is_system", "split_pinned"]

# The same marker as contextd.messages.SUMMARY_METADATA_KEY / _VALUE (src/contract/messages.ts),
# repeated so that this module needs nothing but the generated types.
_SUMMARY_KEY = "contextd.kind"
_SUMMARY_VALUE = "compaction_summary"

M = TypeVar("M", bound=types_pb2.Message)


def is_system(message: types_pb2.Message) -> bool:
    """A system message: never summarized by the host, never dropped by an engine."""
    return message.role == types_pb2.ROLE_SYSTEM


def is_pinned(message: types_pb2.Message) -> bool:
    """A system message or the host's compaction summary: kept whatever the budget."""
    return is_system(message) or message.metadata.get(_SUMMARY_KEY) == _SUMMARY_VALUE


def split_pinned(messages: Iterable[M]) -> tuple[list[M], list[M]]:
    """``(pinned, rest)``: the pinned messages and all the others, each in view order."""
    pinned: list[M] = []
    rest: list[M] = []
    for message in messages:
        (pinned if is_pinned(message) else rest).append(message)
    return pinned, rest
