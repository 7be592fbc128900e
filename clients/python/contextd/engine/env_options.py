"""An engine's own environment variables, for its main program: `<PREFIX>_HEARTBEAT_MS`,
`<PREFIX>_GRACE_MS`, `<PREFIX>_PARENT_PID`, `<PREFIX>_LOG_LEVEL` as `serve_engine` options (the SDK
reads the CONTEXTD_* ones itself), and integer settings checked the same way."""

from __future__ import annotations

import os
from typing import Any


def int_env(name: str, minimum: int) -> int | None:
    """The integer in variable `name`, None when unset or blank; ValueError naming it otherwise."""
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def serve_options_from_env(prefix: str) -> dict[str, Any]:
    """serve_engine options from the `<prefix>_*` variables that are set."""
    options: dict[str, Any] = {}
    if (heartbeat_ms := int_env(f"{prefix}_HEARTBEAT_MS", 1)) is not None:
        options["heartbeat"] = heartbeat_ms / 1000
    if (grace_ms := int_env(f"{prefix}_GRACE_MS", 1)) is not None:
        options["drain_timeout"] = grace_ms / 1000
    if (parent_pid := int_env(f"{prefix}_PARENT_PID", 1)) is not None:
        options["parent_pid"] = parent_pid
    if level := (os.environ.get(f"{prefix}_LOG_LEVEL") or "").strip():
        options["log_level"] = level
    return options
