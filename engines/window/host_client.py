"""Calls back into the host (contextd's HostService) during an engine call.

Every engine call that may reach the host carries a HostContext: the endpoint to dial, a token
scoped to this engine and session, and `expires_at_ms` (the deadline of the call in progress). The
window engine uses it for one thing: Compact delegates to HostService.DelegateCompaction, the
host's native compaction, which the host commits under this engine's id.
"""

import threading
import time

import grpc

from contextd.v1 import host_pb2, host_pb2_grpc

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    # A connection of its own, never shared with the registration heartbeat to the same contextd
    # (as the TypeScript SDK does): after a network partition a connection that kept writing into
    # the dead link resumes only when TCP's retransmission backoff next fires (up to minutes).
    ("grpc.use_local_subchannel_pool", 1),
]
# Used only when neither the caller nor the HostContext bounds the call (a correct host always does).
FALLBACK_TIMEOUT_S = 180.0


class HostCallError(Exception):
    """A host call that did not produce an answer: `code` is the grpc.StatusCode to answer with."""

    def __init__(self, code, details):
        super().__init__(details)
        self.code = code
        self.details = details


TRACE_KEYS = ("traceparent", "tracestate")


def trace_context(context) -> tuple[tuple[str, str], ...]:
    """The W3C trace context of our incoming call, to continue in the HostService call it makes.

    contextd's engine call carries `traceparent` (its span when tracing is on, else the runtime's
    own); handing it on keeps the HostService callback in the same trace.
    """
    metadata = context.invocation_metadata() or ()
    return tuple((k, v) for k, v in metadata if k in TRACE_KEYS and isinstance(v, str) and v)


def call_timeout(context, host, now=None):
    """Seconds the host call may take: what is left of our own call, and no later than the
    HostContext's expiry. None when neither bounds it."""
    now = time.time() if now is None else now
    timeout = None
    if host.expires_at_ms > 0:
        timeout = host.expires_at_ms / 1000.0 - now
    remaining = context.time_remaining()
    if remaining is not None:
        timeout = remaining if timeout is None else min(timeout, remaining)
    return timeout


class HostClient:
    """One channel per host endpoint, shared by every call (grpc channels are thread-safe)."""

    def __init__(self):
        self._channels = {}
        self._lock = threading.Lock()

    def _stub(self, endpoint):
        with self._lock:
            channel = self._channels.get(endpoint)
            if channel is None:
                channel = grpc.insecure_channel(endpoint, options=CHANNEL_OPTIONS)
                self._channels[endpoint] = channel
        return host_pb2_grpc.HostServiceStub(channel)

    def reset(self, endpoint):
        """Forgets the channel to `endpoint`, so the next call dials afresh. Called when a host call ran
        out of time: the connection may be stuck behind a partition that has since healed. Not
        closed here: calls still under way on it (other threads) finish on it, and the channel is
        closed when the last of them lets go of it."""
        with self._lock:
            self._channels.pop(endpoint, None)

    def close(self):
        with self._lock:
            channels = list(self._channels.values())
            self._channels.clear()
        for c in channels:
            c.close()

    def delegate_compaction(self, request, context):
        """HostService.DelegateCompaction for a ContextEngineService Compact `request`.

        Bounded by the caller's deadline and the HostContext's expiry; cancelled when our own call is
        cancelled. Returns the DelegateCompactionResponse or raises HostCallError.
        """
        if not request.HasField("host") or not request.host.endpoint:
            raise HostCallError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "Compact carried no HostContext, so the window engine cannot delegate compaction to the host",
            )
        host = request.host
        timeout = call_timeout(context, host)
        if timeout is None:
            timeout = FALLBACK_TIMEOUT_S
        if timeout <= 0:
            raise HostCallError(grpc.StatusCode.DEADLINE_EXCEEDED, "not calling HostService.DelegateCompaction: the call's deadline has passed")
        if not context.is_active():
            raise HostCallError(grpc.StatusCode.CANCELLED, "the Compact call was cancelled")
        future = self._stub(host.endpoint).DelegateCompaction.future(
            host_pb2.DelegateCompactionRequest(
                session=request.session,
                token_budget=request.token_budget,
                force=request.force,
                current_token_count=request.current_token_count,
                compaction_target=request.compaction_target,
                custom_instructions=request.custom_instructions,
            ),
            timeout=timeout,
            metadata=(("authorization", "Bearer " + host.token),) + trace_context(context),
        )
        # Our caller gave up (deadline or cancellation): so does the host call.
        if not context.add_callback(future.cancel):
            future.cancel()
        try:
            return future.result()
        except grpc.FutureCancelledError:
            raise HostCallError(grpc.StatusCode.CANCELLED, "the Compact call was cancelled; HostService.DelegateCompaction was cancelled with it")
        except grpc.RpcError as e:
            code = e.code() if callable(getattr(e, "code", None)) else grpc.StatusCode.UNKNOWN
            details = e.details() if callable(getattr(e, "details", None)) else str(e)
            if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
                self.reset(host.endpoint)
            raise HostCallError(code, "HostService.DelegateCompaction: %s" % details)
