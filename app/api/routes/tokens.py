"""Admin endpoints that issue, list and revoke bearer tokens."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, status

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.paging import Paging50Dep
from app.api.problems import ProblemError
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import IdPath, Page
from app.api.schemas.tokens import IssuedToken, TokenCreate, TokenOut
from app.db import tokens
from app.db.base import utcnow

router = APIRouter(prefix="/v1/tokens", tags=["tokens"], route_class=RetryingRoute)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    operation_id="issue_token",
    summary="Issue a worker or submitter token",
    responses=errors(401, 403, 503, *BODY_ERRORS),
)
def issue_token(body: TokenCreate, session: SessionDep, _admin: AdminDep) -> IssuedToken:
    """A new bearer token for a worker or a submitter, shown once in this answer (only its
    hash is stored). A worker token acts for the worker named `subject`; a submitter token
    sees and cancels only the jobs it submitted. With `expires_at` or `expires_in_seconds`
    it stops working then: a request presenting it later is answered 401 saying it
    expired."""
    now = utcnow()
    expires_at = body.expiry(now)
    if expires_at is not None and expires_at <= now:
        problem = {
            "field": "body.expires_at",
            "message": f"should be a time after now ({now.isoformat(timespec='seconds')})",
            "type": "datetime_future",
        }
        raise ProblemError(
            422,
            f"body.expires_at: {problem['message']}",
            title="Invalid request",
            errors=[problem],
        )
    row, clear = tokens.issue_token(
        session,
        role=body.role,
        subject=body.subject,
        label=body.label,
        expires_at=expires_at,
    )
    return IssuedToken(token=clear, **TokenOut.model_validate(row).model_dump())


@router.get(
    "",
    operation_id="list_tokens",
    summary="List issued tokens",
    responses=errors(401, 403, 422, 503),
)
def list_tokens(session: SessionDep, _admin: AdminDep, paging: Paging50Dep) -> Page[TokenOut]:
    """Every issued token, revoked and expired ones included, oldest first, with its expiry
    and its last use; never the token itself."""
    return paging.listing(partial(tokens.list_tokens, session), TokenOut.model_validate)


@router.delete(
    "/{token_id}",
    operation_id="revoke_token",
    summary="Revoke a token",
    responses=errors(401, 403, 404, 422, 503),
)
def revoke_token(token_id: IdPath, session: SessionDep, _admin: AdminDep) -> TokenOut:
    """The token stops working at once; revoking it again changes nothing and answers the
    same."""
    row = tokens.revoke_token(session, token_id)
    if row is None:
        raise ProblemError(404, f"no token with id {token_id}")
    return TokenOut.model_validate(row)
