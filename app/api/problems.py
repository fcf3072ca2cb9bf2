"""RFC 9457 problem details: every error leaves the service as application/problem+json."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.schemas.common import PATTERN_WORDS
from app.db.dialect import is_retryable_error
from app.matching.errors import (
    ConflictError,
    ForbiddenError,
    InvalidFieldError,
    NotFoundError,
    WorkerExistsError,
)
from app.notations.errors import NotationError

PROBLEM_JSON = "application/problem+json"
#: The 503's detail when no pooled database connection came free in time.
POOL_EXHAUSTED = "every database connection of this server process is in use; retry shortly"
log = logging.getLogger("app.api")


class ProblemError(Exception):
    """An error the API reports to the client as-is, with an HTTP status."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        title: str | None = None,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title or HTTPStatus(status).phrase
        self.headers = headers
        self.extensions = extensions


def problem_document(
    status: int, detail: str, instance: str, *, title: str | None = None, **extensions: Any
) -> dict[str, Any]:
    """The RFC 9457 body every error carries (also sent by the ASGI middleware that answers
    before FastAPI runs, app/api/raw_problems.py)."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": instance,
    }
    body.update(extensions)
    return body


def problem_response(
    request: Request,
    status: int,
    detail: str,
    *,
    title: str | None = None,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    body = problem_document(status, detail, request.url.path, title=title, **extensions)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


#: pydantic writes an enum member as its repr (``<Role.WORKER: 'worker'>``); people and
#: clients know the value.
_ENUM_REPR = re.compile(r"<\w+\.\w+: ('[^']*')>")


def human_message(error: Mapping[str, Any]) -> str:
    """A validation error's message without internals: a pattern in words (never the
    regular expression), enum members by their values."""
    message = str(error.get("msg", ""))
    if error.get("type") == "string_pattern_mismatch":
        pattern = str((error.get("ctx") or {}).get("pattern", ""))
        words = PATTERN_WORDS.get(pattern, "a value of the form the field's description gives")
        return f"should be {words}"
    return _ENUM_REPR.sub(r"\1", message)


def _field_path(location: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in location)


#: The one error of a body whose bytes are not UTF-8 (RFC 8259 section 8.1: JSON exchanged
#: between systems is UTF-8).
_NOT_UTF8 = {
    "field": "body",
    "message": "the body is not UTF-8 JSON",
    "type": "json_invalid",
}

#: The one error of a body FastAPI did not parse because its Content-Type is not JSON.
_NOT_JSON = {
    "field": "body",
    "message": "the body must be JSON, sent with Content-Type: application/json",
    "type": "content_type",
}


def _field_problem(error: Any) -> dict[str, Any]:
    """One entry of a 422's ``errors`` from one of pydantic's (or FastAPI's) errors."""
    location = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid":
        # FastAPI puts the character offset where the field path goes: ("body", 17).
        position = location[1] if len(location) > 1 and isinstance(location[1], int) else None
        reason = (error.get("ctx") or {}).get("error") or "JSON decode error"
        return {
            "field": "body",
            "message": f"the body is not valid JSON: {reason}",
            "type": "json_invalid",
            "position": position,
        }
    if location == ("body",) and isinstance(error.get("input"), bytes):
        return dict(_NOT_JSON)
    return {
        "field": _field_path(location),
        "message": human_message(error),
        "type": error.get("type", ""),
    }


def _invalid_body(request: Request, errors: list[dict[str, Any]]) -> JSONResponse:
    summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return problem_response(
        request,
        422,
        f"request validation failed: {summary}",
        title="Invalid request",
        errors=errors,
    )


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every exception with an application/problem+json body (RFC 9457). Long
    because it is a list: one short handler per exception class, kept side by side so that
    which error gives which status reads in one place."""

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
        return problem_response(
            request, exc.status, exc.detail, title=exc.title, headers=exc.headers, **exc.extensions
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
            # FastAPI's "There was an error parsing the body": bytes that are not UTF-8.
            return _invalid_body(request, [_NOT_UTF8])
        return problem_response(
            request, exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None)
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _invalid_body(request, [_field_problem(error) for error in exc.errors()])

    @app.exception_handler(NotFoundError)
    async def _not_found(request: Request, exc: NotFoundError) -> JSONResponse:
        return problem_response(request, 404, str(exc))

    @app.exception_handler(ConflictError)
    async def _conflict(request: Request, exc: ConflictError) -> JSONResponse:
        return problem_response(request, 409, str(exc))

    @app.exception_handler(WorkerExistsError)
    async def _worker_exists(request: Request, exc: WorkerExistsError) -> JSONResponse:
        return problem_response(request, 409, str(exc), worker=exc.worker)

    @app.exception_handler(ForbiddenError)
    async def _forbidden(request: Request, exc: ForbiddenError) -> JSONResponse:
        return problem_response(request, 403, str(exc))

    @app.exception_handler(InvalidFieldError)
    async def _invalid_field(request: Request, exc: InvalidFieldError) -> JSONResponse:
        error: dict[str, Any] = {"field": f"{exc.location}.{exc.field}", "message": exc.message}
        if exc.error is not None:
            error.update(exc.error.as_dict())
        title = "Invalid notation" if exc.error is not None else "Invalid request"
        return problem_response(request, 422, str(exc), title=title, errors=[error])

    @app.exception_handler(NotationError)
    async def _notation(request: Request, exc: NotationError) -> JSONResponse:
        # Raised by a parser that was not wrapped with a field name by the endpoint.
        return problem_response(
            request, 422, str(exc), title="Invalid notation", errors=[exc.as_dict()]
        )

    @app.exception_handler(IntegrityError)
    async def _integrity(request: Request, exc: IntegrityError) -> JSONResponse:
        # A uniqueness or reference rule of the schema refused the change (a concurrent
        # request won, or a check the services do not make first); nothing was stored.
        log.warning("integrity error: %s", exc.orig)
        return problem_response(request, 409, "the change conflicts with existing data")

    @app.exception_handler(DataError)
    async def _data(request: Request, exc: DataError) -> JSONResponse:
        # A value the database cannot store (NUL in text, a number out of its range) that
        # validation let through; the transaction is rolled back, nothing is stored.
        log.warning("database refused a value: %s", exc.orig)
        return problem_response(
            request, 422, "a value in the request cannot be stored", title="Invalid request"
        )

    @app.exception_handler(OperationalError)
    async def _operational(request: Request, exc: OperationalError) -> JSONResponse:
        if is_retryable_error(exc):
            # A lock wait, deadlock or serialization failure that outlived the server's own
            # retries (app/api/retries.py): the next attempt will probably succeed.
            return problem_response(
                request, 503, "the database is busy; retry shortly", headers={"Retry-After": "1"}
            )
        log.exception("database error")
        return problem_response(
            request, 503, "the database is unavailable", headers={"Retry-After": "5"}
        )

    @app.exception_handler(PoolTimeout)
    async def _pool_timeout(request: Request, exc: PoolTimeout) -> JSONResponse:
        # Every pooled connection stayed checked out for the pool's whole timeout (a burst
        # of writers queued on SQLite's one write lock, say): the process is busy, not
        # broken, and nothing was done.
        log.warning("no database connection within the pool's timeout: %s", exc)
        return problem_response(request, 503, POOL_EXHAUSTED, headers={"Retry-After": "1"})

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
        # Logged with the traceback; the client sees no internals.
        log.exception("unhandled error")
        return problem_response(request, 500, "an internal error occurred; it has been logged")


def install_problem_openapi(app: FastAPI) -> None:
    """Describe error bodies as application/problem+json, the media type they carry."""
    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = original()
        for operations in spec.get("paths", {}).values():
            for operation in operations.values():
                for status, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if status[:1] in "45" and "application/json" in content:
                        content[PROBLEM_JSON] = content.pop("application/json")
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
