"""The token gate: every request to a route that needs a token is authenticated before
anything reads its body.

FastAPI reads and parses a request's body before it solves the route's dependencies, so a
token checked by a dependency is checked after the work it should have prevented: an
anonymous 50 MB JSON array cost 1.39 GB of memory before its 401 (issue 19). This pure
ASGI middleware looks at the headers only. For a route that needs a token (one whose
dependencies include :func:`app.api.auth.authenticate`, as the role checks do) it resolves
the bearer token (the admin token compared in constant time, an issued token looked up by its
hash) and answers 401 problem+json at once when there is none;
otherwise it leaves the principal in the ASGI scope, where ``authenticate`` picks it up.
Routes without a token (the probes, /metrics, the API documents) and unknown paths (the
router's 404 and 405) pass untouched.
An issued token's answer is remembered in memory (:class:`KnownTokens`, keyed by the
token's hash) and used again without a transaction of its own (a thread-pool hop, a pooled
connection and three round trips per request before) as long as the process's revocation
generation (app/db/revocations.py) says no revocation committed since it was looked up:
a revoked token is refused on the very next request, by every process. Unknown tokens are
not remembered (a caller sending random tokens cannot fill the memory), and the memory
holds at most :data:`KnownTokens.LIMIT` tokens.
The gate is given the routes of the service's own routers. A route added to the app in
another way would pass the gate and then meet ``authenticate`` without a principal: it
answers 401, after the body was read, but never lets a caller through.
A token past its expiry is answered 401 saying so (remembered answers carry the expiry, so
they expire too); a token's use is written down coarsely (app/api/token_use.py); a token
over its request rate is answered 429 (app/api/rate_limits.py).
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterable

import anyio.to_thread
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
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
    expired_token,
    principal_of,
    stored_principal,
)
from app.api.problems import POOL_EXHAUSTED
from app.api.rate_limits import TokenBuckets, is_long_poll_pull
from app.api.raw_problems import send_problem
from app.api.token_use import TokenUseRecorder
from app.db.base import utcnow
from app.db.dialect import is_lost_connection, is_retryable_error
from app.db.engine import Database
from app.db.revocations import RevocationWatch
from app.db.tokens import DirectTokenReader, hash_token
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


class KnownTokens:
    """Issued tokens' principals, by token hash, each with the revocation generation it
    was looked up at (see the module docstring)."""

    #: The most tokens remembered; when full, the memory starts again empty (a farm has
    #: one token per worker and submitter: far fewer).
    LIMIT = 65_536

    def __init__(self, watch: RevocationWatch) -> None:
        self.watch = watch
        self._known: dict[str, tuple[Principal, int]] = {}

    def get(self, token_hash: str) -> Principal | None:
        """The remembered principal when it may be used now, else None (look it up)."""
        known = self._known.get(token_hash)
        if known is None:
            return None
        generation = self.watch.current()
        if generation is None or known[1] != generation:
            return None
        return known[0]

    def remember(self, token_hash: str, principal: Principal, generation: int) -> None:
        """Remember an answer looked up at ``generation`` (read before the lookup began)."""
        if len(self._known) >= self.LIMIT:
            self._known.clear()
        self._known[token_hash] = (principal, generation)


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
        revocations: RevocationWatch,
    ) -> None:
        self.app = app
        self.rules = route_rules(routes)
        self.database = database
        self.settings = settings
        self.known = KnownTokens(revocations)
        self.direct = DirectTokenReader.for_url(database.url)
        self.uses = TokenUseRecorder(database, settings.token_last_use_seconds)
        self.buckets = (
            TokenBuckets(
                settings.rate_limit_per_second,
                settings.rate_limit_burst,
                processes=settings.server_processes,
            )
            if settings.rate_limit_per_second > 0
            else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not needs_token(self.rules, scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        token = bearer_token(_authorization(scope))
        if token is None:
            await send_problem(scope, send, 401, NO_TOKEN, headers=_CHALLENGE)
            return
        principal = admin_principal(token, self.settings.admin_token)
        token_hash = None
        if principal is None:
            token_hash = hash_token(token)
            read, principal = self._read_directly(token_hash)
            if not read:
                principal = self.known.get(token_hash)
            if not read and principal is None:
                try:
                    principal = await anyio.to_thread.run_sync(self._look_up, token_hash)
                except OperationalError as exc:
                    await self._database_unavailable(scope, send, exc)
                    return
                except PoolTimeout as exc:
                    log.warning("token lookup found no database connection in time: %s", exc)
                    await send_problem(
                        scope, send, 503, POOL_EXHAUSTED, headers={"Retry-After": "1"}
                    )
                    return
        if principal is None:
            await send_problem(scope, send, 401, UNKNOWN_TOKEN, headers=_CHALLENGE)
            return
        if principal.expires_at is not None and principal.expired(utcnow()):
            detail = expired_token(principal.expires_at)
            await send_problem(scope, send, 401, detail, headers=_CHALLENGE)
            return
        if self.buckets is not None and not self._passes_unlimited(scope):
            # Per token, by its hash like the use record (app/api/token_use.py): the admin
            # token has none and counts by its subject.
            key = principal.subject if token_hash is None else token_hash
            wait = self.buckets.take(key)
            if wait > 0:
                detail, headers = self.buckets.refusal(wait)
                await send_problem(scope, send, 429, detail, headers=headers)
                return
        if principal.token_id is not None and token_hash is not None and self.uses.due(token_hash):
            await anyio.to_thread.run_sync(self.uses.record, principal.token_id, token_hash)
        scope[PRINCIPAL_SCOPE_KEY] = principal
        await self.app(scope, receive, send)

    def _passes_unlimited(self, scope: Scope) -> bool:
        """Long-poll pulls are not counted unless JOBMATCH_RATE_LIMIT_LONG_POLL says so."""
        return not self.settings.rate_limit_long_poll and is_long_poll_pull(
            scope["method"], scope["path"], scope.get("query_string", b"")
        )

    def _read_directly(self, token_hash: str) -> tuple[bool, Principal | None]:
        """SQLite: (True, the principal or None for an unknown token) read in the event
        loop (app/db/tokens.py); (False, None) when not read (another database, or the
        file could not be read: then the pooled lookup decides and words any error)."""
        if self.direct is None:
            return False, None
        try:
            found = self.direct.find(token_hash)
        except sqlite3.Error:
            return False, None
        return True, None if found is None else principal_of(found)

    def _look_up(self, token_hash: str) -> Principal | None:
        """The pooled lookup; once more when the pooled connection turned out dead (there
        is no pre-ping: app/db/dialect.py), as a request's own transaction is."""
        try:
            return self._look_up_once(token_hash)
        except OperationalError as exc:
            if not is_lost_connection(exc):
                raise
            return self._look_up_once(token_hash)

    def _look_up_once(self, token_hash: str) -> Principal | None:
        generation = self.known.watch.generation  # before the lookup's snapshot
        with self.database.transaction(write=False) as session:
            principal = stored_principal(session, token_hash)
        if principal is not None:
            self.known.remember(token_hash, principal, generation)
        return principal

    @staticmethod
    async def _database_unavailable(scope: Scope, send: Send, exc: OperationalError) -> None:
        # The same answers the problem handlers give a request whose own transaction failed.
        if is_retryable_error(exc):
            detail, retry_after = "the database is busy; retry shortly", "1"
        else:
            log.warning("token lookup failed: %s", exc.orig)
            detail, retry_after = "the database is unavailable", "5"
        await send_problem(scope, send, 503, detail, headers={"Retry-After": retry_after})
