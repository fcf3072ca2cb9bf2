"""Request bodies: a size limit and a time limit, enforced while the bytes arrive.

Without them one anonymous client could make the server hold a body of any size (a 50 MB
JSON array of ``{}`` cost 1.39 GB before it was refused, issue 19) or keep a request open
by sending its body one byte at a time. This pure ASGI middleware:

* answers 413 problem+json at once, without reading anything, when the declared
  Content-Length is over the limit;
* counts the bytes of every body as the application receives them (chunked bodies have no
  declared length) and raises 413 as soon as the count passes the limit;
* raises 408 when the whole body has not arrived within the body timeout;
* marks every response given before the body was read to its end ``Connection: close``, so
  that the server closes the connection instead of reading and discarding the rest.

The 413 and 408 raised while the body is read are HTTP exceptions: FastAPI lets them
through its body parsing, and the problem handlers (app/api/problems.py) answer them.
"""

from __future__ import annotations

import asyncio

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.raw_problems import CLOSE, send_problem


class BodyTooLargeError(HTTPException):
    """The request body grew past the configured maximum while it was being received."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, too_large(limit))


class BodyTooSlowError(HTTPException):
    """The request body did not arrive completely within the configured body timeout."""

    def __init__(self, timeout: float) -> None:
        super().__init__(
            408,
            f"the request body did not arrive within {timeout:g} s (JOBMATCH_BODY_TIMEOUT_SECONDS)",
        )


def too_large(limit: int) -> str:
    return f"the request body is larger than the limit of {limit} bytes (JOBMATCH_MAX_BODY_BYTES)"


def declared_body(scope: Scope) -> tuple[bool, int | None]:
    """Whether the request has a body at all, and its declared length when it says one.

    HTTP/1.1 (RFC 9112 section 6.3): a request has a body when it carries Content-Length or
    Transfer-Encoding; the server's parser has already refused malformed values.
    """
    length: int | None = None
    has_body = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                length = None
            has_body = length is None or length > 0
        elif name == b"transfer-encoding":
            has_body = True
    return has_body, length


class _GuardedBody:
    """One request's body as the application reads it: counted, timed, and remembered as
    complete or not for the response headers."""

    __slots__ = ("complete", "deadline", "limit", "receive", "received", "send", "timeout")

    def __init__(self, receive: Receive, send: Send, limit: int, timeout: float) -> None:
        self.receive = receive
        self.send = send
        self.limit = limit
        self.timeout = timeout
        self.deadline = asyncio.get_running_loop().time() + timeout
        self.received = 0
        self.complete = False

    async def receive_guarded(self) -> Message:
        if self.complete:
            # Past the body only a disconnect can arrive; waiting for it is not our limit.
            return await self.receive()
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await self.receive()
        except TimeoutError:
            raise BodyTooSlowError(self.timeout) from None
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                raise BodyTooLargeError(self.limit)
            self.complete = not message.get("more_body", False)
        return message

    async def send_closing(self, message: Message) -> None:
        if message["type"] == "http.response.start" and not self.complete:
            message["headers"] = [*message.get("headers", []), CLOSE]
        await self.send(message)


class BodyLimitMiddleware:
    """Enforces the body size and time limits described in the module docstring."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        has_body, length = declared_body(scope)
        if not has_body:
            await self.app(scope, receive, send)
            return
        if length is not None and length > self.max_bytes:
            await send_problem(scope, send, 413, too_large(self.max_bytes), close=True)
            return
        body = _GuardedBody(receive, send, self.max_bytes, self.timeout)
        await self.app(scope, body.receive_guarded, body.send_closing)
