"""Bearer-token authentication and role checks.

401 when no usable token is presented, 403 when the token is valid but its role (or the
resource it is bound to) does not allow the request. The token itself is resolved by the
token gate (app/api/token_gate.py) before anything reads the request body; the dependencies
here read what it found and check roles.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr
from sqlalchemy.orm import Session

from app.api.problems import ProblemError
from app.api.schemas.common import NamePath
from app.db.models import Role
from app.db.tokens import ActiveToken, find_active_token

bearer_scheme = HTTPBearer(
    auto_error=False, description="A token issued by jobmatch, or the admin token."
)

#: Where the token gate (app/api/token_gate.py) leaves the caller it resolved, in the ASGI
#: scope, for :func:`authenticate` to read without a second lookup.
PRINCIPAL_SCOPE_KEY = "jobmatch.principal"

NO_TOKEN = "a bearer token is required (Authorization: Bearer <token>)"
UNKNOWN_TOKEN = "the bearer token is unknown or revoked"


def expired_token(expires_at: datetime) -> str:
    """The 401 detail of a token presented after its expiry."""
    return f"the bearer token expired at {expires_at.isoformat(timespec='seconds')}"


@dataclass(frozen=True)
class Principal:
    """Who is calling: a role and, for workers and submitters, the name they act for, with
    the issued token's id and expiry (None for the admin token)."""

    role: Role
    subject: str
    token_id: int | None = None
    expires_at: datetime | None = None

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


def principal_of(token: ActiveToken) -> Principal:
    return Principal(
        role=token.role, subject=token.subject, token_id=token.id, expires_at=token.expires_at
    )


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, None without one.

    The scheme is case-insensitive (RFC 9110 section 11.1), as FastAPI's HTTPBearer reads it.
    """
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def admin_principal(token: str, admin_token: SecretStr | None) -> Principal | None:
    """The admin, when the token is the configured admin token (compared in constant time)."""
    if admin_token is not None and hmac.compare_digest(
        token.encode("utf-8"), admin_token.get_secret_value().encode("utf-8")
    ):
        return Principal(role=Role.ADMIN, subject="admin")
    return None


def stored_principal(session: Session, token_hash: str) -> Principal | None:
    """The role and subject of an issued, unrevoked token, looked up by its hash (expired
    or not: see :meth:`Principal.expired`)."""
    found = find_active_token(session, token_hash)
    return None if found is None else principal_of(found)


def _unauthorized(detail: str) -> ProblemError:
    return ProblemError(401, detail, headers={"WWW-Authenticate": "Bearer"})


async def authenticate(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Principal:
    """The caller the token gate resolved before the body was read.

    ``_credentials`` is unused here: it declares the bearer scheme in the OpenAPI document.
    A route that depends on this function is one the gate guards, so a missing principal
    means the gate refused nothing it should have; answering 401 keeps that failure closed.
    """
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY)
    if not isinstance(principal, Principal):
        raise _unauthorized(NO_TOKEN)
    return principal


PrincipalDep = Annotated[Principal, Depends(authenticate)]

# The role checks below are ``async def``: they only look at the principal, and FastAPI
# runs a plain ``def`` dependency in its thread pool, a hop that cost more than the check.


def _require_role(principal: Principal, roles: tuple[Role, ...], needs: str) -> Principal:
    """The principal when its role is one of ``roles``, else 403 saying what the endpoint needs."""
    if principal.role not in roles:
        raise ProblemError(403, f"this endpoint needs {needs}")
    return principal


async def require_admin(principal: PrincipalDep) -> Principal:
    return _require_role(principal, (Role.ADMIN,), "the admin role")


AdminDep = Annotated[Principal, Depends(require_admin)]


async def require_submitter(principal: PrincipalDep) -> Principal:
    """Admins and submitters may submit and read jobs."""
    return _require_role(principal, (Role.ADMIN, Role.SUBMITTER), "the submitter or admin role")


SubmitterDep = Annotated[Principal, Depends(require_submitter)]


async def require_worker(name: NamePath, principal: PrincipalDep) -> Principal:
    """The worker named in the path, acting for itself with its own token."""
    _require_role(principal, (Role.WORKER,), "a worker token")
    if principal.subject != name:
        raise ProblemError(403, f"this token belongs to worker {principal.subject!r}, not {name!r}")
    return principal


WorkerDep = Annotated[Principal, Depends(require_worker)]


async def require_any_worker(principal: PrincipalDep) -> Principal:
    return _require_role(principal, (Role.WORKER,), "a worker token")


AnyWorkerDep = Annotated[Principal, Depends(require_any_worker)]
