"""Problem responses sent straight over ASGI, by middleware that answers before FastAPI
(and its exception handlers) ever sees the request: a refused body size, a missing token.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Scope, Send

from app.api.problems import PROBLEM_JSON, problem_document

#: Sent with every answer given before the request body was read: the connection is closed
#: after the answer instead of the server reading (and discarding) the rest of the body.
CLOSE = (b"connection", b"close")


async def send_problem(
    scope: Scope,
    send: Send,
    status: int,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    close: bool = False,
    title: str | None = None,
    **extensions: Any,
) -> None:
    """Answer the request with an application/problem+json body (``extensions``: members
    of the document besides the standard ones, RFC 9457 section 3.2)."""
    document = problem_document(status, detail, scope.get("path", ""), title=title, **extensions)
    body = json.dumps(document).encode()
    raw_headers = [
        (b"content-type", PROBLEM_JSON.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    if close:
        raw_headers.append(CLOSE)
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
