"""Bearer-token authentication and role checks.

401 when no usable token is presented, 403 when the token is valid but its role (or the
resource it is bound to) does not allow the request.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.deps import SessionDep
from app.api.problems import ProblemError
from app.db.models import Role
from app.db.tokens import find_active_token

bearer_scheme = HTTPBearer(
    auto_error=False, description="A token issued by jobmatch, or the admin token."
)


@dataclass(frozen=True)
class Principal:
    """Who is calling: a role and, for workers and submitters, the name they act for."""

    role: Role
    subject: str


def _unauthorized(detail: str) -> ProblemError:
    return ProblemError(401, detail, headers={"WWW-Authenticate": "Bearer"})


def authenticate(
    request: Request,
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Principal:
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise _unauthorized("a bearer token is required (Authorization: Bearer <token>)")
    token = credentials.credentials
    admin = request.app.state.settings.admin_token
    if admin is not None and hmac.compare_digest(
        token.encode("utf-8"), admin.get_secret_value().encode("utf-8")
    ):
        return Principal(role=Role.ADMIN, subject="admin")
    found = find_active_token(session, token)
    if found is None:
        raise _unauthorized("the bearer token is unknown or revoked")
    role, subject = found
    return Principal(role=role, subject=subject)


PrincipalDep = Annotated[Principal, Depends(authenticate)]

# The role checks below are ``async def``: they only look at the principal, and FastAPI
# runs a plain ``def`` dependency in its thread pool, a hop that cost more than the check.


async def require_admin(principal: PrincipalDep) -> Principal:
    if principal.role is not Role.ADMIN:
        raise ProblemError(403, "this endpoint needs the admin role")
    return principal


AdminDep = Annotated[Principal, Depends(require_admin)]


async def require_submitter(principal: PrincipalDep) -> Principal:
    """Admins and submitters may submit and read jobs."""
    if principal.role not in (Role.ADMIN, Role.SUBMITTER):
        raise ProblemError(403, "this endpoint needs the submitter or admin role")
    return principal


SubmitterDep = Annotated[Principal, Depends(require_submitter)]


async def require_worker(name: str, principal: PrincipalDep) -> Principal:
    """The worker named in the path, acting for itself with its own token."""
    if principal.role is not Role.WORKER:
        raise ProblemError(403, "this endpoint needs a worker token")
    if principal.subject != name:
        raise ProblemError(403, f"this token belongs to worker {principal.subject!r}, not {name!r}")
    return principal


WorkerDep = Annotated[Principal, Depends(require_worker)]


async def require_any_worker(principal: PrincipalDep) -> Principal:
    if principal.role is not Role.WORKER:
        raise ProblemError(403, "this endpoint needs a worker token")
    return principal


AnyWorkerDep = Annotated[Principal, Depends(require_any_worker)]
