"""Engine ids, by the rule contextd applies (src/contract/engine-id.ts).

An engine id is a config key, a metric label and a log field: ASCII letters, digits, `.`, `_` and
`-`, starting with a letter or digit, at most 128 characters. `legacy` in any case belongs to
contextd's built-in engine, so an engine of one's own can never pass for it.
"""

from __future__ import annotations

import re

LEGACY_ENGINE_ID = "legacy"
MAX_ENGINE_ID_LENGTH = 128

_ENGINE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def engine_id_problem(engine_id: str) -> str | None:
    """Why `engine_id` cannot be an engine's own id, or None when it can."""
    if engine_id == "":
        return "is empty"
    if len(engine_id) > MAX_ENGINE_ID_LENGTH:
        return f"is longer than {MAX_ENGINE_ID_LENGTH} characters ({len(engine_id)})"
    # fullmatch with an explicit ASCII class: str.isalnum() and \w would admit other scripts.
    if not _ENGINE_ID.fullmatch(engine_id):
        return "may hold only ASCII letters, digits, '.', '_' and '-', and must start with a letter or digit"
    if engine_id.lower() == LEGACY_ENGINE_ID:
        return f"is reserved for contextd's built-in engine ({LEGACY_ENGINE_ID!r} in any case)"
    return None
