"""Request ids and access logs, as plain ASGI middleware (no body buffering)."""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.auth import PRINCIPAL_SCOPE_KEY, Principal
from app.logs import request_id
from app.metrics import REQUEST_LATENCY

log = logging.getLogger("app.access")
_VALID_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")

#: Probes a load balancer or an orchestrator sends every few seconds.
_PROBES = frozenset({"/healthz", "/readyz"})


def access_level(path: str, status: int) -> int:
    """DEBUG for what repeats all day and says nothing: health probes and pulls that found
    no work (204, most of an idle worker's requests); INFO for everything else."""
    if path in _PROBES or (status == 204 and path.endswith("/pull")):
        return logging.DEBUG
    return logging.INFO


def _caller(scope: Scope) -> dict[str, str]:
    """The role and subject of the token the gate accepted, when the route needed one."""
    principal = scope.get(PRINCIPAL_SCOPE_KEY)
    if not isinstance(principal, Principal):
        return {}
    return {"role": principal.role.value, "subject": principal.subject}


@dataclass
class _Answer:
    """What the access log and the latency histogram learn of a request's answer."""

    #: The status sent (500 until one is: a request that ended without an answer).
    code: int = 500
    #: Whether its latency was counted (once, at the last byte or at the end).
    observed: bool = False


class RequestIdMiddleware:
    """Takes X-Request-ID from the client (when sane) or makes one, logs it on every line
    and returns it in the response headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers", [])).get(b"x-request-id", b"").decode("latin-1")
        rid = incoming if _VALID_ID.match(incoming) else uuid.uuid4().hex
        token = request_id.set(rid)
        started = time.perf_counter()
        answer = _Answer()

        def observe_latency() -> None:
            if not answer.observed:
                answer.observed = True
                route = getattr(scope.get("route"), "path", "unmatched")
                REQUEST_LATENCY.labels(scope["method"], route, str(answer.code)).observe(
                    time.perf_counter() - started
                )

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer.code = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                # Counted before the last byte leaves: a client that has its answer may
                # ask /metrics (of any process) next, and must find it counted. Counted
                # after, a scrape right after a scrape missed the first (CI, three
                # processes).
                observe_latency()
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            observe_latency()  # a request that ended without a complete answer
            level = access_level(scope["path"], answer.code)
            if log.isEnabledFor(level):
                _log_access(scope, answer.code, level, time.perf_counter() - started)
            request_id.reset(token)


def _log_access(scope: Scope, status: int, level: int, elapsed: float) -> None:
    """The access log's line of a request: built only when the logger keeps it (a busy
    farm logs at WARNING, and pays nothing here per pull)."""
    route = getattr(scope.get("route"), "path", "unmatched")
    log.log(
        level,
        "%s %s %s",
        scope["method"],
        scope["path"],
        status,
        extra={
            "method": scope["method"],
            "path": scope["path"],
            "route": route,
            "status": status,
            "duration_ms": round(elapsed * 1000, 3),
            **_caller(scope),
        },
    )
