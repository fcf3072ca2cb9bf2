"""The token gate: every request to a route that needs a token is authenticated before
anything reads its body.

FastAPI reads and parses a request's body before it solves the route's dependencies, so a
token checked by a dependency is checked after the work it should have prevented: an
anonymous 50 MB JSON array cost 1.39 GB of memory before its 401 (issue 19). This pure
ASGI middleware looks at the headers only. For a route that needs a token (one whose
dependencies include :func:`app.api.auth.authenticate`, as the role checks do) it resolves
the bearer token (the admin token compared in constant time, an issued token looked up by its hash,
one lookup per request as before) and answers 401 problem+json at once when there is none;
otherwise it leaves the principal in the ASGI scope, where ``authenticate`` picks it up.
Routes without a token (the probes, /metrics, the API documents) and unknown paths (the
router's 404 and 405) pass untouched.
The gate is given the routes of the service's own routers. A route added to the app in
another way would pass the gate and then meet ``authenticate`` without a principal: it
answers 401, after the body was read, but never lets a caller through.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

import anyio.to_thread
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from sqlalchemy.exc import OperationalError
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.auth import (
    NO_TOKEN,
    PRINCIPAL_SCOPE_KEY,
    UNKNOWN_TOKEN,
    Principal,
    admin_principal,
    authenticate,
    bearer_token,
    stored_principal,
)
from app.api.raw_problems import send_problem
from app.db.dialect import is_retryable_error
from app.db.engine import Database
from app.settings import Settings

log = logging.getLogger("app.api")

#: One route as the gate sees it: its path pattern, its methods, and whether it needs a token.
RouteRule = tuple[re.Pattern[str], frozenset[str], bool]

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def depends_on_authentication(dependant: Dependant) -> bool:
    """True when :func:`~app.api.auth.authenticate` is among the dependant's dependencies,
    at any depth (the role checks depend on it)."""
    return any(
        sub.call is authenticate or depends_on_authentication(sub) for sub in dependant.dependencies
    )


def route_rules(routes: Iterable[BaseRoute]) -> list[RouteRule]:
    """The rules of the API routes, in the order the router tries them."""
    return [
        (
            route.path_regex,
            frozenset(route.methods or ()),
            depends_on_authentication(route.dependant),
        )
        for route in routes
        if isinstance(route, APIRoute)
    ]


def needs_token(rules: list[RouteRule], method: str, path: str) -> bool:
    """Whether the route the router will pick for this request needs a token; unknown
    paths and methods (the router's 404 and 405) do not: no endpoint runs for them."""
    if method == "HEAD":
        method = "GET"  # Starlette serves HEAD with the GET route
    for pattern, methods, guarded in rules:
        if method in methods and pattern.match(path):
            return guarded
    return False


def _authorization(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            return bytes(value).decode("latin-1")
    return None


class TokenGateMiddleware:
    """Authenticates requests to guarded routes from their headers alone (see the module
    docstring); the role and ownership checks stay with each route's dependencies."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Iterable[BaseRoute],
        database: Database,
        settings: Settings,
    ) -> None:
        self.app = app
        self.rules = route_rules(routes)
        self.database = database
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not needs_token(self.rules, scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        token = bearer_token(_authorization(scope))
        if token is None:
            await send_problem(scope, send, 401, NO_TOKEN, headers=_CHALLENGE)
            return
        principal = admin_principal(token, self.settings.admin_token)
        if principal is None:
            try:
                principal = await anyio.to_thread.run_sync(self._look_up, token)
            except OperationalError as exc:
                await self._database_unavailable(scope, send, exc)
                return
        if principal is None:
            await send_problem(scope, send, 401, UNKNOWN_TOKEN, headers=_CHALLENGE)
            return
        scope[PRINCIPAL_SCOPE_KEY] = principal
        await self.app(scope, receive, send)

    def _look_up(self, token: str) -> Principal | None:
        with self.database.transaction(write=False) as session:
            return stored_principal(session, token)

    @staticmethod
    async def _database_unavailable(scope: Scope, send: Send, exc: OperationalError) -> None:
        # The same answers the problem handlers give a request whose own transaction failed.
        if is_retryable_error(exc):
            detail, retry_after = "the database is busy; retry shortly", "1"
        else:
            log.warning("token lookup failed: %s", exc.orig)
            detail, retry_after = "the database is unavailable", "5"
        await send_problem(scope, send, 503, detail, headers={"Retry-After": retry_after})
