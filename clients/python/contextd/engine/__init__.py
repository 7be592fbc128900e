"""The contextd engine SDK: write a context engine as plain functions, serve it as a sidecar.

    from contextd.engine import Engine, delegate_compaction_to_host, serve_engine

    def assemble(req, ctx):
        return {"messages": req.messages[-20:]}

    serve_engine(Engine(id="last-20", name="The last 20 messages", assemble=assemble,
                        compact=delegate_compaction_to_host))

- `Engine` (a dataclass): `id`, `name`, `assemble`, `compact` and optional methods; which optional
  methods are set decides EngineInfo.capabilities. Each method is `fn(request, ctx)` — a plain `def`
  or an `async def` — and returns the response proto, a dict of its fields or None; Assemble's `estimated_tokens` defaults to the sum
  of the returned messages' token counts. `keep_messages(request, chosen)` answers the request's
  messages an engine keeps by id (kept_entry_ids) instead of sending them back.
- `CallContext` (`ctx`): `deadline`, `time_remaining()`, `cancelled` (a threading.Event set when the
  caller cancels or the deadline passes), `cancel_cause`, `on_cancel(fn)`, `raise_if_cancelled()`,
  `host` (a `HostClient` for HostService, bounded by the call and cancelled with it; an
  `AsyncHostClient` to await in an `async def` method), `log`
  (a logging adapter: `ctx.log.info("msg", extra={...})`), `method`, `metadata`, `request_id`.
- Errors: raise `EngineError(grpc.StatusCode.X, "why")` to answer that status; a `HostCallError`
  passes on the host's; anything else answers INTERNAL with its message.
- `serve_engine(engine, **options)` (see `ServeOptions`): serves contextd.v1.ContextEngineService
  and grpc.health.v1, registers with contextd's registry (CONTEXTD_REGISTRY, CONTEXTD_OWNER,
  CONTEXTD_OWNER_TOKEN), registers again after a contextd restart, and on SIGTERM goes NOT_SERVING,
  deregisters, drains and exits 0 — as the TypeScript SDK (src/sdk/engine) does. An engine with an
  `async def` method is served on grpc.aio, on an event loop of its own (`RunningEngine.loop`): its
  coroutines run concurrently there, and a call that ends under one cancels it at its `await`
  (asyncio.CancelledError; `ctx.cancel_cause` says why); its plain methods run in worker threads. Logs are JSON lines
  on stderr. A bad start prints one line and exits 2 (or raises EngineStartError with block=False).
"""

from __future__ import annotations

import os
from typing import Any

# gRPC core writes plain-text diagnostics to stderr; an engine logs JSON lines only, unless
# GRPC_VERBOSITY asks for gRPC's (it must be set before grpc first initialises).
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from .call_context import CallContext  # noqa: E402
from .definition import PROTOCOL_VERSIONS, Engine, EngineMethod  # noqa: E402
from .delegate import delegate_compaction_to_host  # noqa: E402
from .engine_id import engine_id_problem  # noqa: E402
from .errors import (  # noqa: E402
    EngineDefinitionError,
    EngineError,
    EngineStartError,
    HostCallError,
    RegistrationError,
    ServeOptionsError,
)
from .host_client import AsyncHostClient, HostClient  # noqa: E402
from .kept import keep_messages  # noqa: E402
from .logs import EngineLogger, JsonFormatter  # noqa: E402
from .options import ServeOptions  # noqa: E402
from .registration import RegistrationStatus  # noqa: E402
from .serve import RunningEngine, serve_engine  # noqa: E402

__all__ = [
    "PROTOCOL_VERSIONS",
    "AsyncHostClient",
    "CallContext",
    "Engine",
    "EngineDefinitionError",
    "EngineError",
    "EngineLogger",
    "EngineMethod",
    "EngineStartError",
    "HostCallError",
    "HostClient",
    "JsonFormatter",
    "RegistrationError",
    "RegistrationStatus",
    "RunningEngine",
    "ServeOptions",
    "ServeOptionsError",
    "delegate_compaction_to_host",
    "engine_id_problem",
    "keep_messages",
    "serve_engine",
    "split_pinned",
]


def __getattr__(name: str) -> Any:
    # split_pinned lives in contextd.pinned (shared with runtimes); imported on first use so the SDK
    # does not depend on it at import time.
    if name in ("split_pinned", "is_pinned"):
        from contextd import pinned

        return getattr(pinned, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
