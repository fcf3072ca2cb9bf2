"""Server-side retry of a request whose transaction lost a race (issue 8).

Under concurrent load PostgreSQL may abort a transaction as a deadlock victim (40P01) or
for a serialization failure (40001), and SQLite may give up waiting for the write lock.
Nothing of such a transaction was stored, and the remedy is to run it again from the
start; the client should not see a 503 for that.

Where the retry lives: a request's transaction is the ``get_session`` dependency
(app/api/deps.py), which FastAPI enters before the endpoint and leaves (commit or rollback)
after it, so re-running only the endpoint body would reuse a dead transaction. A route
class instead wraps FastAPI's whole request handler: each attempt solves the dependencies
again (a fresh session and transaction, the auth checks in it), runs the endpoint, and
commits. The commit of a ``scope="function"`` dependency runs when FastAPI's per-request
"function" exit stack closes, which FastAPI does after the handler returns; each attempt
therefore gets an exit stack of its own, closed inside the attempt, so a failure at
commit is retried too and the response is only built from a committed attempt. The body
is read once (Starlette caches it on the request). Every router uses this class, so every
state-changing endpoint is covered without each one opting in.

Only errors that :func:`app.db.retry.is_retryable_error` accepts are retried, at most
``Settings.transaction_attempts`` runs with jittered exponential backoff; when they run
out the last error reaches the problem handlers (503 with Retry-After).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from sqlalchemy.exc import DBAPIError

from app.db.retry import RetryPolicy, is_retryable_error, retry_reason
from app.metrics import TRANSACTION_RETRIES

log = logging.getLogger("app.api")

#: FastAPI's request-scope key of the exit stack that closes ``scope="function"``
#: dependencies (fastapi.routing.request_response); see the module docstring.
FUNCTION_STACK_KEY = "fastapi_function_astack"

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def policy_for(request: Request) -> RetryPolicy:
    settings = getattr(request.app.state, "settings", None)
    attempts = getattr(settings, "transaction_attempts", RetryPolicy.attempts)
    return RetryPolicy(attempts=attempts)


class RetryingRoute(APIRoute):
    """An APIRoute whose handler runs again, in a fresh transaction, when the transaction
    was aborted by a deadlock, a serialization failure or a lock wait that ran out."""

    def get_route_handler(self) -> Handler:
        handle = super().get_route_handler()

        async def retrying(request: Request) -> Response:
            policy = policy_for(request)
            retry = 0
            while True:
                try:
                    return await _attempt(handle, request)
                except DBAPIError as exc:
                    if not is_retryable_error(exc):
                        raise
                    reason = retry_reason(exc)
                    retry += 1
                    if retry >= policy.attempts:
                        TRANSACTION_RETRIES.labels(reason=reason, outcome="gave_up").inc()
                        log.warning(
                            "%s %s: %s after %d attempts; giving up",
                            request.method,
                            request.url.path,
                            reason,
                            retry,
                        )
                        raise
                    TRANSACTION_RETRIES.labels(reason=reason, outcome="retried").inc()
                    log.info(
                        "%s %s: %s, running the transaction again (retry %d)",
                        request.method,
                        request.url.path,
                        reason,
                        retry,
                    )
                    await asyncio.sleep(policy.delay(retry))

        return retrying


async def _attempt(handle: Handler, request: Request) -> Response:
    """One run of the handler with its own function-scope exit stack (commit included)."""
    outer = request.scope.get(FUNCTION_STACK_KEY)
    try:
        async with AsyncExitStack() as stack:
            request.scope[FUNCTION_STACK_KEY] = stack
            response = await handle(request)
        return response
    finally:
        request.scope[FUNCTION_STACK_KEY] = outer
