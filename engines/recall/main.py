#!/usr/bin/python3
"""The `recall` context engine for contextd: fresh turns plus the earlier messages most relevant to
the prompt, from its own SQLite index of every message.

    /usr/bin/python3 engines/recall/main.py        (from anywhere: paths resolve from this file)

Environment: the engine SDK's (CONTEXTD_REGISTRY, CONTEXTD_OWNER, CONTEXTD_OWNER_TOKEN,
CONTEXTD_ENGINE_LISTEN, CONTEXTD_ENGINE_ADVERTISE, CONTEXTD_LOG_LEVEL, CONTEXTD_PARENT_PID) and:
  RECALL_DB             the index's SQLite file (default ./data/recall.db, relative to the working
                        directory; its directories are created)
  RECALL_HEARTBEAT_MS   registration heartbeat (default 2000)
  RECALL_GRACE_MS       how long in-flight calls may finish on SIGTERM (default 5000)
  RECALL_PARENT_PID     stop (gracefully) when this process is gone, for supervisors and tests
  RECALL_LOG_LEVEL      debug | info | warn | error (default: CONTEXTD_LOG_LEVEL, else info)

Exit codes: 0 after SIGTERM/SIGINT; 2, with a one-line reason on stderr, for bad configuration, an
index file that cannot be opened or an address that cannot be bound.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

# The engine's modules (index, selection, ...) sit next to this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import contextd.engine  # noqa: F401  installed, or on PYTHONPATH
except ModuleNotFoundError as err:
    if err.name not in ("contextd", "contextd.engine"):
        raise
    # Run from the repository (as config/contextd.yaml's managed sidecar does): the package is clients/python.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

from contextd.engine import serve_engine  # noqa: E402
from contextd.engine.env_options import serve_options_from_env  # noqa: E402
from index import RecallIndex  # noqa: E402
from recall_engine import recall_engine  # noqa: E402

DEFAULT_DB = os.path.join(".", "data", "recall.db")


def main() -> None:
    try:
        options = serve_options_from_env("RECALL")
    except ValueError as err:
        sys.stderr.write(f"recall: {err}\n")
        sys.exit(2)
    path = (os.environ.get("RECALL_DB") or "").strip() or DEFAULT_DB
    try:
        index = RecallIndex(path)
    except (OSError, sqlite3.Error, RuntimeError) as err:
        sys.stderr.write(f"recall: cannot open the index RECALL_DB={path}: {' '.join(str(err).split())}\n")
        sys.exit(2)
    serve_engine(recall_engine(index), on_shutdown=index.close, **options)


if __name__ == "__main__":
    main()
