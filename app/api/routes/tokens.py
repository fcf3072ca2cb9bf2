"""Admin endpoints that issue, list and revoke bearer tokens."""

from __future__ import annotations

from fastapi import APIRouter, status

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.problems import ProblemError
from app.api.retries import RetryingRoute
from app.api.schemas.common import IdPath, LimitQuery, OffsetQuery, Page, page_of
from app.api.schemas.tokens import IssuedToken, TokenCreate, TokenOut
from app.db import tokens

router = APIRouter(prefix="/v1/tokens", tags=["tokens"], route_class=RetryingRoute)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=IssuedToken)
def issue_token(body: TokenCreate, session: SessionDep, _admin: AdminDep) -> IssuedToken:
    row, clear = tokens.issue_token(session, role=body.role, subject=body.subject, label=body.label)
    return IssuedToken(token=clear, **TokenOut.model_validate(row).model_dump())


@router.get("", response_model=Page[TokenOut])
def list_tokens(
    session: SessionDep, _admin: AdminDep, limit: LimitQuery = 50, offset: OffsetQuery = 0
) -> Page[TokenOut]:
    rows = tokens.list_tokens(session, limit=limit + 1, offset=offset)
    return page_of([TokenOut.model_validate(r) for r in rows], limit, offset)


@router.delete("/{token_id}", response_model=TokenOut)
def revoke_token(token_id: IdPath, session: SessionDep, _admin: AdminDep) -> TokenOut:
    row = tokens.revoke_token(session, token_id)
    if row is None:
        raise ProblemError(404, f"no token with id {token_id}")
    return TokenOut.model_validate(row)
