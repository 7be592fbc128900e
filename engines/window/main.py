#!/usr/bin/python3
"""The `window` context engine for contextd: a sliding window over the host's transcript.

    /usr/bin/python3 engines/window/main.py        (from anywhere: paths resolve from this file)

Environment: the engine SDK's (CONTEXTD_REGISTRY, CONTEXTD_OWNER, CONTEXTD_OWNER_TOKEN,
CONTEXTD_ENGINE_LISTEN, CONTEXTD_ENGINE_ADVERTISE, CONTEXTD_LOG_LEVEL, CONTEXTD_PARENT_PID) and:
  WINDOW_MAX_TURNS      keep at most this many turns (default 0: as many as fit the budget)
  WINDOW_HEARTBEAT_MS   registration heartbeat (default 2000)
  WINDOW_GRACE_MS       how long in-flight calls may finish on SIGTERM (default 5000)
  WINDOW_PARENT_PID     stop (gracefully) when this process is gone, for supervisors and tests
  WINDOW_LOG_LEVEL      debug | info | warn | error (default: CONTEXTD_LOG_LEVEL, else info)

Exit codes: 0 after SIGTERM/SIGINT; 2, with a one-line reason on stderr, for bad configuration or an
address that cannot be bound.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

try:
    import contextd.engine  # noqa: F401  installed, or on PYTHONPATH
except ModuleNotFoundError as err:
    if err.name not in ("contextd", "contextd.engine"):
        raise
    # Run from the repository (as config/contextd.yaml's managed sidecar does): the package is clients/python.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

from contextd.engine import serve_engine  # noqa: E402
from contextd.engine.env_options import int_env, serve_options_from_env  # noqa: E402
from window_engine import window_engine  # noqa: E402


def main() -> None:
    try:
        max_turns = int_env("WINDOW_MAX_TURNS", 0) or 0
        options = serve_options_from_env("WINDOW")
    except ValueError as err:
        sys.stderr.write(f"window: {err}\n")
        sys.exit(2)
    serve_engine(window_engine(max_turns), **options)


if __name__ == "__main__":
    main()
