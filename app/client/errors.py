"""What the client raises: API problems by status, and failures to reach the server.

Every error the server sends is an RFC 9457 problem document (application/problem+json);
:func:`error_for_response` turns it into the :class:`ApiError` subclass of its status, so a
caller (the CLI, the agent) catches what it cares about and prints ``str(error)``, one line,
without a traceback. Transport failures are :class:`ServerUnreachable`, never a raw httpx
exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx2


class ClientError(Exception):
    """Something went wrong talking to a jobmatch server (base of every client error)."""


@dataclass(frozen=True)
class FieldError:
    """One entry of the ``errors`` array of a 422 problem: where and what."""

    field: str
    message: str
    type: str | None = None
    notation: str | None = None
    position: int | None = None
    expected: str | None = None
    input: str | None = None


class ApiError(ClientError):
    """The server answered with an error status (4xx or 5xx) and, usually, a problem body."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        type: str = "about:blank",
        instance: str | None = None,
        errors: tuple[FieldError, ...] = (),
        retry_after: float | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}" if detail else f"{status} {title}")
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type
        self.instance = instance
        self.errors = errors
        self.retry_after = retry_after
        self.body = body


class BadRequest(ApiError):
    """400: the server could not read the request at all (malformed syntax)."""


class Unauthorized(ApiError):
    """401: no token was sent, or the token is unknown or revoked."""


class Forbidden(ApiError):
    """403: the token is valid, but its role or its worker may not do this."""


class NotFound(ApiError):
    """404: the job, worker, token, task, attribute or PE named in the path does not exist."""


class MethodNotAllowed(ApiError):
    """405: the path exists but not with this HTTP method (a client older or newer than the
    server)."""


class RequestTimeout(ApiError):
    """408: the server gave up waiting for the request's headers or body."""


class Conflict(ApiError):
    """409: the request contradicts the current state (a finished job, a name in use...)."""


class PayloadTooLarge(ApiError):
    """413: the request body is over the server's size limit."""


class ValidationFailed(ApiError):
    """422: the request was read but a field is invalid; ``errors`` says which and why
    (for a notation: its position and what was expected)."""


class TooManyRequests(ApiError):
    """429: the server asks the client to slow down; ``retry_after`` says for how long."""


class ServerError(ApiError):
    """500 or another 5xx: the server failed on its side."""


class ServiceUnavailable(ServerError):
    """503: the server or its database is busy or down for now; retry after
    ``retry_after`` seconds."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    408: RequestTimeout,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationFailed,
    429: TooManyRequests,
    503: ServiceUnavailable,
}


class ServerUnreachable(ClientError):
    """No answer from the server: the connection was refused or dropped, the name did not
    resolve, or a timeout passed. ``sent`` says whether the request may have reached the
    server (False: it surely did not, so sending it again is always safe)."""

    def __init__(self, url: str, reason: str, *, sent: bool) -> None:
        super().__init__(f"cannot reach the jobmatch server at {url}: {reason}")
        self.url = url
        self.reason = reason
        self.sent = sent


class UnexpectedResponse(ClientError):
    """The server answered, but not with what this client understands (not JSON, or JSON of
    another shape): a proxy in the way, or a server of another version."""


def error_for_response(response: httpx2.Response) -> ApiError:
    """The typed exception for an error response, read from its problem document when it has
    one (a proxy's HTML error page still gives a typed error with the status)."""
    status = response.status_code
    body: Any = None
    try:
        body = response.json()
    except ValueError:
        body = None
    problem = body if isinstance(body, dict) else {}
    title = str(problem.get("title") or response.reason_phrase or "Error")
    detail = str(problem.get("detail") or (response.text[:200] if body is None else ""))
    errors = tuple(_field_error(entry) for entry in problem.get("errors") or () if entry)
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(
        status,
        title,
        detail,
        type=str(problem.get("type") or "about:blank"),
        instance=problem.get("instance"),
        errors=errors,
        retry_after=retry_after_seconds(response.headers.get("Retry-After")),
        body=body,
    )


def _field_error(entry: Any) -> FieldError:
    if not isinstance(entry, dict):
        return FieldError(field="", message=str(entry))
    position = entry.get("position")
    return FieldError(
        field=str(entry.get("field", "")),
        message=str(entry.get("message", "")),
        type=_text(entry.get("type")),
        notation=_text(entry.get("notation")),
        position=position if isinstance(position, int) else None,
        expected=_text(entry.get("expected")),
        input=_text(entry.get("input")),
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After in seconds (RFC 9110 section 10.2.3); the HTTP-date form is read as None,
    leaving the wait to the backoff."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return max(seconds, 0.0)
