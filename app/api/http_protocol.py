"""uvicorn's HTTP protocol (httptools) with a header timeout and a problem+json 503.

uvicorn (0.54) closes idle keep-alive connections (``timeout_keep_alive``) but sets no
timer while a request's headers arrive, nor before the first byte of a new connection: 1,100
connections that never finished their headers were held open for as long as their clients
liked (issue 19). This subclass starts a timer when a connection is accepted and when the
first byte of each later request arrives, and stops it when the headers are complete; when
it fires the connection is answered 408 problem+json (when nothing else is being written on
it) and closed. The body's own time limit is enforced in ASGI (app/api/body_limits.py).

It also keeps the budgets of app/api/capacity.py, in place of uvicorn's
``limit_concurrency`` (which counted every connection against one limit, so that waiting
pulls locked probes and operators out): an ordinary request is admitted while fewer than
``JOBMATCH_MAX_CONNECTIONS`` connections are open besides the waiting pulls; a long-poll
pull goes on to the wake-up hub, which keeps the waiting budget; probes and the admin
token always pass. A connection beyond both budgets is answered 503 when accepted and
closed. Every refusal is a problem+json 503 with Retry-After, counted by
``jobmatch_overload_refusals_total``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from http import HTTPStatus
from typing import Any, cast

from starlette.types import Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from app.api import capacity
from app.api.longpoll import STATE_KEY
from app.api.problems import PROBLEM_JSON, problem_document
from app.api.rate_limits import is_long_poll_pull
from app.api.raw_problems import send_problem
from app.metrics import REFUSED_OVERLOADED
from app.settings import get_settings

OVERLOADED = (
    "the server process has as many connections open for requests as it accepts "
    "(JOBMATCH_MAX_CONNECTIONS)"
)
FULL = (
    "the server process has as many connections open as its budgets allow "
    "(JOBMATCH_MAX_CONNECTIONS and JOBMATCH_MAX_WAITING_PULLS)"
)

#: Requests admitted whatever the budgets: what a load balancer and a monitor ask.
PROBES = frozenset({"/healthz", "/readyz", "/metrics"})


def raw_problem(status: int, detail: str, headers: dict[str, str] | None = None) -> bytes:
    """A whole problem+json response, written to the transport as bytes, for a connection
    that has no request (hence no ASGI scope) to answer through; the connection closes."""
    document = problem_document(status, detail, "")
    del document["instance"]
    body = json.dumps(document).encode()
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        f"content-type: {PROBLEM_JSON}",
        f"content-length: {len(body)}",
        *(f"{name}: {value}" for name, value in (headers or {}).items()),
        "connection: close",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def header_timeout_response(timeout: float) -> bytes:
    """The raw 408 sent when a request's headers did not arrive in time."""
    return raw_problem(
        408,
        f"the request headers did not arrive within {timeout:g} s "
        "(JOBMATCH_HEADER_TIMEOUT_SECONDS)",
    )


def full_response() -> bytes:
    """The raw 503 sent to a connection accepted beyond both budgets (no request yet)."""
    return raw_problem(503, FULL, {"retry-after": "1"})


async def overloaded(scope: Scope, receive: Receive, send: Send) -> None:
    """What an ordinary request gets while the process has its maximum of connections
    open for requests."""
    REFUSED_OVERLOADED.labels("connections").inc()
    await send_problem(scope, send, 503, OVERLOADED, headers={"Retry-After": "1"}, close=True)


def _is_admin(scope: Scope, admin_token: bytes | None) -> bool:
    """Whether the request carries the configured admin token (compared in constant time)."""
    if admin_token is None:
        return False
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return hmac.compare_digest(value, b"Bearer " + admin_token)
    return False


class LimitedHttpProtocol(HttpToolsProtocol):
    """HttpToolsProtocol with a header timeout and a problem+json 503 (module docstring)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        settings = get_settings()
        self.header_timeout = settings.header_timeout_seconds
        self.header_timer: asyncio.TimerHandle | None = None
        self.budgets = capacity.budgets()
        token = settings.admin_token
        self.admin_token = token.get_secret_value().encode("latin-1") if token else None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.budgets.total:
            # Beyond both budgets: answered and closed now, so that the reserve's file
            # descriptors (the database's connections) stay free.
            REFUSED_OVERLOADED.labels("connections").inc()
            transport.write(full_response())
            transport.close()
            return
        self._start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # The first request's timer runs from the accept; a later request's from its
        # first byte (the keep-alive timeout covers the idle time before it).
        if self.header_timer is None:
            self._start_header_timer()

    def on_headers_complete(self) -> None:
        self._stop_header_timer()
        super().on_headers_complete()

    def shutdown(self) -> None:
        """The server is shutting down: waiting pulls answer now instead of holding the
        exit for up to their whole wait (app/api/longpoll.py)."""
        hub = self.app_state.get(STATE_KEY)
        if hub is not None:
            hub.close()
        super().shutdown()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        if app is service_unavailable or not self._admitted(cast(Scope, cycle.scope)):
            app = overloaded
        super()._start_asgi_task(cycle, app)

    def _admitted(self, scope: Scope) -> bool:
        """Whether the request fits its budget (module docstring)."""
        path = scope.get("path", "")
        if path in PROBES or is_long_poll_pull(
            scope.get("method", ""), path, scope.get("query_string", b"")
        ):
            return True  # a waiting pull's budget is the hub's (app/matching/wakeups.py)
        hub = self.app_state.get(STATE_KEY)
        waiting = hub.waiting if hub is not None else 0
        if len(self.connections) - waiting <= self.budgets.connections:
            return True
        return _is_admin(scope, self.admin_token)

    def _start_header_timer(self) -> None:
        self.header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _stop_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _headers_too_slow(self) -> None:
        self.header_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            # Nothing else is being written: the client may learn why it was cut off.
            self.transport.write(header_timeout_response(self.header_timeout))
        self.transport.close()
