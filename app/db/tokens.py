"""Issuing, resolving and revoking bearer tokens (SQL side of authentication)."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import ApiToken, Role


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue_token(
    session: Session, *, role: Role, subject: str, label: str = ""
) -> tuple[ApiToken, str]:
    """Store a new token's hash and return the row with the clear token (shown once)."""
    clear = "jm_" + secrets.token_urlsafe(32)
    row = ApiToken(token_hash=hash_token(clear), role=role, subject=subject, label=label)
    session.add(row)
    session.flush()
    return row, clear


#: Built once: every authenticated request runs it, and building the statement and
#: loading an ORM object cost more than the lookup itself.
_ACTIVE_TOKEN = select(ApiToken.role, ApiToken.subject).where(
    ApiToken.token_hash == bindparam("p_hash"), ApiToken.revoked_at.is_(None)
)


def find_active_token(session: Session, clear: str) -> tuple[Role, str] | None:
    """The role and subject of the unrevoked token with this clear text, if any."""
    row = session.execute(_ACTIVE_TOKEN, {"p_hash": hash_token(clear)}).one_or_none()
    return None if row is None else (row[0], row[1])


def revoke_token(session: Session, token_id: int) -> ApiToken | None:
    row = session.get(ApiToken, token_id)
    if row is not None and row.revoked_at is None:
        row.revoked_at = utcnow()
        session.flush()
    return row


def list_tokens(session: Session, *, limit: int, offset: int) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id).limit(limit).offset(offset)))
